#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# VM benchmark (`make bench`): runs inside the guest (scripts/vm/run.sh).
# One boot measures, over the same Soft-RoCE link (rxe-setup.sh):
#
#   raw verbs   ib_send_bw -R / ib_send_lat -R (perftest, RDMA CM): the ceiling;
#               for the zero-copy sizes also ib_read_bw -R and ib_write_bw -R,
#               the ceilings of RDMA Read (SrcAvail) and RDMA Write (SinkAvail),
#               with perftest's default operations in flight and with one
#               (-t 1, -o 1: what SDP keeps in flight per connection today)
#   rsockets    rstream (librdmacm): the RDMA peer
#   TCP         sdp-bench --family inet
#   SDP         sdp-bench --family sdp, after insmod sdp.ko, with the module's
#               default zero-copy threshold (net.sdp.zcopy_thresh: sizes at
#               or above it go by zero copy); for the zero-copy sizes also
#               "SDP bcopy" (--zcopy-thresh 0 on both ends: every byte copied),
#               and a request/response ping-pong of each next to
#               ib_write_lat -R, and 64 B requests answered with responses
#               of the size (SDP, SDP bcopy and TCP).
#               When SDP cannot run (yet) its points are recorded as n/a with
#               the error and the bench goes on.
#   setup       sdp-connrate: --conns connections opened one after another and
#               kept open, for TCP, SDP, rsockets and the raw RDMA CM
#               (rdma_create_ep + rdma_connect, the ceiling): connections/s
#               and the guest's memory per connection (both ends)
#
#   bench.sh BUILD_DIR [--host-build DIR] [--sizes 64,1024,...]
#                      [--zcopy-sizes 64k,...|none] [--duration S]
#                      [--rounds N] [--conns N] [--out DIR]
#
# --sizes: stream and ping-pong for every tool (default 64 B to 256 KiB);
# --zcopy-sizes: stream only, RDMA Read/Write ceilings and SDP bcopy as
# well (default 64 KiB to 4 MiB; sizes missing from --sizes also get raw
# send, rsockets, TCP and SDP streams).
#
# Every SDP run is counted: /proc/net/sdpstats before and after gives the
# bytes the CPU copied in SDP (cpu_copy_bytes, both ends: they share the
# guest) and the bytes sent by zero copy, divided by the bytes the
# application moved (stream: what the receiver got; ping-pong: both ways).
# bcopy copies each byte twice (send and receive), zero copy never.
#
# The tools take turns size by size, so a slow spell of the host (TCG shares
# its cores with whatever else runs there) hits every tool of a size rather
# than one tool; then the points the goals use (64 KiB stream, 64 B and 1 KiB
# ping-pong, 1 MiB zero-copy stream against the RDMA Read and Write
# ceilings) are measured again, --rounds in all (default 3): the report
# takes the best of them, interference only ever slows things down.  The
# extra rounds are skipped when the bench has run so long that they would
# risk the guest's watchdog.
#
# BUILD_DIR holds the module for the running kernel (kmod/$KVER); sdp-bench
# is taken from the CMake build in --host-build (default BUILD_DIR/host).
# Output (default: the results share, /run/sdp-results):
#   raw.csv    tool,family,metric,size,value,unit, one row per measurement
#              (value n/a when a point could not be measured); family sdp is
#              SDP at the default threshold, sdp-bcopy SDP with zero copy off;
#              per SDP run also copies_per_byte, zcopy_fraction (sent by zero
#              copy / moved), zcopy_rdma_reads, zcopy_rdma_writes,
#              zcopy_fallbacks (pingpong_* for ping-pong runs, rr_* for
#              the request/response runs; their round trips are rr_p50
#              and rr_p99, beside ib_write_lat's; get_* for small
#              requests with large responses, get_p50 and get_p99 beside
#              TCP's), and once
#              zcopy_thresh (size 0)
#   notes.txt  what failed and why, one line each ("zcopy: ..." when zero
#              copy did not happen where expected, or happened when off)
#   logs/      every tool's output
# scripts/bench/report.py turns that into the table, ratios and plots.
#
# Exit status: 0 when the test bed and the reference tools worked (whatever
# SDP did), 1 when Soft-RoCE or a reference measurement failed.
set -uo pipefail

