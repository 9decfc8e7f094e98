# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# Phase "fallback" of tests/vm/tier-pair.sh: an SDP connect allowed to fall
# back (SDP_POLICY_FALLBACK) reaches a plain TCP server on the other host,
# across the link: first where b runs sdp.ko but nothing listens on SDP
# (its CM answers REJ), where b has RDMA but no sdp.ko loaded (REJ as
# well), then where b has no RDMA device at all (nothing answers;
# net.sdp.fallback_ms bounds the wait); and b's SDP listener that takes both
# serves a plain TCP client and an SDP one on the same port.
# Documentation/fallback.md.
#
# fb_check LOG REASON WHAT: the connect went over TCP with SDP_FB_<REASON>
# and its duplex stream verified.
fb_check() {
	local log=$1 want=$2 what=$3 line
	line=$(grep '^transport ' "$log" | head -n 1)
	if [[ $line =~ ^transport\ tcp\ reason\ $want\ after ]] && grep -q '^conn 0 duplex: ok' "$log"; then
		pass "fallback: $what: over TCP (${line#transport tcp }), 4 MiB each way verified"
	else
		fail "fallback: $what: want transport tcp reason $want and a verified stream; got: $(tr '\n' ' ' < "$log")"
	fi
}

if [ "$PAIR_ME" = b ]; then
	"$io" serve --family inet --addr 0.0.0.0 --port 7401 --timeout 300 \
		> /tmp/fallback-srv.log 2>&1 &
	srv=$!
	"$io" serve --family sdp --policy fallback --addr 0.0.0.0 --port 7402 --timeout 300 \
		> /tmp/fallback-both.log 2>&1 &
	both=$!
	sleep 0.5
	pair_mark fallback-listening
	pair_await fallback-rejected-done 120
	kill "$both" 2>/dev/null
	wait "$both" 2>/dev/null
	pair_log "listener of both: $(tr '\n' ' ' < /tmp/fallback-both.log)"
	# RDMA but no sdp.ko: the CM itself refuses the connection.
	pair_rmmod_sdp 15 || fail "fallback: sdp.ko does not unload once its sockets are closed"
	pair_mark fallback-no-sdp
	pair_await fallback-no-sdp-done 120
	modprobe -d "$build/modroot-$kver" sdp $sdp_params
	for kv in ${PAIR_SYSCTL:-}; do sysctl -qw "$kv"; done
	# A host without RDMA: its RoCE device goes (rxe's UDP port stays
	# bound and drops what comes; a host without rxe answers with ICMP,
	# which the CM ignores as well).
	pair_rdma_quiet 10 || true
	rdma link delete rxe0
	pair_mark fallback-no-rdma
	pair_await fallback-no-rdma-done 120
	rdma link add rxe0 type rxe netdev eth0
	for _ in $(seq 50); do rdma link show rxe0/1 | grep -q ACTIVE && break; sleep 0.1; done
	kill "$srv" 2>/dev/null
	wait "$srv" 2>/dev/null
	pair_log "fallback server: $(tr '\n' ' ' < /tmp/fallback-srv.log)"
else
	pair_await fallback-listening 60
	# SDP_FB_REJECTED is 3, SDP_FB_TIMEOUT 5 (include/uapi/sdp.h).
	"$io" connect --family sdp --policy fallback --addr "$PAIR_PEER_ADDR" --port 7401 \
		--plan duplex:4M --seed 51 --timeout 120 > /tmp/fallback-rej.log 2>&1
	cat /tmp/fallback-rej.log
	fb_check /tmp/fallback-rej.log 3 "no SDP listener on the peer (REJ)"
	for fam in inet sdp; do
		"$io" connect --family $fam --addr "$PAIR_PEER_ADDR" --port 7402 \
			--plan duplex:4M --seed 53 --timeout 120 > "/tmp/fallback-both-$fam.log" 2>&1
		cat "/tmp/fallback-both-$fam.log"
		who="a plain TCP client"
		[ $fam = sdp ] && who="an SDP client"
		if grep -q '^conn 0 duplex: ok' "/tmp/fallback-both-$fam.log"; then
			pass "fallback: $who of an SDP listener that takes both: 4 MiB each way verified"
		else
			fail "fallback: $who of an SDP listener that takes both: $(tr '\n' ' ' < "/tmp/fallback-both-$fam.log")"
		fi
	done
	pair_mark fallback-rejected-done
	pair_await fallback-no-sdp 60
	"$io" connect --family sdp --policy fallback --addr "$PAIR_PEER_ADDR" --port 7401 \
		--plan duplex:4M --seed 54 --timeout 120 > /tmp/fallback-nosdp.log 2>&1
	cat /tmp/fallback-nosdp.log
	fb_check /tmp/fallback-nosdp.log 3 "peer with RDMA but without sdp.ko (REJ)"
	pair_mark fallback-no-sdp-done
	pair_await fallback-no-rdma 60
	"$io" connect --family sdp --policy fallback --addr "$PAIR_PEER_ADDR" --port 7401 \
		--plan duplex:4M --seed 52 --timeout 120 > /tmp/fallback-nordma.log 2>&1
	cat /tmp/fallback-nordma.log
	fb_check /tmp/fallback-nordma.log 5 "peer without RDMA (no answer)"
	pair_mark fallback-no-rdma-done
fi
