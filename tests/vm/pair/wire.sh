# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# Phase "wire" of tests/vm/tier-pair.sh: traffic for the capture that
# scripts/vm/wire-check.py decodes afterwards on the host.  The link is
# captured from boot (run-pair.sh); this phase ends the capture so that the
# long runs after it do not fill the disk.  Guest a serves, b connects:
# IPv4 and IPv6, zero copy at the default threshold (64 KiB: the larger
# writes go by RDMA Read or Write) and off (bcopy only).  The last
# connection has b's registrations at 64 KiB (net.sdp.zcopy_chunk): its
# larger writes go out as several SrcAvails at once and its waiting
# receives as several SinkAvails, which run-pair.sh's --expect-offers 2
# requires the capture to show.
if [ "$PAIR_ME" = a ]; then
	"$io" serve --family sdp --addr 0.0.0.0 --port 7001 --count 3 --timeout 300 > /tmp/wire-srv4.log &
	srv4=$!
	"$io" serve --family sdp --addr :: --port 7002 --count 1 --timeout 300 > /tmp/wire-srv6.log &
	srv6=$!
	sleep 1
	pair_mark wire-listening
	wait "$srv4" && wait "$srv6" || fail "wire: server side"
	cat /tmp/wire-srv4.log /tmp/wire-srv6.log
	pair_await wire-sent
	pair_request capture-off
	pass "wire: traffic for the capture"
else
	pair_await wire-listening
	"$io" connect --family sdp --addr "$PAIR_PEER_ADDR" --port 7001 --plan duplex:3M --seed 11 --timeout 300 &&
	"$io" connect --family sdp --addr "$PAIR_PEER_ADDR" --port 7001 --plan duplex:1M --seed 12 --zcopy-thresh 0 --timeout 300 &&
	"$io" connect --family sdp --addr "$PAIR_PEER_ADDR6" --port 7002 --plan duplex:1M --seed 13 --timeout 300 ||
		fail "wire: client side"
	chunk=$(sysctl -n net.sdp.zcopy_chunk)
	sysctl -qw net.sdp.zcopy_chunk=65536 &&
	"$io" connect --family sdp --addr "$PAIR_PEER_ADDR" --port 7001 --plan duplex:2M --seed 14 --timeout 300 ||
		fail "wire: client side, 64 KiB registrations"
	sysctl -qw net.sdp.zcopy_chunk="$chunk"
	pair_mark wire-sent
fi