usage="usage: bench.sh BUILD_DIR [--host-build DIR] [--sizes LIST] [--zcopy-sizes LIST|none] [--duration S] [--rounds N] [--conns N] [--out DIR]"
build=${1:?$usage}
shift
host_build=$build/host
sizes=64,1024,16384,65536,262144
zcopy_sizes=65536,262144,1048576,4194304
duration=2
rounds=3
conns=200
out=/run/sdp-results
while [ $# -gt 0 ]; do
	case $1 in
	--host-build) host_build=$2; shift 2 ;;
	--sizes) sizes=$2; shift 2 ;;
	--zcopy-sizes) zcopy_sizes=$2; shift 2 ;;
	--duration) duration=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--conns) conns=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	*) echo "bench: unknown option $1; $usage" >&2; exit 2 ;;
	esac
done

kver=$(uname -r)
bench=$host_build/userlib/bench/sdp-bench
module=$build/kmod/$kver/sdp.ko
server_addr=10.77.0.1
IFS=, read -r -a size_list <<< "$sizes"
zc_list=()
[ "$zcopy_sizes" = none ] || IFS=, read -r -a zc_list <<< "$zcopy_sizes"
# Every size once, ascending.
mapfile -t all_sizes < <(printf '%s\n' "${size_list[@]}" "${zc_list[@]}" | sort -n -u)
in_list() { # VALUE ELEMENT...: 0 if VALUE is one of the elements
	local v=$1 e
	shift
	for e in "$@"; do [ "$e" = "$v" ] && return 0; done
	return 1
}
# The goal points (scripts/bench/report.py).
goal_bw_size=65536
goal_lat_size=64
goal_lat2_size=1024
goal_zc_size=1048576
# Past this many seconds the extra rounds are skipped: the guest's watchdog
# (make bench: 900 s) must never cut the run short.
round_budget=600
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
# perftest bandwidth runs go by count, not by time (-D): a duration run
# reported 0 MB/s now and then, with iterations done (6.12 guest, sends of
# 64 and 256 KiB), and with 128 outstanding 1 MiB reads none completed in
# the window.  About `duration` seconds at Soft-RoCE-under-TCG rates.
perftest_count() { # SIZE
	awk -v s="$1" -v d="$duration" 'BEGIN {
		c = int(20 * 1048576 * d / s); if (c < 8) c = 8; if (c > 50000 * d) c = 50000 * d; print c }'
}
# perftest_failed TOOL SIZE LOG: note why a bandwidth point is missing.
perftest_failed() {
	if awk -v s="$2" '$1 == s && $4 == 0 { f = 1 } END { exit !f }' "$3"; then
		ref_failed "$1 $2 B: reported 0 MB/s"
	else
		ref_failed "$1 $2 B failed: $(why "$3")"
	fi
}
# perftest_bw send|read|write SIZE TAG [ONE]: one ib_*_bw point.  The
# average of the side that counts first: for sends the receiver (the
# server), as for the other tools, else the sender (RC: completed sends were
# acknowledged); RDMA Read and Write are issued and counted by the client
# (active side).  ONE=1: one operation in flight (-t 1, and -o 1 for
# reads), as SDP keeps one SrcAvail or SinkAvail per connection today;
# family verbs-1 instead of verbs.
perftest_bw() {
	local s=$2 tool=ib_$1_bw v='' n first=client second=server
	local name=$tool-$2$3 fam=verbs opts='' try
	if [ "${4:-0}" = 1 ]; then
		fam=verbs-1 name=$tool-1-$2$3 opts='-t 1'
		[ "$1" = read ] && opts='-t 1 -o 1'
	fi
	[ "$1" = send ] && first=server second=client
	n=$(perftest_count "$s")
	# A second try when perftest reports 0 MB/s for a run whose
	# iterations completed (seen with -t 1 at 64 KiB, 1 s per point).
	for try in 1 2; do
		if count_pkts perftest pair "$name" "$tool -R -F -d rxe0 -s $s -n $n $opts" \
			"$tool -R -F -d rxe1 -s $s -n $n $opts $server_addr" $((duration * 4 + 30)); then
			v=$(bw_of "$s" "$logs/$name.$first.log")
			[ -n "$v" ] || v=$(bw_of "$s" "$logs/$name.$second.log")
		fi
		[ -n "$v" ] && break
		awk -v s="$s" '$1 == s && $4 == 0 { f = 1 } END { exit !f }' "$logs/$name.client.log" ||
			break
	done
	if [ -n "$v" ]; then
		row "$tool" $fam throughput "$s" "$v" MB/s
	else
		row "$tool" $fam throughput "$s" n/a MB/s
		perftest_failed "$tool${opts:+ $opts}" "$s" "$logs/$name.client.log"
	fi
}
# perftest_lat TOOL SIZE ITERS METRIC NAME LIMIT: one ib_*_lat point.  perftest
# reports half round trips: doubled to round trips, rows METRIC_p50 and _p99.
perftest_lat() {
	local tool=$1 s=$2 n=$3 metric=$4 name=$5 limit=$6 p50='' p99=''
	if count_pkts perftest pair "$name" "$tool -R -F -d rxe0 -s $s -n $n" \
		"$tool -R -F -d rxe1 -s $s -n $n $server_addr" "$limit"; then
		read -r p50 p99 < <(awk -v s="$s" '$1 == s && NF >= 9 { printf "%.2f %.2f", 2 * $5, 2 * $8 }' \
			"$logs/$name.client.log")
	fi
	if [ -n "$p50" ]; then
		row "$tool" verbs "${metric}_p50" "$s" "$p50" us
		row "$tool" verbs "${metric}_p99" "$s" "$p99" us
	else
		row "$tool" verbs "${metric}_p50" "$s" n/a us
		ref_failed "$tool $s B failed: $(why "$logs/$name.client.log")"
	fi
}
ib_lat() { # SIZE TAG
	perftest_lat ib_send_lat "$1" "$(lat_iters "$1")" rtt "ib_send_lat-$1$2" 60
}

