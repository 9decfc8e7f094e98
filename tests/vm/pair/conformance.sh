# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# Phase "conformance" of tests/vm/tier-pair.sh: the TCP-differential suite
# (tests/vm/conformance) with every packet crossing the link.
#
# The suite drives both ends of each connection from one process (its lanes
# interleave calls on the two sockets and compare what each end sees), so
# both of its addresses, A and B, live on guest a.  Policy routing sends
# everything that guest a addresses to A or B out of eth0 to guest b, which
# forwards it back: every TCP segment, RoCE packet and CM MAD of the suite
# crosses the link twice (a hairpin through b), with the link's latency and
# its retransmission timing, instead of rxe's in-kernel loopback.  Both ends
# still run on guest a's sdp.ko; the other phases (sdp_pair_io) put the two
# ends on two kernels.
#
# On guest a: A and B on eth0 (/32, /128); a rule before the local table
# sends locally generated traffic for them to table 100, whose routes go
# via b with the other address as source (an unbound client connecting to A
# is B, as on the single-guest veth pair).  accept_local takes back packets
# that carry one of a's own addresses as source; redirects are ignored.
# On guest b: forwarding on, redirects off, a route back to a.
conf_a4=10.77.0.1 conf_b4=10.77.0.2 conf_a6=fd77::1 conf_b6=fd77::2
conf_tbl=100
conf_bin=$build/host/tests/vm/conformance/sdp_conformance

conf_route_a() {
	ip addr add "$conf_a4/32" dev eth0
	ip addr add "$conf_b4/32" dev eth0
	ip -6 addr add "$conf_a6/128" dev eth0 nodad
	ip -6 addr add "$conf_b6/128" dev eth0 nodad
	local k
	for k in all default eth0; do
		sysctl -qw "net.ipv4.conf.$k.accept_local=1" "net.ipv4.conf.$k.rp_filter=0" \
			"net.ipv4.conf.$k.accept_redirects=0" "net.ipv6.conf.$k.accept_redirects=0"
	done
	ip route add "$conf_a4/32" via "$PAIR_PEER_ADDR" dev eth0 src "$conf_b4" table $conf_tbl
	ip route add "$conf_b4/32" via "$PAIR_PEER_ADDR" dev eth0 src "$conf_a4" table $conf_tbl
	ip -6 route add "$conf_a6/128" via "$PAIR_PEER_ADDR6" dev eth0 src "$conf_b6" table $conf_tbl
	ip -6 route add "$conf_b6/128" via "$PAIR_PEER_ADDR6" dev eth0 src "$conf_a6" table $conf_tbl
	local v
	for v in -4 -6; do
		# Locally generated only (iif lo): what comes back from b is
		# delivered by the local table as usual.
		ip "$v" rule add pref 100 iif lo lookup $conf_tbl
		ip "$v" rule add pref 200 lookup local
		ip "$v" rule del pref 0 lookup local
	done
}

conf_unroute_a() {
	local v
	for v in -4 -6; do
		ip "$v" rule add pref 0 lookup local
		ip "$v" rule del pref 200 lookup local
		ip "$v" rule del pref 100 lookup $conf_tbl
	done
	ip route flush table $conf_tbl
	ip -6 route flush table $conf_tbl
	ip addr del "$conf_a4/32" dev eth0
	ip addr del "$conf_b4/32" dev eth0
	ip -6 addr del "$conf_a6/128" dev eth0
	ip -6 addr del "$conf_b6/128" dev eth0
}

# True if the routes between A and B go out of eth0 to b.
conf_check_hairpin() {
	ip route get "$conf_b4" from "$conf_a4" | grep -q "via $PAIR_PEER_ADDR dev eth0" &&
		ip -6 route get "$conf_b6" from "$conf_a6" | grep -q "via $PAIR_PEER_ADDR6 dev eth0"
}

# Packets b forwarded so far: "IPv4 IPv6".
conf_forwarded() {
	echo "$(awk '$1 == "Ip:" { n++ } n == 2 { print $7; exit }' /proc/net/snmp)" \
		"$(awk '$1 == "Ip6OutForwDatagrams" { print $2 }' /proc/net/snmp6)"
}

if [ "$PAIR_ME" = a ]; then
	pair_await conf-forwarding 120 || fail "conformance: b does not forward"
	conf_route_a
	if ! conf_check_hairpin; then
		fail "conformance: the hairpin route through b is not in place"
		ip rule; ip route show table $conf_tbl; ip -6 route show table $conf_tbl
	else
		# Most transfers by RDMA Read/Write (4 KiB threshold), the rest
		# by bcopy: one pass (the single-guest tier runs three), about
		# 70 s.
		echo 4096 > /proc/sys/net/sdp/zcopy_thresh
		# shellcheck disable=SC2086 # PAIR_CONFORMANCE_ARGS: words
		SDP_TEST_ADDR4_A=$conf_a4 SDP_TEST_ADDR4_B=$conf_b4 \
			SDP_TEST_ADDR6_A=$conf_a6 SDP_TEST_ADDR6_B=$conf_b6 \
			"$conf_bin" --families inet,sdp ${PAIR_CONFORMANCE_ARGS:-} ||
			fail "conformance across the link"
		echo 65536 > /proc/sys/net/sdp/zcopy_thresh
	fi
	conf_unroute_a
	pair_mark conf-done
else
	for k in all default eth0; do
		sysctl -qw "net.ipv4.conf.$k.send_redirects=0" "net.ipv4.conf.$k.rp_filter=0"
	done
	sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
	ip route add 10.77.0.0/24 via "$PAIR_PEER_ADDR" dev eth0
	ip -6 route add fd77::/64 via "$PAIR_PEER_ADDR6" dev eth0
	fwd_before=$(conf_forwarded)
	pair_mark conf-forwarding
	pair_await conf-done 3600
	fwd=$(conf_forwarded)
	sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0
	ip route del 10.77.0.0/24 via "$PAIR_PEER_ADDR" dev eth0
	ip -6 route del fd77::/64 via "$PAIR_PEER_ADDR6" dev eth0
	# Proof that the suite's traffic crossed the link: b forwarded it.
	read -r f4 f6 <<< "$fwd"
	read -r b4 b6 <<< "$fwd_before"
	pair_log "conformance: b forwarded $((f4 - b4)) IPv4 and $((f6 - b6)) IPv6 packets"
	# The whole suite sends about 130k IPv4 and 6k IPv6 packets; a filtered
	# run only says what it sent.
	if [[ "${PAIR_CONFORMANCE_ARGS:-}" != *--filter* ]] &&
		{ [ $((f4 - b4)) -lt 20000 ] || [ $((f6 - b6)) -lt 1000 ]; }; then
		fail "conformance: too little traffic through b for the suite"
	fi
fi
