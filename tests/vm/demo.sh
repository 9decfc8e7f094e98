#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make demo`: runs inside the guest (scripts/vm/run.sh).  Brings up
# Soft-RoCE, loads sdp.ko, moves data between a server and a client over
# AF_INET_SDP with verification, shows that it went over RDMA (rxe packet
# counters), compares with TCP in the same guest, and says where to read on.
# Fails, saying why, when SDP cannot do that (yet): a real demo.
#
#   demo.sh BUILD_DIR [--host-build DIR] [--bytes N]
#
# BUILD_DIR holds the module for the running kernel (kmod/$KVER); sdp-bench
# comes from --host-build (default BUILD_DIR/host).
set -uo pipefail

build=${1:?usage: demo.sh BUILD_DIR [--host-build DIR] [--bytes N]}
shift
host_build=$build/host
bytes=64M
while [ $# -gt 0 ]; do
	case $1 in
	--host-build) host_build=$2; shift 2 ;;
	--bytes) bytes=$2; shift 2 ;;
	*) echo "demo: unknown option $1" >&2; exit 2 ;;
	esac
done

kver=$(uname -r)
bench=$host_build/userlib/bench/sdp-bench
module=$build/kmod/$kver/sdp.ko
addr=10.77.0.1
size=65536
work=/tmp/sdp-demo
mkdir -p "$work"

say() { echo "demo: $*"; }
fail() {
	echo
	echo "demo: FAILED: $*"
	echo "demo: (this is a real run: nothing was faked; see README.md for the project status)"
	exit 1
}

