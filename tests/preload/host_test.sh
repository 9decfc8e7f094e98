#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# libsdp.so on a host without sdp.ko (ctest libsdp_preload_host): a
# preloaded program still works over TCP and is told why once; a broken
# rules file is reported once with its line and the default applies; a
# program whose rules are all tcp is not touched; sdp_run's options.
#
#   host_test.sh LIBSDP_SO SDP_RUN
set -euo pipefail
lib=$1
run=$2
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
pass() { echo "ok: $*"; }

# Three connections to a local TCP echo server, each checked; prints the
# client sockets' SO_PROTOCOL.
cat > "$work/echo.py" <<'PY'
import socket, threading
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.bind(("127.0.0.1", 0))
srv.listen(4)
port = srv.getsockname()[1]
def serve():
    for _ in range(3):
        c, _ = srv.accept()
        while (b := c.recv(65536)):
            c.sendall(b)
        c.close()
threading.Thread(target=serve, daemon=True).start()
for i in range(3):
    with socket.create_connection(("127.0.0.1", port)) as c:
        data = bytes(range(256)) * 64 * (i + 1)
        c.sendall(data)
        c.shutdown(socket.SHUT_WR)
        got = b""
        while (b := c.recv(65536)):
            got += b
        assert got == data, "echo mismatch"
        print("proto", c.getsockopt(socket.SOL_SOCKET, socket.SO_PROTOCOL))
print("done")
PY

# 1. Without sdp.ko the sockets stay TCP; one warning, not one per socket.
SIMPLE_LIBSDP=1 LD_PRELOAD=$lib $py "$work/echo.py" > "$work/out1" 2> "$work/err1" ||
	fail "simple mode: the program failed: $(cat "$work/err1")"
if grep -q '^done$' "$work/out1" && [ "$(grep -c '^proto 6$' "$work/out1")" = 3 ]; then
	pass "no sdp.ko: the program runs over TCP"
else
	fail "no sdp.ko: $(cat "$work/out1" "$work/err1")"
fi
n=$(grep -c 'no SDP socket' "$work/err1" || true)
[ "$n" = 1 ] && pass "no sdp.ko: said once" || fail "no sdp.ko: $n warnings: $(cat "$work/err1")"

# 2. A malformed file: its line, once, then the default rules.
printf 'use both client * *:*\nuse sdp server * 10.0.0.300:1\n' > "$work/bad.conf"
"$run" -c "$work/bad.conf" $py "$work/echo.py" > "$work/out2" 2> "$work/err2" ||
	fail "bad rules: the program failed: $(cat "$work/err2")"
grep -q '^done$' "$work/out2" || fail "bad rules: $(cat "$work/out2" "$work/err2")"
n=$(grep -c "bad.conf: line 2: bad address or ports '10.0.0.300:1'; using the default rules" \
	"$work/err2" || true)
[ "$n" = 1 ] && pass "bad rules: reported once with the line" ||
	fail "bad rules: $n reports: $(cat "$work/err2")"

# 3. Rules that say tcp for this program: its sockets are not touched.
printf 'use tcp client * *:*\nuse tcp server * *:*\nuse sdp client other *:*\n' > "$work/tcp.conf"
"$run" -d -c "$work/tcp.conf" $py "$work/echo.py" > "$work/out3" 2> "$work/err3" ||
	fail "tcp rules: the program failed"
if grep -q '^done$' "$work/out3" && ! grep -q 'socket(' "$work/err3" &&
	! grep -q 'no SDP socket' "$work/err3"; then
	pass "tcp rules: plain TCP sockets"
else
	fail "tcp rules: $(cat "$work/err3")"
fi
grep -q '3 rules from' "$work/err3" && pass "debug log names the rules read" ||
	fail "debug log: $(cat "$work/err3")"

# 4. The log destination of the file is used.
printf 'log destination file %s min-level 1\nuse both client * *:*\n' "$work/lib.log" \
	> "$work/log.conf"
"$run" -c "$work/log.conf" $py "$work/echo.py" > /dev/null 2> "$work/err4" ||
	fail "log file: the program failed"
grep -q 'no SDP socket' "$work/lib.log" && [ ! -s "$work/err4" ] &&
	pass "log destination file" || fail "log file: $(cat "$work/lib.log" "$work/err4" 2>&1)"

# 5. sdp_run refuses what it cannot do.
if "$run" -c "$work/none.conf" true 2> "$work/err5"; then
	fail "sdp_run ran with a missing rules file"
else
	grep -q 'cannot read' "$work/err5" && pass "sdp_run: missing rules file" ||
		fail "sdp_run: $(cat "$work/err5")"
fi
"$run" 2> /dev/null && fail "sdp_run without a program succeeded" || pass "sdp_run: usage"

[ $fails = 0 ] || { echo "$fails failure(s)" >&2; exit 1; }
