#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Boot two guests joined by a qemu network link and run one guest script on
# both (it learns its role from SDP_PAIR_ROLE, "a" or "b"); return success
# only if both guests pass.  -m sets each guest's memory, and SDP_VM_APPEND
# (kernel arguments, as for scripts/vm/run.sh) reaches both: the debug
# kernel of `make check-debug` needs 2048 MB and its arguments.
#
#   run-pair.sh [-k KVER] [-o DIR] [-t TIMEOUT_S] [-m MEM_MB] [-l stream|dgram] [-w] SCRIPT [ARGS...]
#
# The link: `-netdev stream` (TCP between the two qemus: lossless, ~20 ms
# added to small round trips) or `-netdev dgram` (UDP: lower latency, drops
# frames under load).  Guest a is 10.78.0.1 / fd78::1, guest b 10.78.0.2 /
# fd78::2, each with a virtio NIC (eth0); scripts/vm/pair-lib.sh brings up
# the addresses, Soft-RoCE and sdp.ko and gives the rendezvous helpers.
#
# DIR (default build/vm/pair/KVER) receives a/ and b/ (each guest's results
# as scripts/vm/run.sh writes them), link.pcap (the frames on guest a's
# NIC, qemu filter-dump, whole frames), and shared/, the directory
# both guests see read-write at the same path to rendezvous in.  With -w,
# scripts/vm/wire-check.py decodes link.pcap afterwards (report in
# wire-check.txt, --expect-zcopy --expect-offers 2) and the run fails on a violation.
#
# Requests from the guests to the host (a file shared/request.NAME, answered
# by shared/request.NAME.done):
#   kill-a, kill-b      SIGKILL that guest's qemu (a peer that vanishes)
#   capture-on|off      start or stop the capture of the link
# A guest killed on request passes if its console shows no kernel problem
# up to its death.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

kver=${KVER:-}
out=
timeout_s=900
mem=
link=stream
wire=0
while getopts k:o:t:m:l:w opt; do
	case $opt in
	k) kver=$OPTARG ;;
	o) out=$OPTARG ;;
	t) timeout_s=$OPTARG ;;
	m) mem=$OPTARG ;;
	l) link=$OPTARG ;;
	w) wire=1 ;;
	*) sed -n '10p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "run-pair.sh: no guest script" >&2; exit 2; }
[ -n "$kver" ] || kver=$("$top/scripts/kver.sh")
case $link in stream | dgram) ;; *) echo "run-pair.sh: -l stream|dgram" >&2; exit 2 ;; esac
out=$(realpath -m "${out:-$top/build/vm/pair/$kver}")

rm -rf "$out"
mkdir -p "$out/shared"
# Both guests build nothing: make the initramfs once, before they race for it.
initrd=$top/build/vm/initramfs-$kver.cpio.gz
if [ ! -f "$initrd" ] || [ "$here/init" -nt "$initrd" ] || [ "$here/mkinitramfs.sh" -nt "$initrd" ]; then
	"$here/mkinitramfs.sh" "$kver" "$initrd"
fi

free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 20000))
		ss -Hltnu "( sport = :$p )" 2>/dev/null | grep -q . || { echo "$p"; return; }
	done
}
tag=sdp-pair-$$
port=$(free_port)
port_b=$(free_port)
while [ "$port_b" = "$port" ]; do port_b=$(free_port); done
netdev() { # role
	local role=$1 mac
	if [ "$role" = a ]; then mac=52:54:00:78:00:01; else mac=52:54:00:78:00:02; fi
	case $link/$role in
	stream/a) echo "-netdev stream,id=n0,server=on,addr.type=inet,addr.host=127.0.0.1,addr.port=$port" ;;
	stream/b) echo "-netdev stream,id=n0,server=off,addr.type=inet,addr.host=127.0.0.1,addr.port=$port" ;;
	dgram/a) echo "-netdev dgram,id=n0,local.type=inet,local.host=127.0.0.1,local.port=$port,remote.type=inet,remote.host=127.0.0.1,remote.port=$port_b" ;;
	dgram/b) echo "-netdev dgram,id=n0,local.type=inet,local.host=127.0.0.1,local.port=$port_b,remote.type=inet,remote.host=127.0.0.1,remote.port=$port" ;;
	esac
	echo "-device virtio-net-pci,netdev=n0,mac=$mac,romfile="
	echo "-name $tag-$role"
	echo "-qmp unix:$out/qmp-$role.sock,server=on,wait=off"
	[ "$role" = a ] && echo "-object filter-dump,id=cap0,netdev=n0,file=$out/link.pcap,maxlen=2048"
	return 0
}

