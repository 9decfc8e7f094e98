# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# Phase "integrity" of tests/vm/tier-pair.sh: duplex streams across the
# link, every byte checked (sdp_pair_io duplex), with zero copy at the
# default threshold and off.  PAIR_INTEGRITY_BYTES per direction per
# connection (default 64M), two connections at once, so each setting moves
# 256 MiB across the link, over a hundred times round each connection's
# receive ring; a longer run (PAIR_INTEGRITY_BYTES=256M: 1 GiB) adds
# minutes per kernel to make check.  TCP runs the same plan first as the
# reference.
per_conn=${PAIR_INTEGRITY_BYTES:-64M}
plan=duplex:$per_conn,duplex:$per_conn
runs="inet:-1 sdp:-1 sdp:0"
if [ "$PAIR_ME" = a ]; then
	port=7100
	for run in $runs; do
		port=$((port + 1))
		"$io" serve --family "${run%%:*}" --addr 0.0.0.0 --port $port --count 2 \
			--zcopy-thresh "${run#*:}" --timeout 1200 > "/tmp/integ-$port.log" 2>&1 &
		eval "srv_$port=$!"
	done
	sleep 1
	pair_mark integ-listening
	port=7100
	for run in $runs; do
		port=$((port + 1))
		eval "pid=\$srv_$port"
		if wait "$pid"; then
			pass "integrity: server side ${run%%:*} zcopy_thresh ${run#*:}"
		else
			fail "integrity: server side ${run%%:*} zcopy_thresh ${run#*:}"
		fi
		cat "/tmp/integ-$port.log"
	done
else
	pair_await integ-listening
	port=7100
	for run in $runs; do
		port=$((port + 1))
		fam=${run%%:*} thresh=${run#*:}
		start=$(date +%s.%N)
		zc0=$(sdp_stat zcopy_tx_bytes)
		if "$io" connect --family "$fam" --addr "$PAIR_PEER_ADDR" --port $port --plan "$plan" \
			--seed "$port" --zcopy-thresh "$thresh" --timeout 1200; then
			secs=$(echo "$(date +%s.%N) - $start" | bc)
			zc=$(($(sdp_stat zcopy_tx_bytes) - zc0))
			pass "integrity: $fam zcopy_thresh $thresh: $plan in ${secs}s, $zc bytes sent by zero copy"
			# The setting must have been in force: zero copy off sends
			# nothing by RDMA, the default threshold sends the large writes.
			case $fam:$thresh in
			sdp:0) [ "$zc" = 0 ] || fail "integrity: zero copy off, yet $zc bytes by zero copy" ;;
			sdp:*) [ "$zc" -gt 0 ] || fail "integrity: zero copy on, yet no byte by zero copy" ;;
			esac
		else
			fail "integrity: $fam zcopy_thresh $thresh: $plan"
		fi
	done
fi