# Request/response at the zero-copy sizes: a ping-pong of SDP (zero copy and
# bcopy) next to ib_write_lat (an RDMA Write ping-pong: one transfer in
# flight, as here).  Each side is in recv() before the other's message is
# sent, but its receive busy-polls before it advertises its buffer
# (net.sdp.recv_poll_us), so whether a transfer goes by RDMA Write into
# that SinkAvail or by the sender's SrcAvail depends on which comes first;
# the counters say.  By count: a 4 MiB round trip takes a few hundred ms.
rr_iters() {
	if [ "$1" -le 262144 ]; then echo 40; else echo 12; fi
}
ib_write_rr() { # SIZE
	perftest_lat ib_write_lat "$1" "$(rr_iters "$1")" rr "ib_write_lat-$1" 120
}
# A small request answered with a large response (a storage read, a GET of
# a large value): get_req bytes out, SIZE back, as many round trips as rr,
# over TCP and SDP (zero copy and bcopy).  The requester waits in recv()
# for the response, so a SinkAvail for its buffer races the responder's
# SrcAvail as in rr.
get_req=64

# --- rsockets: rstream --------------------------------------------------------
# rstream sends -C transfers one way, then back; usec/xfer is per one-way
# transfer, so bytes/usec is MB/s one way, and a 1-transfer exchange is
# half a round trip (a mean: rstream has no percentiles).
rs_bw() { # SIZE TAG
	local s=$1 name=rstream-bw-$1$2 count v=''
	# About `duration` seconds each way at Soft-RoCE-under-TCG rates.
	# (At least 200 transfers up to 256 KiB, 8 beyond: 200 x 4 MiB would
	# take minutes.)
	count=$(awk -v s="$s" -v d="$duration" 'BEGIN {
		c = int(20 * 1048576 * d / s); m = s <= 262144 ? 200 : 8
		if (c < m) c = m; if (c > 50000 * d) c = 50000 * d; print c }')
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
# One server per series for the whole bench; a client per point.  A series
# is a family and its options: inet (TCP), sdp (the module's zero-copy
# threshold), sdp-bcopy (SDP_ZCOPY_THRESH 0 on both ends: zero copy off).
declare -A sb_port sb_pid sb_dead sb_fam sb_opts
sb_port[inet]=18520
sb_port[sdp]=18521
sb_port[sdp-bcopy]=18522
sb_fam[inet]=inet
sb_fam[sdp]=sdp
sb_fam[sdp-bcopy]=sdp
sb_opts[inet]=
sb_opts[sdp]=
sb_opts[sdp-bcopy]="--zcopy-thresh 0"
# The zero-copy send interfaces at the zero-copy sizes: MSG_ZEROCOPY and
# io_uring SEND_ZC (a buffer is sent again after its notification), against the
# blocking send() of series sdp.
sb_port[sdp-msgzc]=18523
sb_port[sdp-uringzc]=18524
sb_fam[sdp-msgzc]=sdp
sb_fam[sdp-uringzc]=sdp
sb_opts[sdp-msgzc]="--zerocopy msg"
sb_opts[sdp-uringzc]="--zerocopy uring"
sb_server() { # SERIES: start its server; 1 (with the reason noted) if it did not listen
	local series=$1
	local slog=$logs/sdp-bench-$series.server.log
	# shellcheck disable=SC2086
	timeout -k 2 3600 "$bench" server --family "${sb_fam[$series]}" --addr "$server_addr" \
		--port "${sb_port[$series]}" ${sb_opts[$series]} > "$slog" 2>&1 &
	sb_pid[$series]=$!
	for _ in $(seq 50); do
		grep -q 'listening on' "$slog" && return 0
		kill -0 "${sb_pid[$series]}" 2>/dev/null || break
		sleep 0.1
	done
	grep -q 'listening on' "$slog" && return 0
	kill "${sb_pid[$series]}" 2>/dev/null
	sb_dead[$series]="server: $(why "$slog")"
	return 1
}

# The default zero-copy threshold of the loaded module (0: off), read once.
zc_thresh=0
stats=/proc/net/sdpstats
# sdp_counts BEFORE AFTER BYTES: the counters' growth over one run, as
# "copies_per_byte zcopy_fraction rdma_reads rdma_writes fallbacks": CPU
# copies in SDP per application byte and the share sent by zero copy.
sdp_counts() {
	awk -v moved="$3" '
		NR == FNR { a[$1] = $2; next }
		{ d[$1] = $2 - a[$1] }
		END {
			fb = 0
			for (k in d) if (k ~ /^zcopy_fallback_/) fb += d[k]
			printf "%.4f %.4f %d %d %d\n", d["cpu_copy_bytes"] / moved,
				d["zcopy_tx_bytes"] / moved, d["zcopy_rdma_reads"],
				d["zcopy_rdma_writes"], fb
		}' "$1" "$2"
}
# sdp_copies SERIES MODE SIZE OUT BYTES: record the counters of one SDP run
# (OUT.sdpstats.{before,after}) and say how its bytes went.
sdp_copies() {
	local series=$1 mode=$2 s=$3 out=$4 moved=$5 pre='' copies frac reads writes fb want
	[ -r "$out.sdpstats.before" ] && [ -r "$out.sdpstats.after" ] && [ "$moved" -gt 0 ] || return 0
	read -r copies frac reads writes fb < <(sdp_counts "$out.sdpstats.before" "$out.sdpstats.after" "$moved")
	[ -n "$copies" ] || return 0
	[ "$mode" = pingpong ] && pre=pingpong_
	[ "$mode" = rr ] && pre=rr_
	[ "$mode" = get ] && pre=get_
	row sdp-bench "$series" "${pre}copies_per_byte" "$s" "$copies" copies/B
	row sdp-bench "$series" "${pre}zcopy_fraction" "$s" "$frac" fraction
	row sdp-bench "$series" "${pre}zcopy_rdma_reads" "$s" "$reads" count
	row sdp-bench "$series" "${pre}zcopy_rdma_writes" "$s" "$writes" count
	row sdp-bench "$series" "${pre}zcopy_fallbacks" "$s" "$fb" count
	[ "$mode" = stream ] || return 0
	# Which way the bytes were expected to go: zero copy for the default
	# series at or above the threshold, bcopy otherwise.
	want=bcopy
	[ "$series" = sdp ] && [ "$zc_thresh" -gt 0 ] && [ "$s" -ge "$zc_thresh" ] && want=zcopy
	echo "bench: $series stream $s B: $(awk -v f="$frac" 'BEGIN { printf "%.1f", 100 * f }')% of the" \
		"bytes sent by zero copy ($reads RDMA Reads, $writes RDMA Writes, $fb fallbacks)," \
		"$copies CPU copies per byte in SDP (expected: $want)"
	if [ $want = zcopy ] && ! awk -v f="$frac" 'BEGIN { exit !(f >= 0.99) }'; then
		note "zcopy: SDP $s B stream at the default threshold ($zc_thresh) sent only $frac of its bytes by zero copy ($copies copies per byte, $fb fallbacks)"
	elif [ $want = bcopy ] && [ "$series" = sdp-bcopy ] && ! awk -v f="$frac" 'BEGIN { exit !(f == 0) }'; then
		note "zcopy: SDP bcopy $s B stream (SDP_ZCOPY_THRESH 0) still sent $frac of its bytes by zero copy"
	fi
}

# sb SERIES MODE SIZE TAG: one client run (MODE stream, pingpong, rr: a
# ping-pong by count, rr_iters, or get: get_req-byte requests answered with
# SIZE bytes, by count).  After a failure, the same
# series and mode are not tried again (a broken SDP would cost a timeout
# per point) and their points are n/a.
sb() {
	local series=$1 mode=$2 s=$3 tag=$4 line err moved csvmode=$2
	local fam=${sb_fam[$series]}
	local out=$logs/sdp-bench-$series-$mode-$s$tag
	if [ -n "${sb_dead[$series]:-}" ] || [ -n "${sb_dead[$series-$mode]:-}" ]; then
		line=
	else
		local args=(--duration "$duration")
		[ "$mode" = pingpong ] && args=(--mode pingpong --duration "$pp_duration")
		if [ "$mode" = rr ]; then
			csvmode=pingpong
			args=(--mode pingpong --iterations "$(rr_iters "$s")" --warmup 2)
		fi
		if [ "$mode" = get ]; then
			csvmode=pingpong
			args=(--mode pingpong --request "$get_req" --iterations "$(rr_iters "$s")" --warmup 2)
		fi
		[ "$fam" = sdp ] && [ -r $stats ] && cat $stats > "$out.sdpstats.before"
		# shellcheck disable=SC2086
		if count_pkts "sdp-bench-$series" timeout -k 2 $((duration + pp_duration + 60)) "$bench" client \
			--family "$fam" --addr "$server_addr" --port "${sb_port[$series]}" --sizes "$s" \
			${sb_opts[$series]} "${args[@]}" --csv > "$out.csv" 2> "$out.err"; then
			line=$(grep "^$fam,$csvmode,$s," "$out.csv")
		else
			line=
			err=$(why "$out.err")
			sb_dead[$series-$mode]=$err
			if [ "$fam" = sdp ]; then
				note "SDP${series#sdp} $mode $s B failed, no more SDP${series#sdp} $mode runs: $err"
			else
				ref_failed "sdp-bench $fam $mode $s B failed: $err"
			fi
		fi
		[ "$fam" = sdp ] && [ -r $stats ] && cat $stats > "$out.sdpstats.after"
	fi
	# family,mode,size,throughput_MBps,msgs_per_s,p50_us,p99_us,bytes,verified
	if [ "$mode" = stream ]; then
		if [ -n "$line" ]; then
			row sdp-bench "$series" throughput "$s" "$(cut -d, -f4 <<< "$line")" MB/s
			row sdp-bench "$series" msgs_per_s "$s" "$(cut -d, -f5 <<< "$line")" msg/s
		else
			row sdp-bench "$series" throughput "$s" n/a MB/s
		fi
	else
		local metric=rtt
		[ "$mode" = rr ] && metric=rr
		[ "$mode" = get ] && metric="get"
		if [ -n "$line" ]; then
			row sdp-bench "$series" ${metric}_p50 "$s" "$(cut -d, -f6 <<< "$line")" us
			row sdp-bench "$series" ${metric}_p99 "$s" "$(cut -d, -f7 <<< "$line")" us
		else
			row sdp-bench "$series" ${metric}_p50 "$s" n/a us
		fi
	fi
	if [ "$fam" = sdp ] && [ -n "$line" ]; then
		# The bytes the application moved: one way for a stream, both
		# ways for a ping-pong (the CSV counts what the server received).
		moved=$(cut -d, -f8 <<< "$line")
		case $mode in
		stream) ;;
		get) moved=$((moved + moved * s / get_req)) ;; # requests + responses
		*) moved=$((2 * moved)) ;;
		esac
		sdp_copies "$series" "$mode" "$s" "$out" "$moved"
	fi
}

