#!/usr/bin/env python3
"""Aggregate tokens/s of `looptune serve` with N concurrent requests, side by side in one run.

For each N of --concurrency, one worker with --max-batch N serves N requests of --tokens
tokens each (greedy, or with --sampled temperature 0.8, top-p 0.9 and a seed per request;
ends of generation ignored) produced at once; the time is from the first
request produced to the last final record read (read_committed), so it holds the commits'
latency too. R rounds each run every N once, the order rotating. Prints per N: aggregate
tokens/s and the time to the first token read (min / median / max over rounds), the
per-token latency a client sees (the time from one token of a stream to the next, as read
from Kafka: tokens read together share the gap before them; p50 and p99 over every
token of every stream of every round, and the median over requests of each request's time
per output token after its first), the
first token of the worker's first request (a 2-token warm-up, produced once it holds its
partition: what a worker's start costs the first request), and the
worker's own figures from its summary line (steps, commits, the mean commit time and its
parts: begin_transaction, producing, the offsets, commit_transaction).

With --baseline-bin OLD, every round runs each N with OLD and with --looptune one after the
other (which goes first alternating), and both are printed, OLD first.

    scripts/kafka/broker.sh start    # prints BOOTSTRAP=127.0.0.1:PORT
    bench/serve_throughput.py --looptune build/looptune --brokers 127.0.0.1:PORT \\
        -m stories15M-q8_0.gguf --concurrency 1,4,8 --tokens 128 --rounds 3 \\
        --baseline-bin /tmp/looptune-before
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "serve"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "dist"))

SUMMARY = re.compile(r"(?P<tokens>\d+) tokens in (?P<steps>\d+) steps"
                     r"(?: \((?P<step_s>[0-9.]+) s\))?; "
                     r"(?P<commits>\d+) commits \((?P<ms>[0-9.]+) ms each"
                     r"(?: on average: begin (?P<b>[0-9.]+), produce (?P<p>[0-9.]+), "
                     r"offsets (?P<o>[0-9.]+), end (?P<e>[0-9.]+))?")


def one(args, binary, n, wdir):
    import serve_client as sc
    prefix = f"bench-{uuid.uuid4().hex[:8]}."
    srv = sc.Server(args.model, args.brokers, prefix, f"b{n}-{prefix[6:14]}", wdir,
                    ["--max-batch", str(n), "--threads", str(args.threads), "--partitions", "1",
                     *args.worker_arg])
    srv.args[0] = binary
    srv.start()
    client = sc.Client(args.brokers, prefix)
    try:
        sc.wait_holding([srv])
        tw = time.time()
        client.request("warm", prompt="Hi", max_tokens=2)
        warm = None
        while not client.streams["warm"].final:
            client.poll(0.01)
            if warm is None and client.streams["warm"].tokens:
                warm = time.time() - tw
            if time.time() - tw > 60:
                sys.exit("no answer to the first request in 60 s")
        rids = [f"q{i}" for i in range(n)]
        t0 = time.time()
        for i, rid in enumerate(rids):
            sampling = dict(temp=0.8, top_p=0.9, seed=i + 1) if args.sampled else {}
            client.request(rid, prompt=f"Once upon a time {i}", max_tokens=args.tokens,
                           ignore_eos=True, **sampling)
        first = None
        while not all(client.streams[r].final for r in rids):
            client.poll(0.02)
            if first is None and any(client.streams[r].tokens for r in rids):
                first = time.time() - t0
            if time.time() - t0 > 600:
                sys.exit("no answer in 600 s")
        dt = time.time() - t0
        toks = sum(len(client.streams[r].tokens) for r in rids)
        gaps, tpot = [], []
        for r in rids:
            at = [client.streams[r].arrived[i] for i in sorted(client.streams[r].arrived)]
            gaps += token_gaps(at)
            if len(at) > 1:
                tpot.append((at[-1] - at[0]) / (len(at) - 1))
    finally:
        srv.stop()
        client.close()
    m = SUMMARY.search(srv.text())
    worker = {}
    if m:
        worker = dict(steps=int(m["steps"]), commits=int(m["commits"]), commit_ms=float(m["ms"]))
        if m["b"]:
            worker["parts"] = tuple(float(m[k]) for k in "bpoe")
        if m["step_s"]:  # the decode thread's time in steps, against the request's wall time
            worker["step_share"] = float(m["step_s"]) / dt
    return toks / dt, first, worker, warm, gaps, tpot


def token_gaps(at):
    """Each token's share of the gap before its read: tokens read within a millisecond of
    each other (one record, or records of transactions that became visible together) split
    the time since the previous read evenly."""
    gaps, prev, k = [], None, 0
    while k < len(at):
        e = k
        while e < len(at) and at[e] - at[k] < 1e-3:
            e += 1
        if prev is not None:
            gaps += [(at[k] - prev) / (e - k)] * (e - k)
        prev, k = at[k], e
    return gaps


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))] if xs else float("nan")


def mmm(xs, fmt):
    xs = sorted(xs)
    return " / ".join(fmt % x for x in (xs[0], statistics.median(xs), xs[-1])) if xs else "-"


def report(label, ns, res):
    print(f"## {label}")
    print("N  aggregate tokens/s (min / median / max)  first token s (min / median / max)  "
          "steps  commits  commit ms (median of means; begin/produce/offsets/end)  "
          "the worker's first request's first token s (median)  "
          "share of the time the decode thread stepped (median)  "
          "per-token latency ms p50 / p99  time per output token ms (median over requests)")
    for n in ns:
        ws = [x[2] for x in res[n] if x[2]]
        gaps = [g for x in res[n] for g in x[4]]
        tpot = [t for x in res[n] for t in x[5]]
        med = lambda k: statistics.median(w[k] for w in ws) if ws else 0
        parts = [w["parts"] for w in ws if "parts" in w]
        split = ("  (" + "/".join("%.1f" % statistics.median(p[k] for p in parts)
                                  for k in range(4)) + ")") if parts else ""
        print(f"{n:<3}{mmm([x[0] for x in res[n]], '%8.1f')}"
              f"   {mmm([x[1] for x in res[n] if x[1] is not None], '%.3f')}"
              f"  {med('steps'):6.0f} {med('commits'):8.0f}  {med('commit_ms'):8.1f}{split}"
              f"  {statistics.median(x[3] for x in res[n] if x[3] is not None):.3f}"
              + (f"  {statistics.median(w['step_share'] for w in ws if 'step_share' in w):.2f}"
                 if any("step_share" in w for w in ws) else "")
              + f"  {pct(gaps, 0.5) * 1e3:.1f} / {pct(gaps, 0.99) * 1e3:.1f}"
              + f"  {statistics.median(tpot) * 1e3 if tpot else float('nan'):.1f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--looptune", required=True)
    ap.add_argument("--brokers", required=True)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--concurrency", default="1,4,8")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sampled", action="store_true",
                    help="temperature 0.8, top-p 0.9, a seed per request (default: greedy)")
    ap.add_argument("--baseline-bin", help="an older looptune, run interleaved with --looptune")
    ap.add_argument("--worker-arg", action="append", default=[],
                    help="a word of the workers' command line "
                         "(repeatable: --worker-arg=-X --worker-arg=debug=eos)")
    args = ap.parse_args()
    os.environ["LT_BIN"] = args.looptune
    os.environ.setdefault("LT_PROTO_DIR", os.path.join(os.path.dirname(__file__), "..", "proto"))
    ns = [int(x) for x in args.concurrency.split(",")]
    wdir = tempfile.mkdtemp(prefix="serve-bench-")
    bins = [args.looptune] if not args.baseline_bin else [args.baseline_bin, args.looptune]
    res = {b: {n: [] for n in ns} for b in bins}
    load = [os.getloadavg()[0]]
    for r in range(args.rounds):
        order = ns[r % len(ns):] + ns[:r % len(ns)]
        for i, n in enumerate(order):
            for b in (bins if (r + i) % 2 == 0 else bins[::-1]):
                res[b][n].append(one(args, b, n, wdir))
                load.append(os.getloadavg()[0])
    host = subprocess.run(["uname", "-srm"], capture_output=True, text=True).stdout.strip()
    print(f"# {args.model}, {args.tokens} tokens per request, {args.threads} threads, "
          f"{'sampled' if args.sampled else 'greedy'}, {args.rounds} rounds, "
          f"{os.cpu_count()} CPUs, {host}, load average "
          f"{min(load):.1f} to {max(load):.1f}")
    for b in bins:
        report(b, ns, res[b])


if __name__ == "__main__":
    main()
