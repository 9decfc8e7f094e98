#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Host side of `make bench`: turn what tests/vm/bench.sh measured in the
guest into results.csv, a table with the SDP ratios, the goal verdicts and
a throughput plot.

    report.py GUEST_RESULTS_DIR OUT_DIR

GUEST_RESULTS_DIR is the guest's results share (raw.csv, notes.txt, logs/);
OUT_DIR receives results.csv (tool,family,metric,size,value,unit), notes.txt,
logs/, report.txt (what is printed), throughput.png, latency.png and, when
the zero-copy sizes were measured, zcopy.png (gnuplot; skipped with a
message when gnuplot is missing).

The verdicts are a report, not a test: the exit status is 0 whenever
there was something to report, 1 only when raw.csv is missing or empty.
"""
import csv
import math
import os
import shutil
import subprocess
import sys

# Goals for SDP, measured against references from the same guest run.
GOAL_BW_SIZE = 65536
GOAL_LAT_SIZE = 64
GOAL_BW_VS_RAW = 0.9  # SDP stream >= 0.9 x ib_send_bw
GOAL_BW_VS_RSOCKETS = 1.0  # SDP stream >= rstream
GOAL_LAT_VS_RAW = 1.2  # SDP round trip <= 1.2 x ib_send_lat round trip
GOAL_LAT2_SIZE = 1024
GOAL_LAT2_VS_RAW = 1.3  # SDP 1 KiB round trip <= 1.3 x ib_send_lat round trip
GOAL_ZC_SIZE = 1 << 20
GOAL_ZC_VS_READ = 0.95  # SDP zero-copy stream >= 0.95 x ib_read_bw
# "0 copies": what the CPU copied in SDP per application byte of a
# zero-copy stream.  The bench's own handshake (a 32 B header, the
# receiver's result) goes by bcopy, a few bytes per run of megabytes, so
# "0" means below this, printed with the number itself.
GOAL_ZC_COPIES = 0.001
# Issue 15: an idle SDP socket's kernel memory (slab + vmalloc), KiB.
GOAL_IDLE_KIB = 64

# Series: (tool, family) -> column title.
THROUGHPUT = [
    (("ib_send_bw", "verbs", "throughput"), "raw verbs"),
    (("rstream", "rsockets", "throughput"), "rsockets"),
    (("sdp-bench", "inet", "throughput"), "TCP"),
    (("sdp-bench", "sdp", "throughput"), "SDP"),
]
LATENCY = [
    (("ib_send_lat", "verbs", "rtt_p50"), "raw verbs"),
    (("rstream", "rsockets", "rtt_avg"), "rsockets"),
    (("sdp-bench", "inet", "rtt_p50"), "TCP"),
    (("sdp-bench", "sdp", "rtt_p50"), "SDP"),
]
# Zero-copy sizes: the RDMA Read and Write ceilings next to SDP with its
# default threshold and SDP with zero copy off.
ZCOPY = [
    (("ib_read_bw", "verbs", "throughput"), "raw read"),
    (("ib_write_bw", "verbs", "throughput"), "raw write"),
    (("ib_read_bw", "verbs-1", "throughput"), "read 1"),
    (("ib_write_bw", "verbs-1", "throughput"), "write 1"),
    (("ib_send_bw", "verbs", "throughput"), "raw verbs"),
    (("rstream", "rsockets", "throughput"), "rsockets"),
    (("sdp-bench", "inet", "throughput"), "TCP"),
    (("sdp-bench", "sdp-bcopy", "throughput"), "SDP bcopy"),
    (("sdp-bench", "sdp", "throughput"), "SDP"),
]
# The zero-copy send interfaces (a buffer is reused after its notification).
ZC_API = [
    (("ib_read_bw", "verbs", "throughput"), "raw read"),
    (("sdp-bench", "sdp", "throughput"), "SDP"),
    (("sdp-bench", "sdp-msgzc", "throughput"), "MSG_ZC"),
    (("sdp-bench", "sdp-uringzc", "throughput"), "SEND_ZC"),
]
PLOT_TITLES = {
    "raw read": "RDMA Read (ib_read_bw -R)",
    "raw write": "RDMA Write (ib_write_bw -R)",
    "read 1": "RDMA Read, one in flight (ib_read_bw -R -t 1 -o 1)",
    "write 1": "RDMA Write, one in flight (ib_write_bw -R -t 1)",
    "SDP bcopy": "SDP, zero copy off (SDP_ZCOPY_THRESH 0)",
    "raw verbs": "raw verbs (perftest -R)",
    "rsockets": "rsockets (rstream)",
    "TCP": "TCP (sdp-bench, loopback)",
    "SDP": "SDP (sdp-bench, AF_INET_SDP)",
}


def best_of(metric, values):
    """Interference only slows things down: the best sample is the estimate."""
    return min(values) if metric.startswith(("rtt", "latency", "rr_p", "get_p")) else max(values)


def load(path):
    """{(tool, family, metric): {size: best value or None}}, the samples
    {(tool, family, metric, size): [values]} and the rows."""
    samples = {}
    rows = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            rows.append(row)
            key = (row["tool"], row["family"], row["metric"], int(row["size"]))
            vals = samples.setdefault(key, [])
            try:
                value = float(row["value"])
            except ValueError:
                continue
            if not math.isnan(value):
                vals.append(value)
    data = {}
    for (tool, fam, metric, size), vals in samples.items():
        best = best_of(metric, vals) if vals else None
        data.setdefault((tool, fam, metric), {})[size] = best
    return data, samples, rows


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt(v, digits=2):
    if v is None:
        return "n/a"
    if abs(v) >= 1000:
        return f"{v:.0f}"
    return f"{v:.{digits}f}"


def size_text(s):
    if s >= 1 << 20 and s % (1 << 20) == 0:
        return f"{s >> 20} MiB"
    if s >= 1024 and s % 1024 == 0:
        return f"{s >> 10} KiB"
    return f"{s} B"


def table(title, series, data, sizes, lines, ratios, extra=()):
    """One row per size: every series, SDP's ratio to each of ratios
    [(header, series name)], then the extra columns [(header, width,
    size -> text)]."""
    cols = [name for _, name in series]
    lines.append(title)
    head = f"  {'size':>8}" + "".join(f"{c:>11}" for c in cols)
    head += "".join(f"{h:>{max(10, len(h) + 2)}}" for h, _ in ratios)
    head += "".join(f"{h:>{w}}" for h, w, _ in extra)
    lines.append(head)
    for s in sizes:
        vals = {name: data.get(key, {}).get(s) for key, name in series}
        line = f"  {size_text(s):>8}" + "".join(f"{fmt(vals[c]):>11}" for c in cols)
        line += "".join(f"{fmt(ratio(vals['SDP'], vals[ref])):>{max(10, len(h) + 2)}}"
                        for h, ref in ratios)
        line += "".join(f"{cell(s):>{w}}" for _, w, cell in extra)
        lines.append(line)


def apps_table(data, lines):
    """iperf3 and sockperf, unmodified, over TCP and over SDP via libsdp.so."""
    get = lambda tool, fam, metric, size: data.get((tool, fam, metric), {}).get(size)
    points = [("iperf3 stream, 128 KiB writes, MB/s", "iperf3", "throughput", 131072),
              ("sockperf 64 B, latency p50, us", "sockperf", "latency_p50", 64),
              ("sockperf 64 B, latency p99, us", "sockperf", "latency_p99", 64)]
    if not any(get(t, f, m, z) is not None for _, t, m, z in points for f in ("inet", "sdp")):
        return
    lines.append("Unmodified programs: TCP, and SDP through libsdp.so (sdp_run; best run)")
    lines.append(f"  {'':<38}{'TCP':>10}{'SDP':>10}{'SDP/TCP':>10}")
    for title, tool, metric, size in points:
        tcp, sdp = get(tool, "inet", metric, size), get(tool, "sdp", metric, size)
        lines.append(f"  {title:<38}{fmt(tcp):>10}{fmt(sdp):>10}{fmt(ratio(sdp, tcp)):>10}")
    lines.append("  sockperf's latency is half the round trip, as it reports it.")
    lines.append("")


def zc_api_table(data, sizes, lines):
    """SDP's blocking send() next to MSG_ZEROCOPY and io_uring SEND_ZC."""
    get = lambda fam, metric, s: data.get(("sdp-bench", fam, metric), {}).get(s)
    if not any(get(f, "throughput", s) is not None
               for f in ("sdp-msgzc", "sdp-uringzc") for s in sizes):
        return
    lines.append("Zero-copy send interfaces, SDP stream MB/s (best run): blocking send(),")
    lines.append("MSG_ZEROCOPY and io_uring SEND_ZC (a buffer reused after its notification)")
    cols = [name for _, name in ZC_API]
    head = f"  {'size':>8}" + "".join(f"{c:>11}" for c in cols)
    head += f"{'MSG_ZC/read':>13}{'SEND_ZC/read':>14}{'MSG_ZC c/B':>12}{'SEND_ZC c/B':>13}"
    lines.append(head)
    for s in sizes:
        vals = {name: data.get(key, {}).get(s) for key, name in ZC_API}
        line = f"  {size_text(s):>8}" + "".join(f"{fmt(vals[c]):>11}" for c in cols)
        line += f"{fmt(ratio(vals['MSG_ZC'], vals['raw read'])):>13}"
        line += f"{fmt(ratio(vals['SEND_ZC'], vals['raw read'])):>14}"
        line += f"{fmt(get('sdp-msgzc', 'copies_per_byte', s), 4):>12}"
        line += f"{fmt(get('sdp-uringzc', 'copies_per_byte', s), 4):>13}"
        lines.append(line)
    lines.append("  c/B: CPU copies in SDP per byte received (0: every byte by RDMA).")
    lines.append("")


