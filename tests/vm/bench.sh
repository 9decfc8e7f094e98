#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# VM benchmark (`make bench`): runs inside the guest (scripts/vm/run.sh).
# One boot measures, over the same Soft-RoCE link (rxe-setup.sh):
#
#   raw verbs   ib_send_bw -R / ib_send_lat -R (perftest, RDMA CM): the ceiling
#   rsockets    rstream (librdmacm): the RDMA peer
#   TCP         sdp-bench --family inet
#   SDP         sdp-bench --family sdp, after insmod sdp.ko; when SDP cannot
#               run (yet) its points are recorded as n/a with the error and
#               the bench goes on.
#
#   bench.sh BUILD_DIR [--host-build DIR] [--sizes 64,1024,...] [--duration S]
#                      [--rounds N] [--out DIR]
#
# The tools take turns size by size, so a slow spell of the host (TCG shares
# its cores with whatever else runs there) hits every tool of a size rather
# than one tool; then the points the goals use (64 KiB stream, 64 B
# ping-pong) are measured again, --rounds in all (default 3): the report
# takes the best of them, interference only ever slows things down.
#
# BUILD_DIR holds the module for the running kernel (kmod/$KVER); sdp-bench
# is taken from the CMake build in --host-build (default BUILD_DIR/host).
# Output (default: the results share, /run/sdp-results):
#   raw.csv    tool,family,metric,size,value,unit, one row per measurement
#              (value n/a when a point could not be measured)
#   notes.txt  what failed and why, one line each
#   logs/      every tool's output
# scripts/bench/report.py turns that into the table, ratios and plots.
#
# Exit status: 0 when the test bed and the reference tools worked (whatever
# SDP did), 1 when Soft-RoCE or a reference measurement failed.
set -uo pipefail

usage="usage: bench.sh BUILD_DIR [--host-build DIR] [--sizes LIST] [--duration S] [--rounds N] [--out DIR]"
build=${1:?$usage}
shift
host_build=$build/host
sizes=64,1024,16384,65536,262144
duration=2
rounds=3
out=/run/sdp-results
while [ $# -gt 0 ]; do
	case $1 in
	--host-build) host_build=$2; shift 2 ;;
	--sizes) sizes=$2; shift 2 ;;
	--duration) duration=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	*) echo "bench: unknown option $1; $usage" >&2; exit 2 ;;
	esac
done

kver=$(uname -r)
bench=$host_build/userlib/bench/sdp-bench
module=$build/kmod/$kver/sdp.ko
server_addr=10.77.0.1
IFS=, read -r -a size_list <<< "$sizes"
# The goal points (scripts/bench/report.py).
goal_bw_size=65536
goal_lat_size=64
# sdp-bench ping-pong runs by time; perftest and rstream by count.
pp_duration=1

logs=$out/logs
mkdir -p "$logs"
csv=$out/raw.csv
notes=$out/notes.txt
echo "tool,family,metric,size,value,unit" > "$csv"
: > "$notes"
status=0
start=$(date +%s)

row() { echo "$1,$2,$3,$4,$5,$6" >> "$csv"; }
note() {
	echo "bench: $*"
	echo "$*" >> "$notes"
}
# A reference tool failed: the bench still reports, but fails.
ref_failed() {
	note "$*"
	status=1
}
elapsed() { echo "$(($(date +%s) - start))s"; }
last_line() { grep -v '^\s*$' "$1" 2>/dev/null | tail -n 1 | tr ',' ';'; }
# The last line of a log, or a reason when there is none.
why() {
	local l
	l=$(last_line "$1")
	echo "${l:-no message (killed by its timeout?)}"
}