# Sum of a hw counter over every rxe device.
rxe_counter() {
	local f n=0
	for f in /sys/class/infiniband/*/ports/1/hw_counters/"$1"; do
		[ -r "$f" ] && n=$((n + $(cat "$f")))
	done
	echo $n
}

# transfer FAMILY PORT: one server, one client moving $bytes in $size-byte
# messages with --verify.  Prints the client's CSV line; non-zero on failure
# with the reason in $work/FAMILY.why.
transfer() {
	local fam=$1 port=$2 spid rc
	timeout -k 2 90 "$bench" server --family "$fam" --addr "$addr" --port "$port" \
		--connections 1 > "$work/$fam.server" 2>&1 &
	spid=$!
	for _ in $(seq 50); do
		grep -q 'listening on' "$work/$fam.server" && break
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.1
	done
	if ! grep -q 'listening on' "$work/$fam.server"; then
		kill "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
		cat "$work/$fam.server" > "$work/$fam.why"
		return 1
	fi
	timeout -k 2 60 "$bench" client --family "$fam" --addr "$addr" --port "$port" \
		--sizes "$size" --bytes "$bytes" --verify --csv --connect-timeout 5 \
		> "$work/$fam.csv" 2> "$work/$fam.client"
	rc=$?
	[ $rc = 0 ] || kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	if [ $rc != 0 ]; then
		{
			[ $rc = 124 ] && echo "client timed out after 60 s"
			cat "$work/$fam.client" "$work/$fam.server"
		} > "$work/$fam.why"
		return 1
	fi
	grep "^$fam,stream,$size," "$work/$fam.csv"
}

say "kernel $kver, Soft-RoCE on a veth pair"
[ -x "$bench" ] || fail "sdp-bench is not built ($bench): make userspace"
[ -f "$module" ] || fail "sdp.ko is not built for $kver ($module): make module KVER=$kver"
scripts/vm/rxe-setup.sh > "$work/rxe.log" 2>&1 || fail "Soft-RoCE did not come up: $(cat "$work/rxe.log")"
rdma link show | sed 's/^/    /'

# insmod does not resolve dependencies (ib_core, rdma_cm): load them first.
deps=$(modinfo -F depends "$module" | tr , ' ')
# shellcheck disable=SC2086
[ -z "$deps" ] || modprobe -a $deps || fail "cannot load the modules sdp.ko needs: $deps"
insmod "$module" 2> "$work/insmod.log" || fail "insmod $module: $(cat "$work/insmod.log")"
family=$(cat /sys/module/sdp/parameters/family 2>/dev/null)
say "sdp.ko loaded: AF_INET_SDP = $family"

stats=/proc/net/sdpstats
[ -r $stats ] && cat $stats > "$work/sdpstats.before"
pkts0=$(rxe_counter sent_pkts)
sends0=$(rxe_counter rdma_sends)
say "moving $bytes in $size-byte messages over AF_INET_SDP to $addr, verified by the receiver ..."
if ! sdp_line=$(transfer sdp 18530); then
	sed 's/^/    /' "$work/sdp.why"
	fail "SDP could not move the data: $(grep -h 'sdp-bench' "$work/sdp.why" | head -n 1)"
fi
pkts=$(($(rxe_counter sent_pkts) - pkts0))
sends=$(($(rxe_counter rdma_sends) - sends0))
[ -r $stats ] && cat $stats > "$work/sdpstats.after"
# family,mode,size,throughput_MBps,msgs_per_s,p50_us,p99_us,bytes,verified
IFS=, read -r _ _ _ sdp_mbps _ _ _ sdp_bytes sdp_verified <<< "$sdp_line"
[ "$sdp_verified" = ok ] || fail "SDP: data verification did not pass ($sdp_verified)"
# RoCE carries at most 4 KiB per packet: fewer packets than that mean the
# data did not go over RDMA.
min_pkts=$((sdp_bytes / 4096))
[ "$pkts" -ge "$min_pkts" ] ||
	fail "SDP moved $sdp_bytes bytes but rxe sent only $pkts packets (at least $min_pkts expected): not over RDMA"

say "the same over TCP in this guest, for comparison ..."
if ! tcp_line=$(transfer inet 18531); then
	sed 's/^/    /' "$work/inet.why"
	fail "the TCP reference failed"
fi
IFS=, read -r _ _ _ tcp_mbps _ _ _ _ _ <<< "$tcp_line"
read -r sdp_mbps tcp_mbps ratio < <(awk -v s="$sdp_mbps" -v t="$tcp_mbps" \
	'BEGIN { printf "%.1f %.1f %.2f", s, t, (t > 0 ? s / t : 0) }')

if ! rmmod sdp 2> "$work/rmmod.log"; then
	say "warning: rmmod sdp failed: $(cat "$work/rmmod.log")"
fi

mib=$(awk -v b="$sdp_bytes" 'BEGIN { printf "%.0f", b / 1048576 }')
# How the bytes moved: by RDMA between the applications' buffers (zero
# copy) or copied by the CPU through the registered rings (bcopy).
stat_delta() {
	awk -v n="$1" 'FNR == NR { if ($1 == n) b = $2; next }
		$1 == n { a = $2 } END { printf "%d", a - b }' \
		"$work/sdpstats.before" "$work/sdpstats.after" 2> /dev/null || echo 0
}
zc_bytes=$(stat_delta zcopy_tx_bytes)
cpu_bytes=$(stat_delta cpu_copy_bytes)
cat << EOF

============================================================================
 sdp demo: stream sockets over RDMA ($kver, Soft-RoCE in a TCG guest)
----------------------------------------------------------------------------
 socket(AF_INET_SDP = $family, SOCK_STREAM, 0), addressed like TCP ($addr)
 moved      $sdp_bytes bytes ($mib MiB) in $size-byte send()s
 verified   yes: every byte checked against the sender's pattern
 over RDMA  rxe sent $pkts RoCE packets ($sends RDMA SENDs) during the transfer
 zero copy  $zc_bytes bytes went by RDMA Read/Write straight between the
            applications' buffers; the CPU copied $cpu_bytes payload bytes in SDP
 throughput SDP $sdp_mbps MB/s, TCP in the same guest $tcp_mbps MB/s (SDP/TCP $ratio)
            (Soft-RoCE copies in software and TCP here is kernel loopback:
             on RDMA hardware the order flips; compare ratios, see make bench)
EOF
if [ -r "$work/sdpstats.after" ]; then
	echo " sdpstats   the counters of /proc/net/sdpstats that are not 0:"
	awk '$2 != 0 { printf "%-26s", $1 " " $2; if (++n % 3 == 0) printf "\n" }
		END { if (n % 3) printf "\n" }' "$work/sdpstats.after" | sed 's/^/            /'
fi
cat << EOF
 read more  README.md, Documentation/design.md (how it works),
            Documentation/zcopy.md, Documentation/socket-api.md,
            Documentation/testing.md;
            make bench: SDP against raw verbs, rsockets and TCP
============================================================================
EOF
