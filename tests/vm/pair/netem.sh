# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# Phase "netem" of tests/vm/tier-pair.sh: the link impaired by tc netem on
# both guests' eth0 (so both directions): loss, reordering, duplication,
# delay.  Each impairment carries a duplex stream over TCP, then over SDP
# (zero copy at the default threshold: RDMA Reads and Writes lose packets
# too); integrity must hold, the times are reported next to TCP's, not
# asserted.  PAIR_NETEM_BYTES per direction (default 4M); PAIR_NETEM_ONLY=N
# runs only the Nth impairment, PAIR_NETEM_REPEAT=N each one N times.
bytes=${PAIR_NETEM_BYTES:-4M}
impairments=(
	"loss 1%"
	"loss 5%"
	"delay 10ms reorder 25% 50%"
	"duplicate 5%"
	"delay 20ms"
)
# Soft-RoCE's completer in 6.12 (not in 6.1, whose check_psn() ignores such
# an ACK; kernels between are taken as 6.12's) takes an ACK older than the
# RDMA Read it is receiving for the end of a message (check_psn() passes it
# on, and an ACK ends a message: comp.opcode becomes -1); the read's next
# response, a Middle, then moves the QP to the error state with a WARNING
# (rxe_comp.c, COMPST_ERROR with a successful status).  Reordering delivers
# exactly such stale ACKs behind read responses, so any RDMA Read under
# reordering can fail there, whatever the consumer does
# (Documentation/reliability.md).  That run is skipped on such kernels, and
# said so; its bcopy run (no RDMA Read) still runs.
rxe_stale_ack_kills_reads() {
	local v=${kver%%-*}
	v=${v%%+*}
	[ "$(printf '%s\n6.2\n' "$v" | sort -V | head -n 1)" = 6.2 ]
}
i=0
for imp in "${impairments[@]}"; do
	i=$((i + 1))
	[ -z "${PAIR_NETEM_ONLY:-}" ] || [ "$PAIR_NETEM_ONLY" = $i ] || continue
	for rep in $(seq "${PAIR_NETEM_REPEAT:-1}"); do
		# Grafting the qdisc deactivates the device for a moment: no RDMA
		# frame may be on its way then (6.12, see pair_rdma_quiet).
		pair_rdma_quiet 10 || true
		send_err=$(rxe_send_err)
		tc qdisc replace dev eth0 root netem $imp limit 10000
		pair_sync "netem-$i-$rep-set" 60 || { fail "netem: no rendezvous"; break; }
		n=0
		for run in inet sdp sdp-bcopy; do
			n=$((n + 1))
			port=$((7200 + i * 4 + n + (rep - 1) * 40))
			if [ $run = sdp ] && [[ $imp == *reorder* ]] && rxe_stale_ack_kills_reads; then
				[ "$PAIR_ME" = a ] ||
					echo "[ SKIPPED  ] netem: $(printf '%-28s %-9s' "$imp" $run) Soft-RoCE on $kver resets a QP whose RDMA Read meets a stale ACK (Documentation/reliability.md)"
				continue
			fi
			fam=${run%-bcopy} thresh=-1
			[ $run = sdp-bcopy ] && thresh=0
			if [ "$PAIR_ME" = a ]; then
				"$io" serve --family $fam --addr 0.0.0.0 --port $port --count 1 --zcopy-thresh $thresh --timeout 600 \
					> /tmp/netem.log 2>&1 &
				srv=$!
				sleep 0.5
				pair_mark "netem-$i-$rep-$run-listening"
				wait $srv || { fail "netem: server side, $run, $imp"; cat /tmp/netem.log; }
			else
				pair_await "netem-$i-$rep-$run-listening" 60 || { fail "netem: no server"; continue; }
				start=$(date +%s.%N)
				if "$io" connect --family $fam --addr "$PAIR_PEER_ADDR" --port $port \
					--plan "duplex:$bytes" --seed $port --zcopy-thresh $thresh --timeout 600 > /tmp/netem.log 2>&1; then
					secs=$(echo "$(date +%s.%N) - $start" | bc)
					pass "netem: $(printf '%-28s %-9s' "$imp" $run) duplex $bytes in $(printf '%.2f' "$secs")s"
				else
					fail "netem: $imp, $run"
					cat /tmp/netem.log
				fi
			fi
			pair_sync "netem-$i-$rep-$run-done" 900 || break
		done
		pair_rdma_quiet 10 || true
		tc qdisc del dev eth0 root
		# A refused frame killed a QP on 6.12: name it if a stream failed.
		send_err=$(($(rxe_send_err) - send_err))
		[ "$send_err" = 0 ] ||
			echo "[ WARNING  ] netem: $imp: Soft-RoCE counted $send_err send errors on $PAIR_ME (a QP put in the error state on 6.12)"
	done
done
[ "$PAIR_ME" = a ] || tc -s qdisc show dev eth0 | head -3
