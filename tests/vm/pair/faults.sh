# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# Phase "faults" of tests/vm/tier-pair.sh: faults of the link, the device,
# the peer's processes and module, and at last the peer itself, each with a
# bounded outcome.  Guest a is the survivor, b suffers the fault.  The
# outcomes (errno, when) are what Documentation/reliability.md reports;
# the bounds asserted here are the documented ones with room for TCG.
#
# Each step: b serves (sdp_pair_io serve) on its own ports, a connects with
# a plan and --t0-file set to the moment of the fault, so every connection
# reports what it saw and how long after the fault.

# check LOG CONN REGEX MAX_S WHAT: the line of connection CONN in LOG ends
# with a result matching REGEX no later than MAX_S after the fault.
check() {
	local log=$1 conn=$2 want=$3 max=$4 what=$5 line res secs
	line=$(grep "^conn $conn " "$log" | head -n 1)
	res=$(sed -n 's/^conn [0-9]* [a-z]*: \([A-Za-z0-9]*\).*/\1/p' <<< "$line")
	secs=$(sed -n 's/^conn [0-9]* [a-z]*: [A-Za-z0-9]* after \(-\?[0-9.]*\) s.*/\1/p' <<< "$line")
	if [ -n "$res" ] && [[ $res =~ ^($want)$ ]] && [ -n "$secs" ] &&
		[ "$(echo "$secs <= $max" | bc)" = 1 ] && ! grep -q CORRUPT <<< "$line"; then
		pass "faults: $what: $res after ${secs}s"
	else
		fail "faults: $what: want $want within ${max}s; got: ${line:-nothing}"
	fi
}

# serve FAMILY PORT [ARGS...]: a server on b for this step, in the background.
serve() {
	local fam=$1 port=$2
	shift 2
	"$io" serve --family "$fam" --addr 0.0.0.0 --port "$port" --timeout 600 "$@" \
		> "/tmp/faults-srv-$port.log" 2>&1 &
}

t0=/tmp/faults-t0

# Soft-RoCE retries for ever (it takes the retry count 7 so), so a dead peer
# or link is found by the send-progress watch and keepalive: the watch is
# shortened to 3 s here (15 s by default) to keep the steps short.
sysctl -qw net.sdp.tx_stall_ms=3000

# --- 1. the link goes down for less than the retry budget, then for longer --
# On hardware, net.sdp.ack_timeout 15 and 7 retries: about 1.1 s of silence
# ends an RC connection; on rxe, tx_stall_ms (TCP retries for minutes).  The link fails between the
# hosts (every frame lost, as when a switch port goes down); the NICs keep
# their carrier.  Taking a NIC itself down is another fault: the RDMA core
# deletes its RoCE GIDs (and inet6 its addresses).
# Not in make check yet: on 6.12 a 0.4 s outage sometimes resets the stream
# seconds later and new connections to b then fail (Documentation/
# reliability.md); PAIR_FAULTS_LINK=1 runs these steps.  Skipped steps are
# said, never counted as passed.
link_steps="short:0.4 long:4"
if [ "${PAIR_FAULTS_LINK:-0}" != 1 ]; then
	link_steps=""
	echo "[ SKIPPED  ] faults: link outages (known failure on 6.12; PAIR_FAULTS_LINK=1 runs them)"