def round_trip_table(data, sizes, lines, prefix, title, ref, ref_label, messages, notes):
    """A round trip at the zero-copy sizes over SDP and SDP bcopy, next to a
    reference (ref: its (tool, family) and metric prefix) and to `messages`
    messages of the size at the one-in-flight RDMA Write rate."""
    get = lambda tool, fam, metric, s: data.get((tool, fam, metric), {}).get(s)
    if not any(get("sdp-bench", f, prefix + "_p50", s) is not None
               for f in ("sdp", "sdp-bcopy") for s in sizes):
        return
    lines.append(title)
    lines.append(f"  {'size':>8}{ref_label:>11}{'write 1':>11}{'SDP':>11}{'SDP bcopy':>11}"
                 f"{'SDP/' + ref_label.split()[0]:>10}{'SDP/write 1':>13}{'SDP/bcopy':>11}"
                 f"{'RDMA W/R':>11}{'copies/B':>10}")
    ms = lambda v: None if v is None else v / 1000
    for s in sizes:
        reference = get(ref[0], ref[1], ref[2] + "_p50", s)
        bw1 = get("ib_write_bw", "verbs-1", "throughput", s)
        one = messages * s / bw1 if bw1 else None  # us: bytes / (10^6 B/s) x 10^6
        sdp = get("sdp-bench", "sdp", prefix + "_p50", s)
        bcopy = get("sdp-bench", "sdp-bcopy", prefix + "_p50", s)
        writes = get("sdp-bench", "sdp", prefix + "_zcopy_rdma_writes", s)
        reads = get("sdp-bench", "sdp", prefix + "_zcopy_rdma_reads", s)
        wr = "n/a" if writes is None or reads is None else f"{writes:.0f}/{reads:.0f}"
        lines.append(f"  {size_text(s):>8}{fmt(ms(reference)):>11}{fmt(ms(one)):>11}"
                     f"{fmt(ms(sdp)):>11}{fmt(ms(bcopy)):>11}{fmt(ratio(sdp, reference)):>10}"
                     f"{fmt(ratio(sdp, one)):>13}{fmt(ratio(sdp, bcopy)):>11}{wr:>11}"
                     f"{fmt(get('sdp-bench', 'sdp', prefix + '_copies_per_byte', s), 4):>10}")
    lines.extend("  " + n for n in notes)
    lines.append("")