start_guest() { # role
	local role=$1 n=1
	shift
	[ "$role" = b ] && n=2
	SDP_VM_NET=$(netdev "$role" | tr '\n' ' ') \
	SDP_VM_RW_SHARE=$out/shared \
	SDP_VM_HOSTNAME=sdp-$role \
	SDP_VM_GUEST_ENV="$(printf 'SDP_PAIR_ROLE=%s\nSDP_PAIR_INDEX=%s\nSDP_PAIR_DIR=%q\nSDP_PAIR_LINK=%s\n' \
		"$role" "$n" "$out/shared" "$link"
		# PAIR_* settings of the tier (sizes, phases) reach both guests.
		while IFS='=' read -r k v; do printf '%s=%q\n' "$k" "$v"; done < <(env | grep '^PAIR_[A-Z0-9_]*='))" \
		"$here/run.sh" -k "$kver" -o "$out/$role" -t "$timeout_s" -c 1 ${mem:+-m "$mem"} "$@" \
		> "$out/run-$role.log" 2>&1
}

# QMP: one command on a guest's monitor socket.
qmp() { # role json
	python3 - "$out/qmp-$1.sock" "$2" <<'EOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile("rw")
f.readline()
for cmd in ('{"execute": "qmp_capabilities"}', sys.argv[2]):
    f.write(cmd + "\n")
    f.flush()
    while True:
        reply = json.loads(f.readline())
        if "event" not in reply:
            break
    if "error" in reply:
        sys.exit("qmp: " + json.dumps(reply["error"]))
EOF
}

echo "run-pair.sh: booting two $kver guests over a $link link for: $*"
start=$(date +%s)
start_guest a "$@" &
pid_a=$!
sleep 2 # the stream server side must listen first
start_guest b "$@" &
pid_b=$!

killed=""
serve() { # handle the guests' requests until both runs end
	local r name
	while kill -0 "$pid_a" 2>/dev/null || kill -0 "$pid_b" 2>/dev/null; do
		for r in "$out"/shared/request.*; do
			[ -e "$r" ] || continue
			case $r in *.done) continue ;; esac
			[ -e "$r.done" ] && continue
			name=${r##*/request.}
			case $name in
			kill-a | kill-b)
				echo "run-pair.sh: killing guest ${name#kill-} on request"
				pkill -KILL -f -- "-name $tag-${name#kill-}" || true
				killed="$killed ${name#kill-}"
				;;
			capture-on | capture-off)
				qmp a "{\"execute\": \"qom-set\", \"arguments\": {\"path\": \"/objects/cap0\", \"property\": \"status\", \"value\": \"${name#capture-}\"}}" ||
					echo "run-pair.sh: $name failed" >&2
				;;
			*) echo "run-pair.sh: unknown request $name" >&2 ;;
			esac
			date +%s.%N > "$r.done"
		done
		# A guest that panicked ends the run: the other would wait for
		# it at every rendezvous until its own timeout.
		if [ $((++tick % 25)) = 0 ] && [ -z "$panicked" ] &&
			grep -qs 'Kernel panic - not syncing' "$out"/a/console.log "$out"/b/console.log; then
			panicked=1
			echo "run-pair.sh: a guest panicked; stopping both" >&2
			pkill -KILL -f -- "-name $tag-" || true
		fi
		sleep 0.2
	done
}
tick=0
panicked=""
serve

status=0
for role in a b; do
	if [ "$role" = a ]; then wait "$pid_a" && rc=0 || rc=$?; else wait "$pid_b" && rc=0 || rc=$?; fi
	echo "=== guest $role ($(sed -n 's/^SDP_PAIR_ROLE=//p' "$out/$role/guest.env" 2>/dev/null))"
	cat "$out/run-$role.log"
	if [ "$rc" != 0 ]; then
		case " $killed " in
		*" $role "*)
			# Killed on purpose: it could not report; its console up to
			# the kill must be clean.
			if [ ! -f "$out/$role/exit-code" ] && "$here/check-dmesg.sh" "$out/$role/console.log"; then
				echo "run-pair.sh: guest $role was killed on request; its console is clean"
				continue
			fi
			;;
		esac
		status=1
	fi
done
if [ $wire = 1 ]; then
	if python3 "$here/wire-check.py" "$out/link.pcap" --expect-zcopy --expect-offers 2 > "$out/wire-check.txt" 2>&1; then
		echo "[  PASSED  ] wire check: $(grep -c '^connection ' "$out/wire-check.txt") connections in link.pcap decoded by tshark and checked"
	else
		echo "[  FAILED  ] wire check of $out/link.pcap:" >&2
		tail -n 40 "$out/wire-check.txt" >&2
		status=1
	fi
fi
echo "run-pair.sh: $kver over $link: $([ $status = 0 ] && echo passed || echo FAILED)," \
	"$(( $(date +%s) - start ))s wall, results in $out"
# A guest killed by a double fault: seen on 6.12 guests in skb allocations
# (IP forwarding, rxe), with a corrupt exception frame (EFLAGS with
# reserved bits set), which points at TCG (Documentation/testing.md).  Exit 75 (EX_TEMPFAIL)
# so that scripts/vm/each-kernel.sh runs the tier once more; the consoles
# stay in this run's directory.
if [ $status != 0 ] && grep -qs 'traps: PANIC: double fault' "$out"/a/console.log "$out"/b/console.log; then
	echo "run-pair.sh: a guest died of a double fault (consoles in $out/{a,b}/console.log)" >&2
	exit 75
fi
exit $status