fi
for step in $link_steps; do
	name=${step%%:*} down=${step#*:}
	if [ "$PAIR_ME" = b ]; then
		port=7301
		[ $name = long ] && port=7311
		serve sdp $port
		srv=$!
		sleep 0.5
		pair_mark "link-$name-listening"
		pair_await "link-$name-flowing" 60
		sleep 1
		tc qdisc replace dev eth0 root netem loss 100%
		pair_put "link-$name-down" "$(date +%s.%N)"
		sleep "$down"
		tc qdisc del dev eth0 root
		pair_mark "link-$name-up"
		pair_await "link-$name-done" 120
		kill "$srv" 2>/dev/null
		wait "$srv" 2>/dev/null
		pair_log "link $name server: $(tr '\n' ' ' < /tmp/faults-srv-$port.log)"
	else
		pair_await "link-$name-listening" 60
		rm -f $t0
		port=7301
		[ $name = long ] && port=7311
		"$io" connect --family sdp --addr "$PAIR_PEER_ADDR" --port $port \
			--plan duplex:12M --seed 31 --t0-file $t0 --timeout 120 > /tmp/faults-link.log 2>&1 &
		cli=$!
		sleep 0.3
		pair_mark "link-$name-flowing"
		pair_get "link-$name-down" 60 > /dev/null && touch $t0
		wait "$cli"
		cat /tmp/faults-link.log
		if [ "$name" = short ]; then
			check /tmp/faults-link.log 0 ok 120 "link down ${down}s (< retry budget): the stream completes intact"
		else
			check /tmp/faults-link.log 0 'ETIMEDOUT|ECONNRESET|EPIPE' 8 "link down ${down}s (> retry budget): the connection fails"
		fi
		pair_mark "link-$name-done"
	fi
	pair_sync "link-$name-end" 120 || fail "faults: link $name: no rendezvous"
done

# --- 2. the RDMA device goes away on one side during a transfer -------------
if [ "$PAIR_ME" = b ]; then
	serve sdp 7302
	srv=$!
	sleep 0.5
	pair_mark rxe-listening
	pair_await rxe-flowing 60
	sleep 1
	rdma link delete rxe0
	pair_mark rxe-deleted
	sleep 3 # its connections fail; the listener would accept for ever
	kill "$srv" 2>/dev/null
	wait "$srv" 2>/dev/null
	pair_log "rxe removal, server: $(tr '\n' ' ' < /tmp/faults-srv-7302.log)"
	grep -q . /proc/net/sdp 2>/dev/null && [ "$(grep -vc '^ *sl' /proc/net/sdp)" != 0 ] &&
		{ fail "faults: rxe removed: sockets left on b"; cat /proc/net/sdp; }
	rdma link add rxe0 type rxe netdev eth0
	for _ in $(seq 50); do rdma link show rxe0/1 | grep -q ACTIVE && break; sleep 0.1; done
	pair_mark rxe-back
else
	pair_await rxe-listening 60
	rm -f $t0
	"$io" connect --family sdp --addr "$PAIR_PEER_ADDR" --port 7302 \
		--plan send,recv --seed 32 --t0-file $t0 --timeout 120 > /tmp/faults-rxe.log 2>&1 &
	cli=$!
	sleep 0.3
	pair_mark rxe-flowing
	pair_await rxe-deleted 60 && touch $t0
	wait "$cli"
	cat /tmp/faults-rxe.log
	check /tmp/faults-rxe.log 0 'ECONNRESET|ETIMEDOUT|EPIPE' 8 "peer's rxe device removed: a blocked sender sees the end"
	check /tmp/faults-rxe.log 1 'ECONNRESET|ETIMEDOUT|EOF' 8 "peer's rxe device removed: a blocked receiver sees the end"
	pair_await rxe-back 60
fi
pair_sync rxe-end 120 || fail "faults: rxe: no rendezvous"

# --- 3. the peer's process exits: with unread data, with zero-copy offers ---
# out, during a blocked receive; TCP is the oracle for each.
if [ "$PAIR_ME" = b ]; then
	serve sdp 7303
	srv_sdp=$!
	serve inet 7304
	srv_tcp=$!
	sleep 0.5
	pair_mark exit-listening
	pair_await exit-ready 60
	sleep 2 # the stalled sender fills the buffers, the lazy source offers
	kill -KILL "$srv_sdp" "$srv_tcp"
	pair_mark exit-killed
else
	pair_await exit-listening 60
	rm -f $t0
	for fam in sdp inet; do
		port=7303
		[ $fam = inet ] && port=7304
		"$io" connect --family $fam --addr "$PAIR_PEER_ADDR" --port $port \
			--plan stall,lazy:0,silent --seed 33 --t0-file $t0 --timeout 120 > "/tmp/faults-exit-$fam.log" 2>&1 &
		eval "cli_$fam=$!"
	done
	sleep 0.5
	pair_mark exit-ready
	pair_await exit-killed 60 && touch $t0
	# shellcheck disable=SC2154 # set by eval
	wait "$cli_sdp"
	wait "$cli_inet"
	for fam in sdp inet; do
		echo "--- $fam"
		cat "/tmp/faults-exit-$fam.log"
	done
	for c in 0:stall 1:lazy 2:silent; do
		tcp=$(sed -n "s/^conn ${c%%:*} [a-z]*: \([A-Za-z0-9]*\).*/\1/p" /tmp/faults-exit-inet.log)
		check /tmp/faults-exit-sdp.log "${c%%:*}" "${tcp:-none}" 10 "peer process killed, ${c#*:} connection, as TCP ($tcp)"
	done
fi
pair_sync exit-end 120 || fail "faults: exit: no rendezvous"

# --- 4. sdp.ko unloaded under live connections (a kernel consumer's) --------
if [ "$PAIR_ME" = b ]; then
	insmod "$build/kmod-tests/$kver/sdp_kecho.ko" addr=0.0.0.0 port=7305 rounds=0
	pair_mark kecho-listening
	pair_await kecho-connected 60
	sleep 1
	# The consumer's unload closes its sockets; sdp.ko goes right after,
	# while their teardown with a is still under way.
	rmmod sdp_kecho
	pair_mark kecho-unloaded
	unloaded=0
	for _ in $(seq 50); do
		rmmod sdp 2>/dev/null && { unloaded=1; break; }
		sleep 0.2
	done
	[ $unloaded = 1 ] || { fail "faults: sdp.ko does not unload after its consumer closed"; cat /proc/net/sdp; }
	modprobe -d "$build/modroot-$kver" sdp
else
	pair_await kecho-listening 60
	rm -f $t0
	"$io" connect --family sdp --addr "$PAIR_PEER_ADDR" --port 7305 \
		--plan silent,silent --seed 34 --t0-file $t0 --timeout 120 > /tmp/faults-rmmod.log 2>&1 &
	cli=$!
	sleep 1
	pair_mark kecho-connected
	pair_await kecho-unloaded 60 && touch $t0
	wait "$cli"
	cat /tmp/faults-rmmod.log
	check /tmp/faults-rmmod.log 0 'EOF|ECONNRESET' 10 "peer's sdp.ko unloaded under a connection"
fi
pair_sync rmmod-end 120 || fail "faults: rmmod: no rendezvous"

# --- 5. the peer vanishes (its guest is killed) -----------------------------
# Connections in every state: streaming each way by bcopy and zero copy,
# blocked in send and in recv, idle with keepalive (1 s, 3 probes), and
# connecting in a loop; b also connects to a in a loop (a's half-open
# connections).  TCP beside them with TCP_USER_TIMEOUT 5 s for its errno.
if [ "$PAIR_ME" = b ]; then
	serve sdp 7306 --keepalive 1,3
	serve inet 7307 --keepalive 1,3 --user-timeout 5000
	sleep 0.5
	pair_mark kill-listening
	pair_await kill-a-listening 60
	"$io" connect --family sdp --addr "$PAIR_PEER_ADDR" --port 7308 --plan connect \
		--timeout 600 > /dev/null 2>&1 &
	pair_await kill-ready 60
	sleep 600 # until killed
else
	"$io" serve --family sdp --addr 0.0.0.0 --port 7308 --timeout 600 > /dev/null 2>&1 &
	acc=$!
	pair_mark kill-a-listening
	pair_await kill-listening 60
	rm -f $t0
	"$io" connect --family sdp --addr "$PAIR_PEER_ADDR" --port 7306 --keepalive 1,3 \
		--plan send,recv,send,recv,stall,silent,idle,connect --seed 35 --t0-file $t0 --timeout 150 \
		> /tmp/faults-kill-sdp.log 2>&1 &
	cli_sdp=$!
	"$io" connect --family sdp --addr "$PAIR_PEER_ADDR" --port 7306 --keepalive 1,3 --zcopy-thresh 0 \
		--plan send,recv --seed 36 --t0-file $t0 --timeout 120 > /tmp/faults-kill-bcopy.log 2>&1 &
	cli_bcopy=$!
	"$io" connect --family inet --addr "$PAIR_PEER_ADDR" --port 7307 --keepalive 1,3 --user-timeout 5000 \
		--plan send,recv,stall,silent,idle --seed 37 --t0-file $t0 --timeout 120 > /tmp/faults-kill-tcp.log 2>&1 &
	cli_tcp=$!
	sleep 2
	pair_mark kill-ready
	pair_request kill-b 60 && touch $t0
	wait "$cli_sdp"
	wait "$cli_bcopy"
	wait "$cli_tcp"
	for f in sdp bcopy tcp; do
		echo "--- $f"
		cat "/tmp/faults-kill-$f.log"
	done
	i=0
	for m in send recv send recv stall silent idle; do
		check /tmp/faults-kill-sdp.log $i ETIMEDOUT 12 "peer vanished: $m (zero copy on)"
		i=$((i + 1))
	done
	check /tmp/faults-kill-sdp.log 7 'ETIMEDOUT|EHOSTUNREACH|ECONNREFUSED|ENETUNREACH' 130 "peer vanished: connect"
	check /tmp/faults-kill-bcopy.log 0 ETIMEDOUT 12 "peer vanished: send (bcopy)"
	check /tmp/faults-kill-bcopy.log 1 ETIMEDOUT 12 "peer vanished: recv (bcopy)"
	for i in 0 1 2 3 4; do
		check /tmp/faults-kill-tcp.log $i ETIMEDOUT 12 "peer vanished, TCP reference, conn $i"
	done
	kill "$acc" 2>/dev/null
	wait "$acc" 2>/dev/null
	# Nothing may be left: no socket (half-open ones included), no pinned
	# page, and the module unloads.
	for _ in $(seq 150); do
		[ "$(grep -vc '^ *sl' /proc/net/sdp)" = 0 ] && break
		sleep 0.2
	done
	if [ "$(grep -vc '^ *sl' /proc/net/sdp)" != 0 ]; then
		fail "faults: sockets left after the peer vanished"
		cat /proc/net/sdp
	fi
	# Exact counts: vm.stat_refresh folds the per-CPU deltas that
	# /proc/vmstat would otherwise show late.  Equal within 10 s, as the
	# single-guest gate asks.
	for _ in $(seq 50); do
		echo 1 > /proc/sys/vm/stat_refresh
		acq=$(awk '$1 == "nr_foll_pin_acquired" { print $2 }' /proc/vmstat)
		rel=$(awk '$1 == "nr_foll_pin_released" { print $2 }' /proc/vmstat)
		[ "$acq" = "$rel" ] && break
		sleep 0.2
	done
	# A leak (more acquired than released) fails.  6.12 ends this phase
	# with ~10 more releases than acquisitions, 6.1 balanced: not
	# understood yet (Documentation/reliability.md), reported, not hidden.
	if [ "$acq" -gt "$rel" ]; then
		fail "faults: pinned pages not released ($acq acquired, $rel released)"
	elif [ "$acq" != "$rel" ]; then
		echo "[ WARNING  ] faults: nr_foll_pin_released exceeds nr_foll_pin_acquired by $((rel - acq)) ($acq, $rel)"
	fi
	if rmmod sdp; then
		pass "faults: after the peer vanished: no socket, no pin leaked ($acq acquired, $rel released), sdp.ko unloads"
	else
		fail "faults: sdp.ko does not unload after the peer vanished"
	fi
fi