def rr_table(data, sizes, lines):
    """Request/response at the zero-copy sizes: SDP's ping-pong next to an
    RDMA Write ping-pong."""
    round_trip_table(
        data, sizes, lines, "rr",
        "Request/response at the zero-copy sizes: ping-pong round trip p50, ms (best run)",
        ("ib_write_lat", "verbs", "rr"), "raw write", 2,
        ["raw write: ib_write_lat -R (an RDMA Write ping-pong; both processes busy-poll, which",
         "competes with Soft-RoCE for the guest's CPUs); write 1: two messages at the rate of",
         "ib_write_bw -t 1 (one write in flight); RDMA W/R: SDP's RDMA Writes (into a waiting",
         "receiver's SinkAvails) and Reads (of SrcAvails) in the whole run."])


def get_table(data, sizes, lines):
    """A small request answered with a large response: SDP next to TCP and
    to one response at the one-in-flight RDMA Write rate."""
    round_trip_table(
        data, sizes, lines, "get",
        "Small request, large response (64 B out, the size back): round trip p50, ms (best run)",
        ("sdp-bench", "inet", "get"), "TCP", 1,
        ["TCP: the same program over TCP in the guest (loopback, no RDMA); write 1: one",
         "response at the rate of ib_write_bw -t 1, no request; RDMA W/R: SDP's RDMA Writes",
         "(into the requester's SinkAvails) and Reads (of the responder's SrcAvails), whole run."])


