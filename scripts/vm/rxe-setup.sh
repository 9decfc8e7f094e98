#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Guest helper: Soft-RoCE on a veth pair inside one guest.
#
#   veth0 10.77.0.1/24 fd77::1/64  <->  veth1 10.77.0.2/24 fd77::2/64
#   rxe0 on veth0, rxe1 on veth1
#
# Prints the two device names; exits non-zero if either does not come up.
# Override with SDP_RXE_ADDR0/SDP_RXE_ADDR1 (and a common /24 prefix).
set -eu
a0=${SDP_RXE_ADDR0:-10.77.0.1}
a1=${SDP_RXE_ADDR1:-10.77.0.2}

modprobe rdma_rxe
ip link add veth0 type veth peer name veth1
ip addr add "$a0/24" dev veth0
ip addr add "$a1/24" dev veth1
# IPv6 too (no DAD, so the addresses and rxe's GIDs are usable at once).
ip addr add "${SDP_RXE_ADDR6_0:-fd77::1}/64" dev veth0 nodad
ip addr add "${SDP_RXE_ADDR6_1:-fd77::2}/64" dev veth1 nodad
ip link set veth0 up
ip link set veth1 up
rdma link add rxe0 type rxe netdev veth0
rdma link add rxe1 type rxe netdev veth1

# The ports go ACTIVE once the netdevs carry a link; wait a little.
for _ in $(seq 50); do
	n=$(rdma link show | grep -c 'state ACTIVE' || true)
	[ "$n" -ge 2 ] && break
	sleep 0.1
done
if [ "$(rdma link show | grep -c 'state ACTIVE')" -lt 2 ]; then
	echo "rxe-setup: rxe devices did not become ACTIVE:" >&2
	rdma link show >&2
	exit 1
fi
echo "rxe0 $a0"
echo "rxe1 $a1"