# Programs users already trust, unmodified: iperf3 (stream, 128 KiB writes)
# and sockperf (64 B ping-pong; it reports half the round trip) over TCP and,
# through libsdp.so (sdp_run, every socket SDP only), over SDP.  An SDP run
# that did not establish its connections over SDP is recorded as n/a.
app_rules=$out/libsdp-bench.conf
app_bench() { # FAMILY: inet or sdp
	local fam=$1 pre=() log=$logs/apps-$1 est0 est1 bw p50 p99 srv
	if [ "$fam" = sdp ]; then
		printf 'use sdp server * *:*\nuse sdp client * *:*\n' > "$app_rules"
		pre=("$host_build/userlib/sdp_run" -c "$app_rules")
		est0=$(awk '$1 == "conn_established" { print $2 }' $stats)
	fi
	bw=n/a p50=n/a p99=n/a
	"${pre[@]}" iperf3 -s -B $server_addr -p 5401 -1 > "$log-iperf3-s.log" 2>&1 &
	srv=$!
	sleep 1
	if "${pre[@]}" iperf3 -c $server_addr -p 5401 -t "$duration" -l 128K -J \
		> "$log-iperf3.json" 2> "$log-iperf3.err"; then
		bw=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["end"]["sum_received"]["bytes"] / json.load(open(sys.argv[1]))["end"]["sum_received"]["seconds"] / 1e6, 1))' "$log-iperf3.json")
	else
		note "apps: iperf3 over $fam failed: $(why "$log-iperf3.err")"
	fi
	wait $srv 2> /dev/null
	"${pre[@]}" sockperf server --tcp -i $server_addr -p 11411 > "$log-sockperf-s.log" 2>&1 &
	srv=$!
	sleep 1
	if "${pre[@]}" sockperf ping-pong --tcp -i $server_addr -p 11411 -t "$duration" -m 64 \
		> "$log-sockperf.log" 2>&1; then
		p50=$(awk '/percentile 50.000 =/ { print $NF }' "$log-sockperf.log")
		p99=$(awk '/percentile 99.000 =/ { print $NF }' "$log-sockperf.log")
	else
		note "apps: sockperf over $fam failed: $(why "$log-sockperf.log")"
	fi
	kill $srv 2> /dev/null
	wait $srv 2> /dev/null
	if [ "$fam" = sdp ]; then
		est1=$(awk '$1 == "conn_established" { print $2 }' $stats)
		# iperf3: control and data; sockperf: one.
		if [ $((est1 - est0)) -lt 3 ]; then
			note "apps: only $((est1 - est0)) of 3 connections went over SDP: not measured"
			bw=n/a p50=n/a p99=n/a
		fi
	fi
	row iperf3 "$fam" throughput 131072 "${bw:-n/a}" MB/s
	row sockperf "$fam" latency_p50 64 "${p50:-n/a}" us
	row sockperf "$fam" latency_p99 64 "${p99:-n/a}" us
}