def pin_table(data, lines):
    """Preparing a user buffer for RDMA: sdp.ko's way and ib_umem_get()'s."""
    sdp = data.get(("pin", "sdp", "ns_per_buffer"), {})
    umem = data.get(("pin", "umem", "ns_per_buffer"), {})
    nents = data.get(("pin", "umem", "dma_entries"), {})
    if not sdp:
        return
    lines.append("Pinning and DMA-mapping a user buffer, then releasing it, us (mean of 200)")
    lines.append(f"  {'size':>8}{'sdp.ko':>10}{'ib_umem_get':>13}{'umem/sdp':>10}{'umem DMA entries':>18}")
    for s in sorted(sdp):
        lines.append(f"  {size_text(s):>8}{fmt(sdp[s] / 1000):>10}"
                     f"{fmt(umem[s] / 1000 if umem.get(s) is not None else None):>13}"
                     f"{fmt(ratio(umem.get(s), sdp[s])):>10}{fmt(nents.get(s), 0):>18}")
    lines.append("  sdp.ko: pin_user_pages_fast(FOLL_LONGTERM), its own RLIMIT_MEMLOCK charge, arrays")
    lines.append("  allocated once; ib_umem_get: the same pin and charge, allocations per call.")
    lines.append("")


def zcopy_table(data, sizes, lines):
    """The zero-copy sizes: ceilings, SDP both ways, CPU copies per byte."""
    get = lambda fam, metric, s: data.get(("sdp-bench", fam, metric), {}).get(s)

    def share(s):
        frac = get("sdp", "zcopy_fraction", s)
        return "n/a" if frac is None else f"{100 * frac:.1f}%"

    table("Zero copy: stream throughput, MB/s (best run), and CPU copies per byte in SDP",
          ZCOPY, data, sizes, lines,
          [("SDP/read", "raw read"), ("SDP/write", "raw write"), ("SDP/read 1", "read 1"),
           ("SDP/bcopy", "SDP bcopy")],
          [("copies/B", 10, lambda s: fmt(get("sdp", "copies_per_byte", s), 4)),
           ("bcopy c/B", 10, lambda s: fmt(get("sdp-bcopy", "copies_per_byte", s), 4)),
           ("by zcopy", 9, share)])
    thresh = data.get(("sdp-bench", "sdp", "zcopy_thresh"), {}).get(0)
    if thresh is not None:
        lines.append(f"  SDP: net.sdp.zcopy_thresh {thresh:.0f} (sizes at or above it go by zero copy);"
                     " SDP bcopy: SDP_ZCOPY_THRESH 0.")
    lines.append("  copies/B: bytes the CPU copied in SDP (cpu_copy_bytes, both ends) per byte"
                 " received; bcopy copies each byte twice.")
    lines.append("  read 1, write 1: perftest with one operation in flight (-t 1, -o 1 for reads),"
                 " as a blocking send() of one registration has.")
    lines.append("")


