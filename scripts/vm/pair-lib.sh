# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# Guest helpers for two-guest runs (scripts/vm/run-pair.sh); source it.
#
#   pair_net_up [--no-rxe]   eth0 up with this guest's addresses, Soft-RoCE
#                            (rxe0 on eth0) unless --no-rxe, RDMA CM loaded
#   pair_mark NAME           tell the peer NAME happened
#   pair_await NAME [SECS]   wait for the peer's NAME (default 300 s); fails
#                            at once if the peer's script has ended
#   pair_sync NAME [SECS]    pair_mark + pair_await: both reach NAME
#   pair_put NAME VALUE      publish a value; pair_get NAME [SECS] reads the
#                            peer's (waiting for it)
#   pair_request WHAT [SECS] ask the host (kill-a|kill-b|capture-on|off) and
#                            wait until it is done
#   pair_end RC              record this guest's end (for the peer's waits)
#   pair_pins                the FOLL_PIN counts: "ACQUIRED RELEASED"
#
# Variables: PAIR_ME / PAIR_PEER (a or b), PAIR_ADDR / PAIR_PEER_ADDR (IPv4),
# PAIR_ADDR6 / PAIR_PEER_ADDR6.
PAIR_ME=${SDP_PAIR_ROLE:?not in a run-pair.sh guest}
PAIR_DIR=${SDP_PAIR_DIR:?}
if [ "$PAIR_ME" = a ]; then PAIR_PEER=b; else PAIR_PEER=a; fi
PAIR_ADDR=10.78.0.${SDP_PAIR_INDEX:?}
PAIR_ADDR6=fd78::$SDP_PAIR_INDEX
if [ "$PAIR_ME" = a ]; then
	PAIR_PEER_ADDR=10.78.0.2 PAIR_PEER_ADDR6=fd78::2
else
	PAIR_PEER_ADDR=10.78.0.1 PAIR_PEER_ADDR6=fd78::1
fi

pair_log() { echo "[$PAIR_ME $(date +%T.%3N)] $*"; }

pair_net_up() {
	modprobe virtio_net
	local i
	for i in $(seq 50); do
		ip link show eth0 >/dev/null 2>&1 && break
		sleep 0.1
	done
	ip addr add "$PAIR_ADDR/24" dev eth0
	ip addr add "$PAIR_ADDR6/64" dev eth0 nodad
	ip link set eth0 up
	modprobe rdma_cm
	[ "${1:-}" = --no-rxe ] && return 0
	modprobe rdma_rxe
	rdma link add rxe0 type rxe netdev eth0
	for i in $(seq 100); do
		rdma link show rxe0/1 2>/dev/null | grep -q 'state ACTIVE' && return 0
		sleep 0.1
	done
	echo "pair_net_up: rxe0 did not become ACTIVE" >&2
	rdma link show >&2
	return 1
}

pair_mark() { date +%s.%N > "$PAIR_DIR/$PAIR_ME.$1"; }

pair_await() {
	local name=$1 limit=${2:-300} waited=0
	while [ ! -e "$PAIR_DIR/$PAIR_PEER.$name" ]; do
		if [ -e "$PAIR_DIR/request.kill-$PAIR_PEER.done" ]; then
			echo "pair_await: $PAIR_PEER was killed before '$name'" >&2
			return 1
		fi
		if [ -e "$PAIR_DIR/$PAIR_PEER.end" ]; then
			echo "pair_await: $PAIR_PEER ended (rc $(cat "$PAIR_DIR/$PAIR_PEER.end")) before '$name'" >&2
			return 1
		fi
		if [ "$waited" -ge $((limit * 10)) ]; then
			echo "pair_await: no '$name' from $PAIR_PEER in ${limit}s" >&2
			return 1
		fi
		sleep 0.1
		waited=$((waited + 1))
	done
}

pair_sync() { pair_mark "$1" && pair_await "$@"; }

pair_put() { printf '%s\n' "$2" > "$PAIR_DIR/$PAIR_ME.val.$1.tmp" && mv "$PAIR_DIR/$PAIR_ME.val.$1.tmp" "$PAIR_DIR/$PAIR_ME.val.$1"; }

pair_get() {
	pair_await "val.$1" "${2:-300}" || return 1
	cat "$PAIR_DIR/$PAIR_PEER.val.$1"
}

pair_request() {
	local what=$1 limit=${2:-60} waited=0
	: > "$PAIR_DIR/request.$what"
	while [ ! -e "$PAIR_DIR/request.$what.done" ]; do
		if [ "$waited" -ge $((limit * 10)) ]; then
			echo "pair_request: host did not do '$what' in ${limit}s" >&2
			return 1
		fi
		sleep 0.1
		waited=$((waited + 1))
	done
}

pair_end() { echo "$1" > "$PAIR_DIR/$PAIR_ME.end"; }

# Frames Soft-RoCE could not hand to the IP stack (rxe's send_err).  On
# 6.12 each one put the QP that sent it in the error state, the CM's GSI QP
# too (Documentation/reliability.md); 6.1 sends them again.
rxe_send_err() { rdma statistic show link rxe0/1 2>/dev/null | sed -n 's/.* send_err \([0-9]*\).*/\1/p'; }

# pair_rdma_quiet [S]: wait up to S seconds (default 30) until this guest
# has no SDP connection and no RDMA CM id but listeners left, so that a
# qdisc can be grafted (tc qdisc replace, del) with no RDMA frame to meet
# the moment the device is deactivated.
pair_rdma_busy() {
	{
		grep -v '^ *sl' /proc/net/sdp 2>/dev/null | grep -vw LISTEN
		rdma res show cm_id 2>/dev/null | grep -v 'state LISTEN'
	} | tr -s ' ' | paste -sd ';'
}
pair_rdma_quiet() {
	local _
	for _ in $(seq $((${1:-30} * 5))); do
		[ -z "$(pair_rdma_busy)" ] && return 0
		sleep 0.2
	done
	pair_log "RDMA still busy: $(pair_rdma_busy)"
	return 1
}

# A counter of /proc/net/sdpstats (0 when sdp.ko is not loaded).
sdp_stat() { awk -v n="$1" '$1 == n || $1 == n":" { print $2; f = 1 } END { if (!f) print 0 }' /proc/net/sdpstats 2>/dev/null || echo 0; }

# pair_pins: "ACQUIRED RELEASED", the kernel's exact FOLL_PIN page counts
# (vm.stat_refresh folds the per-CPU deltas first).
# pair_rmmod_sdp SECONDS: unload sdp.ko, retrying while sockets closed a
# moment ago are still torn down; 1 (and /proc/net/sdp on stdout) if it
# stays loaded.
pair_rmmod_sdp() {
	local i
	for i in $(seq $(( $1 * 5 ))); do
		rmmod sdp 2>/dev/null && return 0
		sleep 0.2
	done
	cat /proc/net/sdp
	return 1
}

pair_pins() {
	echo 1 > /proc/sys/vm/stat_refresh
	awk '$1 == "nr_foll_pin_acquired" { a = $2 } $1 == "nr_foll_pin_released" { r = $2 }
		END { print a + 0, r + 0 }' /proc/vmstat
}
