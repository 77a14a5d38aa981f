#!/usr/bin/env python3
"""Decode speed with telemetry off, window records to Kafka, and per-call
records to Kafka, side by side in one run.

For each model (stories15M- and stories110M-shaped, q8_0, generated with
`looptune model-gen`) and thread count, the three modes run interleaved
(round r runs them in a rotated order, so drift on a shared machine hits all
three alike) and `looptune run` reports decode tokens/s (a fourth mode, window records to
/dev/null, is the telemetry runtime without Kafka). Prints min / median
/ max per mode and the overhead of each telemetry mode against off (median
of the per-round ratios). Goals: window within 1 % of off, per-call within 5 %.

Kafka: --brokers B, or a real Apache Kafka broker started here with
scripts/kafka/broker.sh (stopped at the end). All runs write to one topic,
created by the warm-up run: creating a topic keeps the broker busy for a
while, which a broker on the same small machine would charge to the run.

usage: bench/bench_telemetry_overhead.py [--build build] [--rounds 7] [--tokens 128]
           [--threads 1,2] [--models stories15M,stories110M] [--brokers B] [--json]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = {
    "off": [],
    "file": ["--telemetry", "file:/dev/null"],  # the runtime without Kafka: separates the two
    "window": ["--telemetry", "kafka"],
    "per-call": ["--telemetry", "kafka", "--telemetry-detail", "per-call"],
}


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def start_broker(run_dir):
    r = sh([os.path.join(ROOT, "scripts/kafka/broker.sh"), "start", "--dir", run_dir], timeout=900)
    m = re.search(r"BOOTSTRAP=(\S+)", r.stdout)
    if r.returncode != 0 or not m:
        sys.exit(f"bench: cannot start the test broker: {r.stderr.strip()}")
    return m.group(1)


def stop_broker(run_dir):
    sh([os.path.join(ROOT, "scripts/kafka/broker.sh"), "stop", "--dir", run_dir], timeout=120)


def decode_tok_s(binary, model, threads, tokens, mode, brokers, prefix):
    cmd = [binary, "run", "-m", model, "--prompt-ids", "1,400,300", "-n", str(tokens),
           "--temp", "0", "--ignore-eos", "--print-ids", "--threads", str(threads)] + MODES[mode]
    if "kafka" in MODES[mode]:
        cmd += ["--brokers", brokers, "--topic-prefix", prefix]
    r = sh(cmd, timeout=600)
    m = re.search(r"decode\s+(\d+) tokens in ([0-9.]+) ms \(([0-9.]+) tokens/s", r.stderr)
    if r.returncode != 0 or not m:
        sys.exit(f"bench: {' '.join(cmd)} failed:\n{r.stderr}")
    t = re.search(r"(\d+) records emitted, (\d+) dropped, (\d+) delivery failures", r.stderr)
    return float(m.group(3)), (tuple(int(x) for x in t.groups()) if t else (0, 0, 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--models", default="stories15M,stories110M")
    ap.add_argument("--brokers")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    binary = os.path.join(a.build, "looptune")
    work = os.path.join(a.build, "bench-telemetry")
    os.makedirs(work, exist_ok=True)

    models = {}
    for preset in a.models.split(","):
        path = os.path.join(work, f"{preset}-q8_0.gguf")
        if not os.path.exists(path):
            r = sh([binary, "model-gen", "--preset", preset, "--dtype", "q8_0", "-o", path])
            if r.returncode != 0:
                sys.exit(f"bench: model-gen {preset} failed: {r.stderr.strip()}")
        models[preset] = path

    prefix = f"bench-telemetry-{os.getpid()}."
    broker_dir = None
    brokers = a.brokers
    if not brokers:
        broker_dir = os.path.join(work, "broker")
        brokers = start_broker(broker_dir)
    results = []
    try:
        for preset, path in models.items():
            for threads in [int(t) for t in a.threads.split(",")]:
                # warm-up: page cache, the host cache, the broker's first topic
                decode_tok_s(binary, path, threads, 16, "window", brokers, prefix)
                time.sleep(2)
                runs = {m: [] for m in MODES}
                stats = {m: [] for m in MODES}
                order = list(MODES)
                for r in range(a.rounds):
                    for mode in order[r % len(order):] + order[:r % len(order)]:
                        tps, st = decode_tok_s(binary, path, threads, a.tokens, mode, brokers,
                                               prefix)
                        runs[mode].append(tps)
                        stats[mode].append(st)
                row = {"model": preset, "threads": threads, "tokens": a.tokens, "rounds": a.rounds}
                for mode in MODES:
                    v = runs[mode]
                    row[mode] = {"min": min(v), "median": statistics.median(v), "max": max(v)}
                    if mode != "off":
                        ratios = [x / o for x, o in zip(v, runs["off"])]
                        row[mode]["overhead_pct"] = 100.0 * (1.0 - statistics.median(ratios))
                        row[mode]["records"] = statistics.median(s[0] for s in stats[mode])
                        row[mode]["dropped"] = max(s[1] for s in stats[mode])
                        row[mode]["failures"] = max(s[2] for s in stats[mode])
                results.append(row)
                if not a.json:
                    print_row(row)
    finally:
        if broker_dir:
            stop_broker(broker_dir)
    if a.json:
        print(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M:%S"), "results": results}, indent=1))


def print_row(row):
    head = f"{row['model']}, {row['threads']} thread{'s' if row['threads'] > 1 else ''}, " \
           f"{row['tokens']} tokens, {row['rounds']} rounds"
    print(head)
    print(f"  {'mode':<9} {'min':>8} {'median':>8} {'max':>8}  tokens/s   overhead  records  dropped")
    for mode in MODES:
        v = row[mode]
        extra = ""
        if mode != "off":
            extra = f"  {v['overhead_pct']:+7.2f}%  {v['records']:>7.0f}  {v['dropped']:>7}"
        print(f"  {mode:<9} {v['min']:8.1f} {v['median']:8.1f} {v['max']:8.1f}{extra}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
