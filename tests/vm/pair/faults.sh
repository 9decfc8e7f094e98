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

# Each step's FOLL_PIN balance in the log: where pins are acquired and
# released (a leak or an over-release shows at its step).
pins_last=$(pair_pins)
pins_step() {
	local now
	now=$(pair_pins)
	pair_log "pins in step $1: acquired $((${now% *} - ${pins_last% *})), released $((${now#* } - ${pins_last#* }))"
	pins_last=$now
}

# Soft-RoCE retries for ever (it takes the retry count 7 so), so a dead peer
# or link is found by the send-progress watch and keepalive: the watch is
# shortened to 3 s here (15 s by default) to keep the steps short.
sysctl -qw net.sdp.tx_stall_ms=3000

# --- 1. the link goes down for less than the retry budget, then for longer --
# On hardware, net.sdp.ack_timeout 15 and 7 retries: about 1.1 s of silence
# ends an RC connection; on rxe, tx_stall_ms (TCP retries for minutes), and
# longer where no send is outstanding: a sender whose SrcAvail the peer has
# not read yet learns of the silence from its persist probe, sent one watch
# period after the offer and watched for another (2 x tx_stall_ms), and a
# reader in an RDMA Read waits for its own request at most tx_stall_ms +
# zcopy_cancel_ms (8 s here).  The long outage exceeds all of them, so the
# duplex stream fails whatever phase the outage finds it in.  The
# link fails between the hosts (every frame lost, as when a switch port goes
# down); the NICs keep their carrier.  Taking a NIC itself down is another
# fault: the RDMA core deletes its RoCE GIDs (and inet6 its addresses).
# The netem qdisc is put in place while b has no RDMA traffic and only
# changed (tc qdisc change) under traffic: grafting a root qdisc (replace,
# del) passes every frame sent meanwhile to noop_qdisc, and 6.12's
# Soft-RoCE takes that drop (NET_XMIT_CN) as a send error that puts the
# sending QP in the error state, the CM's GSI QP too (Documentation/
# reliability.md).  rxe's send_err counter must not move.
for step in short:0.4 long:10; do
	name=${step%%:*} down=${step#*:}
	if [ "$PAIR_ME" = b ]; then
		port=7301
		[ $name = long ] && port=7311
		pair_rdma_quiet 10 || true
		tc qdisc replace dev eth0 root netem loss 0%
		send_err=$(rxe_send_err)
		serve sdp $port
		srv=$!
		sleep 0.5
		pair_mark "link-$name-listening"
		pair_await "link-$name-flowing" 60
		sleep 1
		tc qdisc change dev eth0 root netem loss 100%
		pair_put "link-$name-down" "$(date +%s.%N)"
		sleep "$down"
		tc qdisc change dev eth0 root netem loss 0%
		pair_mark "link-$name-up"
		pair_await "link-$name-done" 120
		kill "$srv" 2>/dev/null
		wait "$srv" 2>/dev/null
		pair_rdma_quiet 10 || true
		tc qdisc del dev eth0 root
		pair_log "link $name server: $(tr '\n' ' ' < /tmp/faults-srv-$port.log)"
		pair_put "link-$name-send-err" "$(($(rxe_send_err) - send_err))"
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
			check /tmp/faults-link.log 0 'ETIMEDOUT|ECONNRESET|EPIPE' 12 "link down ${down}s (> retry budget): the connection fails"
		fi
		pair_mark "link-$name-done"
		send_err=$(pair_get "link-$name-send-err" 60)
		if [ "${send_err:-x}" = 0 ]; then
			pass "faults: link $name: no frame of b's Soft-RoCE refused by the qdisc (send_err 0)"
		else
			fail "faults: link $name: b's Soft-RoCE counted ${send_err:-no} send errors"
		fi
	fi
	pair_sync "link-$name-end" 120 || fail "faults: link $name: no rendezvous"
	pins_step link-$name
done

# --- 1b. the CM's RTU is lost: the first message establishes the connection
# The passive side learns that the connection is up from the RTU, or, when
# the RTU is lost, from the peer's first message on the QP: hardware raises
# COMM_EST, which the QP event handler passes to the CM; Soft-RoCE raises
# nothing, so the child's first receive completion establishes it itself
# (sdp_cm_established_by_data(), counter conn_established_by_data).  Without
# that, the passive CM re-sends its REP, every RTU answering it is lost too,
# data waits, and the connection times out (60 s here, on the old code).
# The child tells the CM (rdma_notify) when the RTU has not come 1 s after
# the first message: the third connection stays open 3 s for that.  The
# fourth resets at once (SO_LINGER 0): its AbortConn is the first message,
# and accept() must still return it, reset, as TCP does.
# b drops every RTU arriving on eth0: RoCEv2 UDP 4791, BTH dest QP 1 (GSI),
# MAD class 7 (CM), attribute 0x0014 (RTU); the IP header has no options.
if [ "$PAIR_ME" = b ]; then
	tc qdisc add dev eth0 handle ffff: ingress
	tc filter add dev eth0 parent ffff: protocol ip prio 1 u32 \
		match ip protocol 17 0xff match ip dport 4791 0xffff \
		match u32 0x00000001 0x00ffffff at 32 \
		match u8 0x07 0xff at 49 \
		match u16 0x0014 0xffff at 64 action drop
	by_data=$(sdp_stat conn_established_by_data)
	told=$(sdp_stat conn_rtu_late_told)
	serve sdp 7309
	srv=$!
	sleep 0.5
	pair_mark rtu-listening
	pair_await rtu-done 120
	for _ in $(seq 50); do
		grep -q "no header" /tmp/faults-srv-7309.log && break
		sleep 0.2
	done
	kill "$srv" 2>/dev/null
	wait "$srv" 2>/dev/null
	dropped=$(tc -s filter show dev eth0 ingress | sed -n 's/.*Sent [0-9]* bytes \([0-9]*\) pkt.*/\1/p' | head -n 1)
	pair_log "lost RTU, server: $(tr '\n' ' ' < /tmp/faults-srv-7309.log)"
	reset=$(sed -n 's/^served: no header: //p' /tmp/faults-srv-7309.log | head -n 1)
	pair_put rtu-dropped "${dropped:-0} $(($(sdp_stat conn_established_by_data) - by_data)) $(($(sdp_stat conn_rtu_late_told) - told)) ${reset:-nothing}"
	# 1c (a's part below), the RTUs still dropped: as soon as the
	# connection is established by its first message, the listener closes.
	pend=tests/vm/pair/pending_reset.py
	by_data=$(sdp_stat conn_established_by_data)
	python3 "$pend" listen sdp 7312 > /tmp/faults-pend-sdp.log 2>&1 &
	lsdp=$!
	python3 "$pend" listen tcp 7313 > /tmp/faults-pend-tcp.log 2>&1 &
	ltcp=$!
	for _ in $(seq 50); do
		[ "$(cat /tmp/faults-pend-*.log | grep -c listening)" = 2 ] && break
		sleep 0.2
	done
	pair_mark pend-listening
	for _ in $(seq 300); do
		[ "$(sdp_stat conn_established_by_data)" != "$by_data" ] && break
		sleep 0.1
	done
	kill "$lsdp" "$ltcp" 2>/dev/null
	wait "$lsdp" "$ltcp" 2>/dev/null
	pair_log "listener closed with a connection pending: $(($(sdp_stat conn_established_by_data) - by_data)) established by data"
	pair_await pend-done 120
	tc qdisc del dev eth0 ingress
else
	pair_await rtu-listening 60
	# No --t0-file: the times count from the connect.
	"$io" connect --family sdp --addr "$PAIR_PEER_ADDR" --port 7309 \
		--plan duplex:4M,duplex:4M,hold:3 --seed 38 --timeout 60 > /tmp/faults-rtu.log 2>&1
	"$io" connect --family sdp --addr "$PAIR_PEER_ADDR" --port 7309 \
		--plan abort --seed 39 --timeout 60 > /tmp/faults-rtu-abort.log 2>&1
	cat /tmp/faults-rtu.log /tmp/faults-rtu-abort.log
	pair_mark rtu-done
	read -r dropped by_data told reset <<< "$(pair_get rtu-dropped 60)"
	if [ "${dropped:-0}" -ge 4 ] && [ "${by_data:-0}" = 4 ]; then
		check /tmp/faults-rtu.log 0 ok 30 "every RTU lost ($dropped dropped): the first data establishes the connection"
		check /tmp/faults-rtu.log 1 ok 30 "every RTU lost: a second connection too"
		check /tmp/faults-rtu.log 2 ok 30 "every RTU lost: a connection kept open 3 s"
	else
		fail "faults: lost RTU: b dropped ${dropped:-no} RTUs and established ${by_data:-no} connections by data (want >= 4 and 4)"
	fi
	# The connection kept open outlives the 1 s after which b's CM is told
	# (rdma_notify), so that it stops re-sending the REP.
	if [ "${told:-0}" -ge 1 ]; then
		pass "faults: lost RTU: b's CM was told of $told lost RTUs"
	else
		fail "faults: lost RTU: b's CM was never told of a lost RTU (conn_rtu_late_told ${told:-unknown})"
	fi
	if [ "$reset" = ECONNRESET ]; then
		pass "faults: lost RTU: a connection reset before its RTU is accepted, and reads ECONNRESET"
	else
		fail "faults: lost RTU: a connection reset before its RTU: the server's first read got ${reset:-nothing} (want ECONNRESET, as TCP)"
	fi
	# 1c. A listener closed before accept() resets the connections in its
	# queue, as TCP's does.  One established by its first message (the RTU
	# lost) is still in REP_SENT in b's CM: destroying its id sends a REJ,
	# which a's CM delivers to a connection whose connect() returned; its
	# AbortConn, sent first, may come after it (here it never comes: a drops
	# every RoCE packet from b but the CM's).  The REJ must read as TCP's
	# reset, not as a refused connect.  The client's bytes are never
	# acknowledged either: the send watch gets its default 15 s here, so
	# that only the REJ can end the connection.
	sysctl -qw net.sdp.tx_stall_ms=15000
	tc qdisc add dev eth0 handle ffff: ingress
	tc filter add dev eth0 parent ffff: protocol ip prio 1 u32 \
		match ip protocol 17 0xff match ip dport 4791 0xffff \
		match u32 0x00000001 0x00ffffff at 32 action ok
	tc filter add dev eth0 parent ffff: protocol ip prio 2 u32 \
		match ip protocol 17 0xff match ip dport 4791 0xffff action drop
	pair_await pend-listening 120
	pend=tests/vm/pair/pending_reset.py
	rej=$(sdp_stat conn_rej_after_rtu)
	python3 "$pend" connect sdp "$PAIR_PEER_ADDR" 7312 > /tmp/faults-pend-sdp.log 2>&1 &
	csdp=$!
	python3 "$pend" connect tcp "$PAIR_PEER_ADDR" 7313 > /tmp/faults-pend-tcp.log 2>&1 &
	ctcp=$!
	wait "$csdp" "$ctcp"
	tc qdisc del dev eth0 ingress
	sysctl -qw net.sdp.tx_stall_ms=3000
	pair_mark pend-done
	pend_sdp=$(tail -n 1 /tmp/faults-pend-sdp.log)
	pend_tcp=$(tail -n 1 /tmp/faults-pend-tcp.log)
	rej=$(($(sdp_stat conn_rej_after_rtu) - rej))
	if [ "$pend_sdp" = "$pend_tcp" ] && [[ $pend_tcp == *"recv ECONNRESET"* ]] && [ "$rej" = 1 ]; then
		pass "faults: lost RTU: a listener closed before accept() resets the connection by REJ, as TCP's: $pend_sdp"
	else
		fail "faults: lost RTU: a listener closed before accept(): SDP '$pend_sdp' (conn_rej_after_rtu +$rej, want 1), TCP '$pend_tcp'"
	fi
fi
pair_sync rtu-end 120 || fail "faults: lost RTU: no rendezvous"
pins_step rtu

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
	# The server's sockets close with it; their teardown (the CM ids of a
	# removed device) runs in the RDMA core's work queues: bounded, as
	# every other leak check waits.
	left=""
	for i in $(seq 75); do
		left=$(grep -v '^ *sl' /proc/net/sdp | tr -s ' ' | paste -sd ';')
		[ -z "$left" ] && break
		sleep 0.2
	done
	if [ -z "$left" ]; then
		pass "faults: rxe removed: no socket left on b ($((i - 1)) polls of 0.2 s)"
	else
		fail "faults: rxe removed: sockets left on b 15 s after the server exited: $left"
		dmesg | grep -E 'sdp|rxe|rdma' | tail -n 20 >&2
	fi
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
pins_step rxe

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
pins_step exit

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
	pair_rmmod_sdp 10 || fail "faults: sdp.ko does not unload after its consumer closed"
	modprobe -d "$build/modroot-$kver" sdp $sdp_params
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
pins_step rmmod

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
	# a's verdict includes b's: b is killed before it could exit, and
	# a asks for the kill as soon as it is ready.
	pair_put status-faults "$status"
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
	# b's verdict first: b puts it once its clients run, and a guest
	# killed before its put completed (seen under load: the file written,
	# not yet renamed) would leave the tier's verdict unknown.
	pair_get status-faults 60 > /dev/null || true
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
	pins_step kill
	# Exact counts: vm.stat_refresh folds the per-CPU deltas that
	# /proc/vmstat would otherwise show late.  Equal within 10 s, as the
	# single-guest gate asks.
	# Counted from the start of the tier (pins_start, before sdp.ko was
	# loaded).  A leak (more acquired than released) fails.  Full 6.12
	# runs have ended with 9 to 12 more releases than acquisitions, every
	# step of this phase balanced (the per-phase and per-step lines of
	# the log locate it): not understood yet
	# (Documentation/reliability.md), reported, not hidden.
	for _ in $(seq 50); do
		read -r acq rel <<< "$(pair_pins)"
		acq=$((acq - ${pins_start% *})) rel=$((rel - ${pins_start#* }))
		[ "$acq" = "$rel" ] && break
		sleep 0.2
	done
	if [ "$acq" -gt "$rel" ]; then
		fail "faults: pinned pages not released ($acq acquired, $rel released since the tier began)"
	elif [ "$acq" != "$rel" ]; then
		echo "[ WARNING  ] faults: nr_foll_pin_released exceeds nr_foll_pin_acquired by $((rel - acq)) since the tier began ($acq, $rel)"
	fi
	peer_status=$(pair_get status-faults 5) || peer_status=unknown
	[ "$peer_status" = 0 ] || [ -n "$peer_failed" ] || fail "faults: b failed checks of its own before it was killed (status $peer_status; b's log)"
	if rmmod sdp; then
		pass "faults: after the peer vanished: no socket, no pin leaked ($acq acquired, $rel released), sdp.ko unloads"
	else
		fail "faults: sdp.ko does not unload after the peer vanished"
	fi
fi