def zcopy_copies_goal(data, sizes, lines, sdp_error):
    """Every zero-copy stream at or above the threshold: no CPU copies."""
    thresh = data.get(("sdp-bench", "sdp", "zcopy_thresh"), {}).get(0)
    text = f"zero-copy streams: CPU copies per byte < {GOAL_ZC_COPIES}"
    if not thresh:
        lines.append(f"  {text:<48} n/a     (zero copy off in the module)")
        return
    worst = None
    for s in sizes:
        if s < thresh:
            continue
        c = data.get(("sdp-bench", "sdp", "copies_per_byte"), {}).get(s)
        if c is None:
            worst = None
            break
        worst = c if worst is None else max(worst, c)
    if worst is None:
        why = "SDP did not run" if sdp_error else "SDP point or counters missing"
        lines.append(f"  {text:<48} SHORT   n/a ({why})")
    else:
        ok = worst < GOAL_ZC_COPIES
        lines.append(f"  {text:<48} {'PASS ' if ok else 'SHORT'}   worst {worst:.4f} copies/B")


def spread(samples, key, size):
    vals = samples.get(key + (size,), [])
    if len(vals) < 2:
        return ""
    return f"{len(vals)} runs, {min(vals):.4g}..{max(vals):.4g}"


def goal(lines, text, value, ref, cmp, target, sdp_error):
    if value is None:
        why = "SDP did not run" if sdp_error else "SDP point missing"
        verdict = f"SHORT   n/a ({why})"
    elif ref is None:
        verdict = "n/a     (reference missing)"
    else:
        r = value / ref
        ok = r >= target if cmp == ">=" else r <= target
        verdict = f"{'PASS ' if ok else 'SHORT'}   ratio {r:.2f} (goal {cmp} {target})"
    lines.append(f"  {text:<48} {verdict}")


def plot(out_dir, series, data, sizes, ylabel, name, title, lines):
    gnuplot = shutil.which("gnuplot")
    dat = os.path.join(out_dir, f"{name}.dat")
    with open(dat, "w") as f:
        f.write("# size " + " ".join(n.replace(" ", "_") for _, n in series) + "\n")
        for s in sizes:
            vals = [data.get(key, {}).get(s) for key, _ in series]
            f.write(f"{s} " + " ".join("NaN" if v is None else f"{v:g}" for v in vals) + "\n")
    if not gnuplot:
        lines.append(f"(no gnuplot: {name}.png not drawn; apt-get install gnuplot-nox)")
        return
    png = os.path.join(out_dir, f"{name}.png")
    plots = []
    missing = []
    for i, (key, n) in enumerate(series):
        if any(data.get(key, {}).get(s) is not None for s in sizes):
            plots.append(f"'{dat}' using 1:{i + 2} with linespoints lw 2 pt 7 title '{PLOT_TITLES[n]}'")
        else:
            missing.append(n)
    if not plots:
        lines.append(f"(nothing to plot for {name})")
        return
    note = ""
    if missing:
        note = (f"set label 1 'not measured: {', '.join(missing)}' at graph 0.98, graph 0.05 "
                "right tc rgb 'red'\n")
    script = f"""set terminal pngcairo size 900,600 noenhanced
set output '{png}'
set title '{title}'
set logscale x 2
set logscale y
set xlabel 'message size (bytes)'
set ylabel '{ylabel}'
set grid
set key top left
set datafile missing 'NaN'
set xrange [{sizes[0] / 1.5}:{sizes[-1] * 1.5}]
set xtics ({', '.join(f'"{size_text(s)}" {s}' for s in sizes)})
{note}plot {', '.join(plots)}
"""
    r = subprocess.run([gnuplot], input=script, text=True, capture_output=True)
    if r.returncode != 0:
        lines.append(f"(gnuplot failed for {name}: {r.stderr.strip()})")
    else:
        lines.append(f"plot: {png}")


