#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Where a connection's setup time goes, from a trace of scripts/vm/setup-trace.sh.

    setup_trace.py TRACE

TRACE is the kernel's function_graph output (funcgraph-abstime and
funcgraph-tail on) with the rdma_cma tracepoints as comments, for
connections opened one after another with both ends in one machine.  Each
connection is cut at its client's ADDR_RESOLVED event into stages between
the RDMA CM's steps; every stage prints its mean and median in
microseconds over the connections, then every traced function its count,
mean and median duration.
"""
import re
import statistics
import sys

LINE = re.compile(r"^\s*(\d+\.\d+)\s*\|\s*\d+\)\s*(\S+)\s*\|\s*(?:[!#*@$+]\s*)?([\d.]+ us)?\s*\|\s*(.*)$")
EVENT = re.compile(r"/\*\s*cm_(\w+): cm\.id=(\d+)(.*)\*/")
CALL_LEAF = re.compile(r"^([\w.]+)(?: \[\w+\])?\(\);")
CALL_OPEN = re.compile(r"^([\w.]+)(?: \[\w+\])?\(\) \{")
CALL_CLOSE = re.compile(r"^\} /\* ([\w.]+)(?: \[\w+\])? \*/")

# The stages, in the order a connection passes them: (marker, what ends
# there).  A marker is a cm event (handler events by name) or a function's
# entry/exit.
MARKS = [
    ("enter:sdp_connect", "connect() called"),
    ("ev:ADDR_RESOLVED", "address resolved (client)"),
    ("ev:ROUTE_RESOLVED", "route resolved (client)"),
    ("send_req", "REQ sent: client's QP, CQ, rings, Hello"),
    ("req_handler", "REQ received by the server's CM"),
    ("ev:CONNECT_REQUEST", "CONNECT_REQUEST at the listener"),
    ("send_rep", "REP sent: server's child, QP, CQ, rings, HelloAck"),
    ("send_rtu", "REP received, RTU sent (client)"),
    ("ev:ESTABLISHED", "ESTABLISHED delivered (first of the two ends)"),
    ("exit:sdp_connect", "connect() returns"),
]


def parse(path):
    """The trace as (time s, kind, name, duration us or None)."""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            ts, _, dur, body = float(m.group(1)), m.group(2), m.group(3), m.group(4).strip()
            d = float(dur.split()[0]) if dur else None
            e = EVENT.search(body)
            if e:
                kind, rest = e.group(1), e.group(3)
                if kind == "event_handler":
                    name = re.search(r"tos=\d+ (\w+) \(", rest)
                    out.append((ts, "ev:" + (name.group(1) if name else "?"), None))
                else:
                    out.append((ts, kind, None))
                continue
            c = CALL_LEAF.match(body)
            if c:
                out.append((ts, "leaf:" + c.group(1), d))
                continue
            c = CALL_OPEN.match(body)
            if c:
                out.append((ts, "enter:" + c.group(1), None))
                continue
            c = CALL_CLOSE.match(body)
            if c:
                out.append((ts, "exit:" + c.group(1), d))
    return out


def stats(values):
    if not values:
        return "n/a"
    return "%9.0f %9.0f" % (statistics.mean(values), statistics.median(values))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    recs = parse(sys.argv[1])
    starts = [i for i, r in enumerate(recs) if r[1] == "ev:ADDR_RESOLVED"]
    if not starts:
        sys.exit("setup_trace: no ADDR_RESOLVED in the trace")
    # Each connection: from the last sdp_connect entry before its
    # ADDR_RESOLVED to the next connection's.
    stage = {m: [] for m, _ in MARKS}
    periods = []
    for n, s in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(recs)
        begin = s
        for j in range(s - 1, starts[n - 1] if n else -1, -1):
            if recs[j][1] == "enter:sdp_connect":
                begin = j
                break
        if n + 1 < len(starts):
            periods.append((recs[starts[n + 1]][0] - recs[s][0]) * 1e6)
        # Each mark at its first occurrence after the one before: the
        # previous connection's late events (the server's ESTABLISHED
        # may come after the next connect()) do not count.
        pos, prev = begin, None
        for m, _ in MARKS:
            j = next((k for k in range(pos, end) if recs[k][1] == m), None)
            if j is None:
                continue
            if prev is not None:
                stage[m].append((recs[j][0] - prev) * 1e6)
            pos, prev = j + 1, recs[j][0]
    print("%d connections; from one ADDR_RESOLVED to the next (mean, median us): %s" %
          (len(starts), stats(periods)))
    print("%-58s %9s %9s" % ("stage, ending at", "mean us", "median us"))
    for m, what in MARKS[1:]:
        if stage[m]:
            print("%-58s %s" % (what, stats(stage[m])))
    calls = {}
    for _, kind, d in recs:
        if d is not None and kind.split(":")[0] in ("leaf", "exit"):
            calls.setdefault(kind.split(":", 1)[1], []).append(d)
    print("%-58s %9s %9s" % ("function (count)", "mean us", "median us"))
    for name, ds in sorted(calls.items(), key=lambda kv: -sum(kv[1])):
        print("%-58s %s" % ("%s (%d)" % (name, len(ds)), stats(ds)))


if __name__ == "__main__":
    main()
