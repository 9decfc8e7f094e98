#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# End-to-end check of sdp-bench over TCP on 127.0.0.1: a server and a client
# run stream and ping-pong with verification, blocking and io_uring, with
# CSV output, and zero-copy sends (MSG_ZEROCOPY, io_uring SEND_ZC); then
# the error paths (nothing listening, bad option).  Every process is
# bounded by a timeout.
#
#   e2e_test.sh path/to/sdp-bench
set -euo pipefail
bench=$1
dir=$(mktemp -d)
server=
cleanup() {
	[ -n "$server" ] && kill "$server" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	for f in "$dir"/*; do
		[ -f "$f" ] && { echo "--- $f" >&2; cat "$f" >&2; }
	done
	exit 1
}

# The server picks a free port and tells it: no clash with parallel tests.
# Runs: 2 stream (verify) + 1 stream by duration + 2 pingpong + 2 requests
# + 2 async + 2 zero-copy sends.
timeout 60 "$bench" server --addr 127.0.0.1 --port 0 --connections 11 > "$dir/server.out" 2> "$dir/server.err" &
server=$!
port=
for _ in $(seq 100); do
	port=$(sed -n 's/^sdp-bench: server listening on 127\.0\.0\.1:\([0-9]*\),.*/\1/p' "$dir/server.out")
	[ -n "$port" ] && break
	sleep 0.1
done
[ -n "$port" ] || fail "the server did not report its port"

client() { timeout 30 "$bench" client --addr 127.0.0.1 --port "$port" "$@"; }

# Stream by volume, verified, CSV: a header and one line per size.
client --sizes 64,64k --bytes 4M --verify --csv > "$dir/stream.csv" || fail "stream client failed"
[ "$(head -n 1 "$dir/stream.csv")" = "family,mode,size,throughput_MBps,msgs_per_s,p50_us,p99_us,bytes,verified" ] ||
	fail "bad CSV header"
grep -Eq '^inet,stream,64,[0-9.]+,[0-9.]+,,,4194304,ok$' "$dir/stream.csv" || fail "bad 64 B stream line"
grep -Eq '^inet,stream,65536,[0-9.]+,[0-9.]+,,,4194304,ok$' "$dir/stream.csv" || fail "bad 64 KiB stream line"
[ "$(wc -l < "$dir/stream.csv")" = 3 ] || fail "expected 3 CSV lines"

# Stream by duration (ends with a half close), human output.
client --sizes 16k --duration 0.5 > "$dir/duration.out" || fail "duration client failed"
grep -Eq '^sdp-bench: inet stream 16384 B: [0-9.]+ MB/s, .* verify off$' "$dir/duration.out" ||
	fail "bad human stream line"

# Ping-pong, verified, two sizes.
client --mode pingpong --sizes 1,4k --iterations 200 --verify --csv > "$dir/pingpong.csv" ||
	fail "pingpong client failed"
grep -Eq '^inet,pingpong,1,[0-9.]+,[0-9.]+,[0-9.]+,[0-9.]+,220,ok$' "$dir/pingpong.csv" ||
	fail "bad 1 B pingpong line (200 + 20 warm-up round trips)"
grep -Eq '^inet,pingpong,4096,[0-9.]+,[0-9.]+,[0-9.]+,[0-9.]+,901120,ok$' "$dir/pingpong.csv" ||
	fail "bad 4 KiB pingpong line"

# Small requests, large responses, verified both ways: the CSV counts the
# request bytes the server received (100 + 10 warm-up round trips of 64 B).
client --mode pingpong --sizes 1m,100 --request 64 --iterations 100 --verify --csv \
	> "$dir/request.csv" || fail "request client failed"
grep -Eq '^inet,pingpong,1048576,[0-9.]+,[0-9.]+,[0-9.]+,[0-9.]+,7040,ok$' "$dir/request.csv" ||
	fail "bad 1 MiB response line"
grep -Eq '^inet,pingpong,100,[0-9.]+,[0-9.]+,[0-9.]+,[0-9.]+,7040,ok$' "$dir/request.csv" ||
	fail "bad 100 B response line"
grep -q "pingpong 1048576 B: 7040 bytes received in requests of 64 B, verify ok" "$dir/server.out" ||
	fail "the server did not report the requests"

# io_uring (or its announced fallback) for both modes.
client --async --sizes 64k --bytes 8M --verify --csv > "$dir/async.csv" 2> "$dir/async.err" ||
	fail "async stream client failed"
grep -Eq '^inet,stream,65536,[0-9.]+,[0-9.]+,,,8388608,ok$' "$dir/async.csv" || fail "bad async stream line"
client --async --mode pingpong --sizes 100 --iterations 100 --verify --csv > "$dir/async-pp.csv" 2>> "$dir/async.err" ||
	fail "async pingpong client failed"
grep -Eq '^inet,pingpong,100,.*,ok$' "$dir/async-pp.csv" || fail "bad async pingpong line"
if [ -s "$dir/async.err" ]; then
	grep -q 'falling back to blocking' "$dir/async.err" || fail "unexpected stderr from --async"
fi

# Zero-copy sends: MSG_ZEROCOPY and io_uring SEND_ZC, a buffer sent again
# after its notification (the error queue's, the NOTIF completion).
client --zerocopy msg --sizes 64k --bytes 8M --verify --csv > "$dir/zc-msg.csv" 2> "$dir/zc-msg.err" ||
	fail "--zerocopy msg client failed"
grep -Eq '^inet,stream,65536,[0-9.]+,[0-9.]+,,,8388608,ok$' "$dir/zc-msg.csv" || fail "bad --zerocopy msg line"
grep -Eq '^sdp-bench: stream 65536 B: MSG_ZEROCOPY: [1-9][0-9]* sends notified, [0-9]+ of them as copied$' \
	"$dir/zc-msg.err" || fail "--zerocopy msg: no notification summary"
client --zerocopy uring --sizes 64k --bytes 8M --verify --csv > "$dir/zc-uring.csv" 2> "$dir/zc-uring.err" ||
	fail "--zerocopy uring client failed"
grep -Eq '^inet,stream,65536,[0-9.]+,[0-9.]+,,,8388608,ok$' "$dir/zc-uring.csv" || fail "bad --zerocopy uring line"
grep -Eq '^sdp-bench: stream 65536 B: io_uring SEND_ZC: [1-9][0-9]* NOTIF completions$' "$dir/zc-uring.err" ||
	fail "--zerocopy uring: no NOTIF summary"

wait "$server" || fail "server exited with $?"
server=
[ "$(grep -c 'verify ok' "$dir/server.out")" = 10 ] || fail "server did not verify 10 runs"

# Errors: nothing listening (a refused port, no retry), bad option.
set +e
timeout 30 "$bench" client --addr 127.0.0.1 --port "$port" --connect-timeout 0.3 > /dev/null 2> "$dir/refused.err"
rc=$?
set -e
[ $rc = 1 ] || fail "refused connect: exit $rc, expected 1"
grep -q "^sdp-bench: client: connect to 127.0.0.1:$port (inet): Connection refused" "$dir/refused.err" ||
	fail "refused connect: unclear message"
set +e
"$bench" client --sizes 0 > /dev/null 2> "$dir/usage.err"
rc=$?
set -e
[ $rc = 2 ] || fail "bad option: exit $rc, expected 2"
grep -q "bad --sizes '0'" "$dir/usage.err" || fail "bad option: unclear message"
# The zero-copy threshold is an SDP socket option.
set +e
"$bench" client --zcopy-thresh 0 > /dev/null 2> "$dir/zcopy.err"
rc=$?
set -e
[ $rc = 2 ] || fail "--zcopy-thresh over TCP: exit $rc, expected 2"
grep -q -- "--zcopy-thresh is for --family sdp" "$dir/zcopy.err" || fail "--zcopy-thresh over TCP: unclear message"
echo "sdp-bench e2e over TCP: passed"