# insmod does not resolve dependencies (ib_core, rdma_cm): load them first.
# SDP only (fallback=0): a connection SDP cannot carry fails the run instead
# of being measured over TCP.
load_module() {
	local deps
	deps=$(modinfo -F depends "$1" | tr , ' ')
	# shellcheck disable=SC2086
	[ -z "$deps" ] || modprobe -a $deps || return 1
	insmod "$1" fallback=0
}

# --- the run -------------------------------------------------------------------
echo "bench: kernel $kver, sizes $sizes, zero-copy sizes $zcopy_sizes, ${duration}s per throughput point, $rounds rounds of the goal points"
if ! scripts/vm/rxe-setup.sh > "$logs/rxe-setup.log" 2>&1; then
	cat "$logs/rxe-setup.log"
	note "Soft-RoCE did not come up: no measurement possible"
	exit 1
fi
rdma link show > "$logs/rdma-link.log" 2>&1

sdp_series=(sdp)
[ ${#zc_list[@]} -gt 0 ] && sdp_series+=(sdp-bcopy sdp-msgzc sdp-uringzc)
have_bench=1
if [ ! -x "$bench" ]; then
	ref_failed "sdp-bench not built: $bench"
	have_bench=0
	for series in inet "${sdp_series[@]}"; do sb_dead[$series]="not built"; done
else
	sb_server inet || ref_failed "sdp-bench TCP ${sb_dead[inet]}"
fi

sdp_loaded=0
if [ $have_bench = 1 ]; then
	why_not=
	if [ ! -f "$module" ]; then
		why_not="$module not built (make module KVER=$kver)"
	elif ! load_module "$module" 2> "$logs/insmod.log"; then
		why_not="insmod $module failed: $(why "$logs/insmod.log")"
	fi
	if [ -n "$why_not" ]; then
		for series in "${sdp_series[@]}"; do sb_dead[$series]=$why_not; done
		note "SDP: $why_not"
	else
		sdp_loaded=1
		zc_thresh=$(cat /proc/sys/net/sdp/zcopy_thresh 2>/dev/null || echo 0)
		echo "bench: sdp.ko loaded, family $(cat /sys/module/sdp/parameters/family 2>/dev/null)," \
			"net.sdp.zcopy_thresh $zc_thresh"
		row sdp-bench sdp zcopy_thresh 0 "$zc_thresh" bytes
		[ -r $stats ] && cat $stats > "$logs/sdpstats.before" 2>&1
		[ -r $stats ] || note "zcopy: $stats missing: CPU copies not counted"
		sb_server sdp || note "SDP: ${sb_dead[sdp]}"
		if [ ${#zc_list[@]} -gt 0 ]; then
			sb_server sdp-bcopy || note "SDP bcopy: ${sb_dead[sdp-bcopy]}"
			sb_server sdp-msgzc || note "SDP MSG_ZEROCOPY: ${sb_dead[sdp-msgzc]}"
			sb_server sdp-uringzc || note "SDP SEND_ZC: ${sb_dead[sdp-uringzc]}"
		fi
	fi
fi

for s in "${all_sizes[@]}"; do
	main=0 zc=0
	in_list "$s" "${size_list[@]}" && main=1
	in_list "$s" "${zc_list[@]}" && zc=1
	# Streams of every series, then (main sizes) the round trips.
	perftest_bw send "$s" ""
	if [ $zc = 1 ]; then
		perftest_bw read "$s" ""
		perftest_bw write "$s" ""
		perftest_bw read "$s" "" 1
		perftest_bw write "$s" "" 1
	fi
	rs_bw "$s" ""
	sb inet stream "$s" ""
	sb sdp stream "$s" ""
	if [ $zc = 1 ]; then
		sb sdp-bcopy stream "$s" ""
		sb sdp-msgzc stream "$s" ""
		sb sdp-uringzc stream "$s" ""
	fi
	if [ $zc = 1 ]; then
		ib_write_rr "$s"
		sb sdp rr "$s" ""
		sb sdp-bcopy rr "$s" ""
		sb inet get "$s" ""
		sb sdp get "$s" ""
		sb sdp-bcopy get "$s" ""
	fi
	if [ $main = 1 ]; then
		ib_lat "$s" ""
		rs_lat "$s" ""
		sb inet pingpong "$s" ""
		sb sdp pingpong "$s" ""
	fi
	echo "bench: $s B done ($(elapsed))"
done
have_zc_goal=0
in_list $goal_zc_size "${zc_list[@]}" && have_zc_goal=1
for r in $(seq 2 "$rounds"); do
	if [ $(($(date +%s) - start)) -gt $round_budget ]; then
		note "rounds $r to $rounds skipped: the bench had run $(elapsed) (over ${round_budget}s); the goal points have fewer samples"
		break
	fi
	perftest_bw send $goal_bw_size "-r$r"
	rs_bw $goal_bw_size "-r$r"
	sb sdp stream $goal_bw_size "-r$r"
	ib_lat $goal_lat_size "-r$r"
	sb sdp pingpong $goal_lat_size "-r$r"
	if in_list $goal_lat2_size "${size_list[@]}"; then
		ib_lat $goal_lat2_size "-r$r"
		sb sdp pingpong $goal_lat2_size "-r$r"
	fi
	if [ $have_zc_goal = 1 ]; then
		perftest_bw read $goal_zc_size "-r$r"
		perftest_bw write $goal_zc_size "-r$r"
		sb sdp stream $goal_zc_size "-r$r"
	fi
	echo "bench: goal points, round $r done ($(elapsed))"
done

# Preparing a user buffer for RDMA, sdp.ko's way (pin_user_pages_fast and
# its own accounting, arrays allocated once) and ib_umem_get()'s (the same
# pin and charge, an allocation per call, coalesced DMA mapping): mean
# nanoseconds per prepare and release at each zero-copy size up to the
# registration size (tests/kmod/sdp_pinbench.c; Documentation/zcopy.md).
pinbench() {
	local ko=$build/kmod-tests/$kver/sdp_pinbench.ko bytes sdp umem nents s
	if [ ! -f "$ko" ]; then
		note "pinning: $ko not built"
		return
	fi
	mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
	if ! modprobe -a ib_core ib_uverbs || ! insmod "$ko" iters=200 2> "$logs/pinbench.log"; then
		note "pinning: insmod sdp_pinbench.ko failed: $(why "$logs/pinbench.log")"
		return
	fi
	for s in "${zc_list[@]}"; do
		[ "$s" -le 2097152 ] || continue
		if read -r bytes sdp umem nents < <(python3 tests/vm/pinbench.py "$s" 2>> "$logs/pinbench.log"); then
			row pin sdp ns_per_buffer "$bytes" "$sdp" ns
			row pin umem ns_per_buffer "$bytes" "$umem" ns
			row pin umem dma_entries "$bytes" "$nents" entries
		else
			note "pinning $s B failed: $(why "$logs/pinbench.log")"
		fi
	done
	rmmod sdp_pinbench
}
pinbench
echo "bench: pinning done ($(elapsed))"

app_bench inet
if [ $sdp_loaded = 1 ] && [ -x "$host_build/userlib/sdp_run" ]; then
	app_bench sdp
else
	note "apps: SDP through libsdp.so not measured (sdp.ko not loaded or sdp_run not built)"
fi
echo "bench: iperf3 and sockperf done ($(elapsed))"

# Connection setup: --conns connections one after another, all kept open,
# then data both ways on 20 of them (not the raw CM's).  Rows: conn_rate
# (connections/s), mem_per_conn, slab_per_conn and vmalloc_per_conn (KiB,
# both ends), at
# size = the connections opened; a run that stopped early says why.
connrate() { # FAMILY PORT
	local fam=$1 log=$logs/connrate-$1.log line n rate mem slab vm err
	if ! timeout -k 5 120 "$host_build/userlib/bench/sdp-connrate" --family "$fam" \
		--addr $server_addr --port "$2" --count "$conns" --verify 20 --csv > "$log" 2>&1; then
		note "setup: sdp-connrate $fam: $(why "$log")"
		[ "$fam" = sdp ] || status=1
	fi
	line=$(grep "^$fam," "$log" | tail -n 1)
	if [ -z "$line" ]; then
		row sdp-connrate "$fam" conn_rate "$conns" n/a conn/s
		return
	fi
	IFS=, read -r _ n _ _ rate mem slab vm _ _ err <<< "$line"
	row sdp-connrate "$fam" conn_rate "$n" "$rate" conn/s
	row sdp-connrate "$fam" mem_per_conn "$n" "$mem" KiB
	row sdp-connrate "$fam" slab_per_conn "$n" "$slab" KiB
	row sdp-connrate "$fam" vmalloc_per_conn "$n" "$vm" KiB
	[ -z "$err" ] || note "setup: $fam stopped after $n connections: $err"
}
if [ -x "$host_build/userlib/bench/sdp-connrate" ]; then
	connrate inet 18530
	connrate rdmacm 18531
	connrate rsocket 18532
	if [ $sdp_loaded = 1 ]; then
		connrate sdp 18533
	else
		note "setup: SDP not measured (sdp.ko not loaded)"
	fi
else
	ref_failed "sdp-connrate not built"
fi
echo "bench: connection setup done ($(elapsed))"

for series in perftest rstream sdp-bench-inet "${sdp_series[@]/#/sdp-bench-}"; do
	case $series in
	perftest) tool=perftest fam=verbs ;;
	rstream) tool=rstream fam=rsockets ;;
	*) tool=sdp-bench fam=${series#sdp-bench-} ;;
	esac
	row "$tool" "$fam" rxe_sent_pkts 0 "${pkts[$series]:-0}" packets
done
for series in inet "${sdp_series[@]}"; do
	if [ -n "${sb_pid[$series]:-}" ]; then
		kill "${sb_pid[$series]}" 2>/dev/null
		wait "${sb_pid[$series]}" 2>/dev/null
	fi
done
if [ $sdp_loaded = 1 ]; then
	[ -r $stats ] && cat $stats > "$logs/sdpstats.after" 2>&1
	rmmod sdp 2> "$logs/rmmod.log" || note "SDP: rmmod sdp failed: $(why "$logs/rmmod.log")"
fi
dead=
for series in "${sdp_series[@]}"; do
	dead+="${sb_dead[$series]:-}${sb_dead[$series-stream]:-}${sb_dead[$series-pingpong]:-}"
	dead+="${sb_dead[$series-rr]:-}${sb_dead[$series-get]:-}"
done
if [ -n "$dead" ]; then
	echo "bench: *** SDP could not be measured (fully); those points are n/a (see notes) ***"
fi
echo "bench: done in $(elapsed); $(($(wc -l < "$csv") - 1)) rows in $csv"
exit $status