def setup_table(data, lines):
    """sdp-connrate: connections opened one after another and kept open."""
    fams = [("TCP", "inet"), ("raw RDMA CM", "rdmacm"), ("rsockets", "rsocket"), ("SDP", "sdp")]
    got = {}
    for name, fam in fams:
        for metric in ("conn_rate", "mem_per_conn", "slab_per_conn", "vmalloc_per_conn"):
            for size, v in data.get(("sdp-connrate", fam, metric), {}).items():
                got.setdefault(fam, {"n": size})[metric] = v
    if not got:
        return
    lines.append("Connection setup: connections opened one after another and kept open")
    lines.append("(sdp-connrate; both ends in the guest, memory is the guest's, both ends)")
    lines.append(f"  {'':<14}{'opened':>8}{'conn/s':>10}{'KiB/conn':>10}{'slab KiB':>10}"
                 f"{'vmalloc KiB':>13}")
    for name, fam in fams:
        r = got.get(fam)
        if r is None:
            continue
        lines.append(f"  {name:<14}{r['n']:>8}{fmt(r.get('conn_rate'), 1):>10}"
                     f"{fmt(r.get('mem_per_conn'), 1):>10}{fmt(r.get('slab_per_conn'), 1):>10}"
                     f"{fmt(r.get('vmalloc_per_conn'), 1):>13}")
    rate = lambda fam: got.get(fam, {}).get("conn_rate")
    lines.append(f"  SDP/raw CM setup rate {fmt(ratio(rate('sdp'), rate('rdmacm')))} (goal >= 0.8),"
                 f" SDP/rsockets {fmt(ratio(rate('sdp'), rate('rsocket')))},"
                 f" SDP/TCP {fmt(ratio(rate('sdp'), rate('inet')))}")
    if "rsocket" in got:
        lines.append("  (rsockets: the ends librdmacm's thread accepts; no raccept(), no data check)")
    # Issue 15's goal is per socket; a connection here is two sockets.
    sdp = got.get("sdp", {})
    slab, vmalloc = sdp.get("slab_per_conn"), sdp.get("vmalloc_per_conn")
    if slab is not None and vmalloc is not None:
        per_socket = (slab + vmalloc) / 2
        verdict = "PASS " if per_socket <= GOAL_IDLE_KIB else "SHORT"
        lines.append(f"  SDP idle socket: {per_socket:.1f} KiB of kernel memory (slab + vmalloc,"
                     f" half a connection) {verdict} (goal <= {GOAL_IDLE_KIB})")
    lines.append("")


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    guest, out_dir = sys.argv[1], sys.argv[2]
    raw = os.path.join(guest, "raw.csv")
    if not os.path.isfile(raw):
        print(f"report: {raw} missing: the guest bench did not run (see {guest})", file=sys.stderr)
        return 1
    data, samples, rows = load(raw)
    if not rows:
        print(f"report: {raw} has no measurements", file=sys.stderr)
        return 1
    os.makedirs(out_dir, exist_ok=True)
    shutil.copyfile(raw, os.path.join(out_dir, "results.csv"))
    notes_path = os.path.join(guest, "notes.txt")
    notes = []
    if os.path.isfile(notes_path):
        with open(notes_path) as f:
            notes = [n.strip() for n in f if n.strip()]
        shutil.copyfile(notes_path, os.path.join(out_dir, "notes.txt"))
    logs = os.path.join(out_dir, "logs")
    shutil.rmtree(logs, ignore_errors=True)
    if os.path.isdir(os.path.join(guest, "logs")):
        shutil.copytree(os.path.join(guest, "logs"), logs)

    # The unmodified programs (apps_table) have a table of their own.
    sizes = sorted({int(r["size"]) for r in rows
                    if r["metric"] == "throughput" and r["tool"] not in ("iperf3", "sockperf")})
    lat_sizes = sorted({int(r["size"]) for r in rows if r["metric"].startswith("rtt")})
    sdp_error = [n for n in notes if n.startswith("SDP") or n.startswith("sdp-bench sdp")]

    lines = []
    lines.append("sdp bench: Soft-RoCE (rxe) in one TCG guest; MB = 10^6 bytes.")
    lines.append("Compare ratios, not absolute numbers: TCG and Soft-RoCE move bytes in software,")
    lines.append("and TCP runs over kernel loopback (both addresses are local to the guest).")
    lines.append("")
    load_path = os.path.join(guest, "host-loadavg")
    if os.path.isfile(load_path):
        with open(load_path) as f:
            fields = f.read().split()
        try:
            load5 = float(fields[1])
            cpus = os.cpu_count() or 1
            lines.append(f"Host load average over the last 5 minutes of the run: {load5:.1f} on {cpus} CPUs"
                         " (the VM itself accounts for about 2).")
            if load5 > cpus + 0.5:
                lines.append("!!! The host was busy with other work: TCG vCPUs were descheduled, so the")
                lines.append("!!! numbers are noisy (polling tools like perftest suffer most). Re-run on")
                lines.append("!!! a quiet machine before drawing conclusions.")
        except (IndexError, ValueError):
            pass
        lines.append("")
    if sdp_error:
        lines.append("*" * 78)
        lines.append("*** SDP WAS NOT MEASURED (its points are n/a):")
        for n in sdp_error:
            lines.append(f"***   {n}")
        lines.append("*" * 78)
        lines.append("")
    vs_refs = [("SDP/raw", "raw verbs"), ("SDP/rsockets", "rsockets")]
    table("Throughput, MB/s (stream goodput at the receiver; best run)", THROUGHPUT, data, sizes,
          lines, vs_refs)
    lines.append("")
    table("Latency, round trip in us (p50; rsockets: mean of rstream; best run)", LATENCY, data,
          lat_sizes, lines, vs_refs)
    lines.append("")

    zc_sizes = sorted({int(r["size"]) for r in rows
                       if r["tool"] == "ib_read_bw" and r["metric"] == "throughput"})
    if zc_sizes:
        zcopy_table(data, zc_sizes, lines)
        zc_api_table(data, zc_sizes, lines)
        rr_table(data, zc_sizes, lines)
        get_table(data, zc_sizes, lines)
        pin_table(data, lines)
    apps_table(data, lines)
    setup_table(data, lines)

    bw = lambda key: data.get(key, {}).get(GOAL_BW_SIZE)
    lat = lambda key: data.get(key, {}).get(GOAL_LAT_SIZE)
    sdp_bw = bw(("sdp-bench", "sdp", "throughput"))
    sdp_lat = lat(("sdp-bench", "sdp", "rtt_p50"))
    lines.append("Goals for SDP (this run):")
    goal(lines, f"{size_text(GOAL_BW_SIZE)} throughput >= {GOAL_BW_VS_RAW} x raw send bandwidth",
         sdp_bw, bw(("ib_send_bw", "verbs", "throughput")), ">=", GOAL_BW_VS_RAW, sdp_error)
    goal(lines, f"{size_text(GOAL_BW_SIZE)} throughput >= rsockets (rstream)", sdp_bw,
         bw(("rstream", "rsockets", "throughput")), ">=", GOAL_BW_VS_RSOCKETS, sdp_error)
    goal(lines, f"{size_text(GOAL_LAT_SIZE)} ping-pong latency <= {GOAL_LAT_VS_RAW} x raw send latency",
         sdp_lat, lat(("ib_send_lat", "verbs", "rtt_p50")), "<=", GOAL_LAT_VS_RAW, sdp_error)
    lat2 = lambda key: data.get(key, {}).get(GOAL_LAT2_SIZE)
    goal(lines, f"{size_text(GOAL_LAT2_SIZE)} ping-pong latency <= {GOAL_LAT2_VS_RAW} x raw send latency",
         lat2(("sdp-bench", "sdp", "rtt_p50")), lat2(("ib_send_lat", "verbs", "rtt_p50")), "<=",
         GOAL_LAT2_VS_RAW, sdp_error)
    for s in (GOAL_LAT_SIZE, GOAL_LAT2_SIZE):
        p99 = lambda key: data.get(key, {}).get(s)
        sdp99, raw99 = p99(("sdp-bench", "sdp", "rtt_p99")), p99(("ib_send_lat", "verbs", "rtt_p99"))
        if sdp99 is not None and raw99 is not None:
            lines.append(f"  {size_text(s)} round trip p99: SDP {sdp99:.4g} us, raw verbs {raw99:.4g} us,"
                         f" ratio {sdp99 / raw99:.2f} (reported, no goal)")
    if zc_sizes:
        zc = lambda key: data.get(key, {}).get(GOAL_ZC_SIZE)
        goal(lines, f"{size_text(GOAL_ZC_SIZE)} zero copy >= {GOAL_ZC_VS_READ} x raw RDMA Read",
             zc(("sdp-bench", "sdp", "throughput")), zc(("ib_read_bw", "verbs", "throughput")),
             ">=", GOAL_ZC_VS_READ, sdp_error)
        zcopy_copies_goal(data, zc_sizes, lines, sdp_error)
    runs = []
    for key, name in THROUGHPUT:
        if spread(samples, key, GOAL_BW_SIZE):
            runs.append(f"{name} {spread(samples, key, GOAL_BW_SIZE)} MB/s")
    if runs:
        lines.append(f"  {size_text(GOAL_BW_SIZE)} throughput, every run: " + "; ".join(runs))
    runs = []
    for key, name in LATENCY:
        if spread(samples, key, GOAL_LAT_SIZE):
            runs.append(f"{name} {spread(samples, key, GOAL_LAT_SIZE)} us")
    if runs:
        lines.append(f"  {size_text(GOAL_LAT_SIZE)} round trip, every run: " + "; ".join(runs))
    runs = []
    for key, name in ZCOPY:
        if zc_sizes and spread(samples, key, GOAL_ZC_SIZE):
            runs.append(f"{name} {spread(samples, key, GOAL_ZC_SIZE)} MB/s")
    if runs:
        lines.append(f"  {size_text(GOAL_ZC_SIZE)} zero copy, every run: " + "; ".join(runs))
    lines.append("")

    pkts = []
    for tool, fam, label in (("perftest", "verbs", "perftest"), ("rstream", "rsockets", "rstream"),
                             ("sdp-bench", "inet", "TCP"), ("sdp-bench", "sdp", "SDP"),
                             ("sdp-bench", "sdp-bcopy", "SDP bcopy")):
        v = data.get((tool, fam, "rxe_sent_pkts"), {}).get(0)
        if v is not None:
            pkts.append(f"{label} {v:.0f}")
    if pkts:
        lines.append("RDMA packets sent by rxe during each series: " + ", ".join(pkts))
    zc_notes = [n for n in notes if n.startswith("zcopy:")]
    if zc_notes:
        lines.append("Zero copy did not go as expected:")
        lines.extend(f"  {n[len('zcopy:'):].strip()}" for n in zc_notes)
    other = [n for n in notes if n not in sdp_error and n not in zc_notes]
    if other:
        lines.append("Other problems and notes from the run:")
        lines.extend(f"  {n}" for n in other)
    lines.append("")
    plot(out_dir, THROUGHPUT, data, sizes, "MB/s (10^6 B/s)", "throughput",
         "Stream throughput vs message size (Soft-RoCE, TCG guest)", lines)
    plot(out_dir, LATENCY, data, lat_sizes, "round trip (us)", "latency",
         "Ping-pong round trip vs message size (Soft-RoCE, TCG guest)", lines)
    if zc_sizes:
        plot(out_dir, ZCOPY, data, zc_sizes, "MB/s (10^6 B/s)", "zcopy",
             "Zero copy: stream throughput vs message size (Soft-RoCE, TCG guest)", lines)
    lines.append(f"results: {os.path.join(out_dir, 'results.csv')}")

    text = "\n".join(lines) + "\n"
    with open(os.path.join(out_dir, "report.txt"), "w") as f:
        f.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
