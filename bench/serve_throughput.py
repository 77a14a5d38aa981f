#!/usr/bin/env python3
"""Aggregate tokens/s of `looptune serve` with N concurrent requests, side by side in one run.

For each N of --concurrency, one worker with --max-batch N serves N requests of --tokens
tokens each (greedy, ends of generation ignored) produced at once; the time is from the first
request produced to the last final record read (read_committed), so it holds the commits'
latency too. R rounds each run every N once, the order rotating. Prints per N: aggregate
tokens/s (min / median / max over rounds), the median time to the first token read, and the
worker's own figures (steps, commits, mean commit time) from its summary line.

    scripts/kafka/broker.sh start    # prints BOOTSTRAP=127.0.0.1:PORT
    bench/serve_throughput.py --looptune build/looptune --brokers 127.0.0.1:PORT \\
        -m stories15M-q8_0.gguf --concurrency 1,4,8 --tokens 128 --rounds 3
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

SUMMARY = re.compile(r"(\d+) tokens in (\d+) steps; (\d+) commits \(([0-9.]+) ms each")


def one(args, n, wdir):
    import serve_client as sc
    prefix = f"bench-{uuid.uuid4().hex[:8]}."
    srv = sc.Server(args.model, args.brokers, prefix, f"b{n}", wdir,
                    ["--max-batch", str(n), "--threads", str(args.threads), "--partitions", "1"])
    srv.start()
    client = sc.Client(args.brokers, prefix)
    try:
        sc.wait_holding([srv])
        client.request("warm", prompt="Hi", max_tokens=2)
        client.wait(["warm"], timeout_s=60)
        rids = [f"q{i}" for i in range(n)]
        t0 = time.time()
        for i, rid in enumerate(rids):
            client.request(rid, prompt=f"Once upon a time {i}", max_tokens=args.tokens,
                           ignore_eos=True)
        first = None
        while not all(client.streams[r].final for r in rids):
            client.poll(0.02)
            if first is None and any(client.streams[r].tokens for r in rids):
                first = time.time() - t0
            if time.time() - t0 > 600:
                sys.exit("no answer in 600 s")
        dt = time.time() - t0
        toks = sum(len(client.streams[r].tokens) for r in rids)
    finally:
        srv.stop()
        client.close()
    m = SUMMARY.search(srv.text())
    worker = dict(steps=int(m[2]), commits=int(m[3]), commit_ms=float(m[4])) if m else {}
    return toks / dt, first, worker


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--looptune", required=True)
    ap.add_argument("--brokers", required=True)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--concurrency", default="1,4,8")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    os.environ["LT_BIN"] = args.looptune
    os.environ.setdefault("LT_PROTO_DIR", os.path.join(os.path.dirname(__file__), "..", "proto"))
    ns = [int(x) for x in args.concurrency.split(",")]
    wdir = tempfile.mkdtemp(prefix="serve-bench-")
    res = {n: [] for n in ns}
    for r in range(args.rounds):
        order = ns[r % len(ns):] + ns[:r % len(ns)]
        for n in order:
            res[n].append(one(args, n, wdir))
    host = subprocess.run(["uname", "-srm"], capture_output=True, text=True).stdout.strip()
    print(f"# {args.model}, {args.tokens} tokens per request, {args.threads} threads, "
          f"{args.rounds} rounds, {os.cpu_count()} CPUs, {host}")
    print("N  aggregate tokens/s (min / median / max)  first token s (median)  "
          "steps  commits  commit ms (median of means)")
    for n in ns:
        tps = [x[0] for x in res[n]]
        first = statistics.median(x[1] for x in res[n] if x[1] is not None)
        ws = [x[2] for x in res[n] if x[2]]
        steps = statistics.median(w["steps"] for w in ws) if ws else 0
        commits = statistics.median(w["commits"] for w in ws) if ws else 0
        cms = statistics.median(w["commit_ms"] for w in ws) if ws else 0
        print(f"{n:<3}{min(tps):8.1f} / {statistics.median(tps):8.1f} / {max(tps):8.1f}"
              f"{first:24.3f}  {steps:6.0f} {commits:8.0f}  {cms:10.1f}")


if __name__ == "__main__":
    main()