# Packets sent by every rxe device (both ends are local, so the RDMA CM
# routes everything through rxe0; counting all devices needs no guess).
rxe_sent_pkts() {
	local f n=0
	for f in /sys/class/infiniband/*/ports/1/hw_counters/sent_pkts; do
		[ -r "$f" ] && n=$((n + $(cat "$f")))
	done
	echo $n
}
# Per series, the packets rxe sent while it ran (TCP must stay at 0, SDP
# must not).
declare -A pkts
count_pkts() { # SERIES COMMAND...: run COMMAND, add the packets to SERIES
	local series=$1 p0 rc
	shift
	p0=$(rxe_sent_pkts)
	"$@"
	rc=$?
	pkts[$series]=$((${pkts[$series]:-0} + $(rxe_sent_pkts) - p0))
	return $rc
}

# Round trips for the count-based latency tools, by message size.
lat_iters() {
	if [ "$1" -le 4096 ]; then echo 1000
	elif [ "$1" -le 16384 ]; then echo 500
	elif [ "$1" -le 65536 ]; then echo 300
	else echo 100
	fi
}

# pair NAME "SERVER CMD" "CLIENT CMD" LIMIT: run a server in the
# background and its client, retrying the client while the server is not
# listening yet.  Output in logs/NAME.{server,client}.log.  0 if both
# succeeded.  (Called through count_pkts.)
# shellcheck disable=SC2317
pair() {
	local name=$1 scmd=$2 ccmd=$3 limit=$4 spid ok=1 try
	# shellcheck disable=SC2086
	timeout -k 2 "$limit" $scmd > "$logs/$name.server.log" 2>&1 &
	spid=$!
	sleep 0.3
	for try in $(seq 10); do
		# shellcheck disable=SC2086
		if timeout -k 2 "$limit" $ccmd > "$logs/$name.client.log" 2>&1; then
			ok=0
			break
		fi
		kill -0 "$spid" 2>/dev/null || break
		echo "(client attempt $try failed, retrying)" >> "$logs/$name.server.log"
		sleep 0.5
	done
	[ "$ok" = 0 ] || kill "$spid" 2>/dev/null
	wait "$spid" || ok=1
	return "$ok"
}

# --- raw verbs: perftest over RDMA CM ----------------------------------------
# perftest reports MB/sec as 2^20 bytes; everything here is 10^6 bytes.
# BW average of the result line for size $1 in log $2, if not 0.
bw_of() {
	awk -v s="$1" '$1 == s && NF >= 5 && $4 > 0 { printf "%.3f", $4 * 1.048576 }' "$2"
}
ib_bw() { # SIZE TAG
	local s=$1 name=ib_send_bw-$1$2 v=''
	if count_pkts perftest pair "$name" "ib_send_bw -R -F -d rxe0 -s $s -D $duration" \
		"ib_send_bw -R -F -d rxe1 -s $s -D $duration $server_addr" $((duration + 30)); then
		# The receiver's (server's) average, as for the other tools; the
		# receiver of a duration run sometimes reports 0: then the
		# sender's (RC: completed sends were acknowledged by the receiver).
		v=$(bw_of "$s" "$logs/$name.server.log")
		[ -n "$v" ] || v=$(bw_of "$s" "$logs/$name.client.log")
	fi
	if [ -n "$v" ]; then
		row ib_send_bw verbs throughput "$s" "$v" MB/s
	else
		row ib_send_bw verbs throughput "$s" n/a MB/s
		ref_failed "ib_send_bw $s B failed: $(why "$logs/$name.client.log")"
	fi
}
# ib_send_lat reports half round trips: doubled to round trips.
ib_lat() { # SIZE TAG
	local s=$1 name=ib_send_lat-$1$2 n p50='' p99=''
	n=$(lat_iters "$s")
	if count_pkts perftest pair "$name" "ib_send_lat -R -F -d rxe0 -s $s -n $n" \
		"ib_send_lat -R -F -d rxe1 -s $s -n $n $server_addr" 60; then
		read -r p50 p99 < <(awk -v s="$s" '$1 == s && NF >= 9 { printf "%.2f %.2f", 2 * $5, 2 * $8 }' \
			"$logs/$name.client.log")
	fi
	if [ -n "$p50" ]; then
		row ib_send_lat verbs rtt_p50 "$s" "$p50" us
		row ib_send_lat verbs rtt_p99 "$s" "$p99" us
	else
		row ib_send_lat verbs rtt_p50 "$s" n/a us
		ref_failed "ib_send_lat $s B failed: $(why "$logs/$name.client.log")"
	fi
}

# --- rsockets: rstream --------------------------------------------------------
# rstream sends -C transfers one way, then back; usec/xfer is per one-way
# transfer, so bytes/usec is MB/s one way, and a 1-transfer exchange is
# half a round trip (a mean: rstream has no percentiles).
rs_bw() { # SIZE TAG
	local s=$1 name=rstream-bw-$1$2 count v=''
	# About `duration` seconds each way at Soft-RoCE-under-TCG rates.
	count=$(awk -v s="$s" -v d="$duration" 'BEGIN {
		c = int(20 * 1048576 * d / s); if (c < 200) c = 200; if (c > 50000 * d) c = 50000 * d; print c }')
	if count_pkts rstream pair "$name" "rstream -b $server_addr -S $s -C $count -I 1" \
		"rstream -s $server_addr -S $s -C $count -I 1" $((duration * 4 + 30)); then
		v=$(awk -v s="$s" '$1 == "custom" && $8 > 0 { printf "%.3f", s / $8 }' "$logs/$name.client.log")
	fi
	if [ -n "$v" ]; then
		row rstream rsockets throughput "$s" "$v" MB/s
	else
		row rstream rsockets throughput "$s" n/a MB/s
		ref_failed "rstream $s B stream failed: $(why "$logs/$name.client.log")"
	fi
}
rs_lat() { # SIZE TAG
	local s=$1 name=rstream-lat-$1$2 n v=''
	n=$(lat_iters "$s")
	if count_pkts rstream pair "$name" "rstream -b $server_addr -S $s -C 1 -I $n" \
		"rstream -s $server_addr -S $s -C 1 -I $n" 60; then
		v=$(awk '$1 == "custom" { printf "%.2f", 2 * $8 }' "$logs/$name.client.log")
	fi
	if [ -n "$v" ]; then
		row rstream rsockets rtt_avg "$s" "$v" us
	else
		row rstream rsockets rtt_avg "$s" n/a us
		ref_failed "rstream $s B ping-pong failed: $(why "$logs/$name.client.log")"
	fi
}

# --- sdp-bench: TCP and SDP ---------------------------------------------------
# One server per family for the whole bench; a client per point.
declare -A sb_port sb_pid sb_dead
sb_port[inet]=18520
sb_port[sdp]=18521
sb_server() { # FAMILY: start its server; 1 (with the reason noted) if it did not listen
	local fam=$1
	local slog=$logs/sdp-bench-$fam.server.log
	timeout -k 2 3600 "$bench" server --family "$fam" --addr "$server_addr" \
		--port "${sb_port[$fam]}" > "$slog" 2>&1 &
	sb_pid[$fam]=$!
	for _ in $(seq 50); do
		grep -q 'listening on' "$slog" && return 0
		kill -0 "${sb_pid[$fam]}" 2>/dev/null || break
		sleep 0.1
	done
	grep -q 'listening on' "$slog" && return 0
	kill "${sb_pid[$fam]}" 2>/dev/null
	sb_dead[$fam]="server: $(why "$slog")"
	return 1
}
# sb FAMILY MODE SIZE TAG: one client run.  After a failure, the same
# family and mode are not tried again (a broken SDP would cost a timeout
# per point) and their points are n/a.
sb() {
	local fam=$1 mode=$2 s=$3 tag=$4 line err
	local out=$logs/sdp-bench-$fam-$mode-$s$tag
	if [ -n "${sb_dead[$fam]:-}" ] || [ -n "${sb_dead[$fam-$mode]:-}" ]; then
		line=
	else
		local args=(--duration "$duration")
		[ "$mode" = pingpong ] && args=(--mode pingpong --duration "$pp_duration")
		if count_pkts "sdp-bench-$fam" timeout -k 2 $((duration + pp_duration + 60)) "$bench" client \
			--family "$fam" --addr "$server_addr" --port "${sb_port[$fam]}" --sizes "$s" \
			"${args[@]}" --csv > "$out.csv" 2> "$out.err"; then
			line=$(grep "^$fam,$mode,$s," "$out.csv")
		else
			line=
			err=$(why "$out.err")
			sb_dead[$fam-$mode]=$err
			if [ "$fam" = sdp ]; then
				note "SDP $mode $s B failed, no more SDP $mode runs: $err"
			else
				ref_failed "sdp-bench $fam $mode $s B failed: $err"
			fi
		fi
	fi
	# family,mode,size,throughput_MBps,msgs_per_s,p50_us,p99_us,bytes,verified
	if [ "$mode" = stream ]; then
		if [ -n "$line" ]; then
			row sdp-bench "$fam" throughput "$s" "$(cut -d, -f4 <<< "$line")" MB/s
			row sdp-bench "$fam" msgs_per_s "$s" "$(cut -d, -f5 <<< "$line")" msg/s
		else
			row sdp-bench "$fam" throughput "$s" n/a MB/s
		fi
	elif [ -n "$line" ]; then
		row sdp-bench "$fam" rtt_p50 "$s" "$(cut -d, -f6 <<< "$line")" us
		row sdp-bench "$fam" rtt_p99 "$s" "$(cut -d, -f7 <<< "$line")" us
	else
		row sdp-bench "$fam" rtt_p50 "$s" n/a us
	fi
}

# insmod does not resolve dependencies (ib_core, rdma_cm): load them first.
load_module() {
	local deps
	deps=$(modinfo -F depends "$1" | tr , ' ')
	# shellcheck disable=SC2086
	[ -z "$deps" ] || modprobe -a $deps || return 1
	insmod "$1"
}

# --- the run -------------------------------------------------------------------
echo "bench: kernel $kver, sizes $sizes, ${duration}s per throughput point, $rounds rounds of the goal points"
if ! scripts/vm/rxe-setup.sh > "$logs/rxe-setup.log" 2>&1; then
	cat "$logs/rxe-setup.log"
	note "Soft-RoCE did not come up: no measurement possible"
	exit 1
fi
rdma link show > "$logs/rdma-link.log" 2>&1

have_bench=1
if [ ! -x "$bench" ]; then
	ref_failed "sdp-bench not built: $bench"
	have_bench=0
	sb_dead[inet]="not built"
	sb_dead[sdp]="not built"
else
	sb_server inet || ref_failed "sdp-bench TCP ${sb_dead[inet]}"
fi

sdp_loaded=0
if [ $have_bench = 1 ]; then
	if [ ! -f "$module" ]; then
		sb_dead[sdp]="$module not built (make module KVER=$kver)"
		note "SDP: ${sb_dead[sdp]}"
	elif ! load_module "$module" 2> "$logs/insmod.log"; then
		sb_dead[sdp]="insmod $module failed: $(why "$logs/insmod.log")"
		note "SDP: ${sb_dead[sdp]}"
	else
		sdp_loaded=1
		echo "bench: sdp.ko loaded, family $(cat /sys/module/sdp/parameters/family 2>/dev/null)"
		[ -r /proc/net/sdpstats ] && cat /proc/net/sdpstats > "$logs/sdpstats.before" 2>&1
		sb_server sdp || note "SDP: ${sb_dead[sdp]}"
	fi
fi

for s in "${size_list[@]}"; do
	ib_bw "$s" ""
	rs_bw "$s" ""
	sb inet stream "$s" ""
	sb sdp stream "$s" ""
	ib_lat "$s" ""
	rs_lat "$s" ""
	sb inet pingpong "$s" ""
	sb sdp pingpong "$s" ""
	echo "bench: $s B done ($(elapsed))"
done
for r in $(seq 2 "$rounds"); do
	ib_bw $goal_bw_size "-r$r"
	rs_bw $goal_bw_size "-r$r"
	sb sdp stream $goal_bw_size "-r$r"
	ib_lat $goal_lat_size "-r$r"
	sb sdp pingpong $goal_lat_size "-r$r"
	echo "bench: goal points, round $r done ($(elapsed))"
done

for series in perftest rstream sdp-bench-inet sdp-bench-sdp; do
	case $series in
	perftest) tool=perftest fam=verbs ;;
	rstream) tool=rstream fam=rsockets ;;
	*) tool=sdp-bench fam=${series#sdp-bench-} ;;
	esac
	row "$tool" "$fam" rxe_sent_pkts 0 "${pkts[$series]:-0}" packets
done
for fam in inet sdp; do
	if [ -n "${sb_pid[$fam]:-}" ]; then
		kill "${sb_pid[$fam]}" 2>/dev/null
		wait "${sb_pid[$fam]}" 2>/dev/null
	fi
done
if [ $sdp_loaded = 1 ]; then
	[ -r /proc/net/sdpstats ] && cat /proc/net/sdpstats > "$logs/sdpstats.after" 2>&1
	rmmod sdp 2> "$logs/rmmod.log" || note "SDP: rmmod sdp failed: $(why "$logs/rmmod.log")"
fi
if [ -n "${sb_dead[sdp]:-}${sb_dead[sdp-stream]:-}${sb_dead[sdp-pingpong]:-}" ]; then
	echo "bench: *** SDP could not be measured (fully); those points are n/a (see notes) ***"
fi
echo "bench: done in $(elapsed); $(($(wc -l < "$csv") - 1)) rows in $csv"
exit $status
