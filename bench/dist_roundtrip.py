#!/usr/bin/env python3
"""Round trip and throughput of distributed tasks, exactly once against at
least once, batched and not, side by side on one broker.

For each mode (workers with transactions, or with --at-least-once; with the
worker's batches, or --batch N) two `looptune worker` processes and, per
round, two noop jobs (`looptune submit noop`): --window 1 (one task in
flight: the round trip of a task, its send to its result applied, median
and p99 over the job) and all tasks at once (throughput, tasks/s from the
first send to the last result). Rounds interleave the modes, in an order
that turns each round, so a change of the machine's load hits them all.
Reports min/median/max over the rounds, the tasks per commit the workers
made in the throughput jobs (from their exit summaries: each task of a
--window 1 job is a commit of its own), the machine (lscpu) and its load
(the load averages before and after).

usage: bench/dist_roundtrip.py [--bin build/looptune] [--brokers B] [--rounds 3]
                               [--latency-tasks 300] [--throughput-tasks 20000] [--bytes 4]
                               [--modes exactly-once,at-least-once,exactly-once:b1]
A mode is exactly-once or at-least-once, with :bN for workers run with --batch N
(b1: a commit per task; its throughput job is cut to --unbatched-tasks).
--baseline-bin OLD adds each mode without :bN once more as MODE@base, workers
and jobs run by OLD (an earlier build, without batches: its throughput job is
cut to --unbatched-tasks too).
Without --brokers (or LT_KAFKA_BOOTSTRAP) it starts the test broker
(scripts/kafka/broker.sh) in a temporary directory and stops it at the end."""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from benchlib import loadavg, machine, start_broker, stop_broker  # noqa: E402
RT_RE = re.compile(r"round trip: median ([0-9.]+) ms, p99 ([0-9.]+) ms; ([0-9.]+) tasks/s")
DONE_RE = re.compile(r"worker: (\d+) tasks done .*; (\d+) commits")




def parse_mode(m):
    m = m.removesuffix("@base")
    base, _, batch = m.partition(":b")
    if base not in ("exactly-once", "at-least-once") or (batch and not batch.isdigit()):
        sys.exit(f"dist_roundtrip: bad mode '{m}': exactly-once or at-least-once, :bN optional")
    return base, int(batch) if batch else None


def binary_of(a, mode):
    return a.baseline_bin if mode.endswith("@base") else a.bin


def workers(binary, brokers, prefix, mode, logdir):
    base, batch = parse_mode(mode)
    extra = ["--at-least-once"] if base == "at-least-once" else []
    if batch:
        extra += ["--batch", str(batch)]
    procs, logs = [], []
    for i in range(2):
        logs.append(os.path.join(logdir, f"{prefix}w{i}.log"))
        with open(logs[-1], "w") as log:
            procs.append(subprocess.Popen(
                [binary, "worker", "--brokers", brokers, "--topic-prefix", prefix,
                 "--instance-id", f"bench-{prefix}{i}", *extra],
                stdout=log, stderr=subprocess.STDOUT))
    deadline = time.time() + 60
    while time.time() < deadline:  # both hold partitions: the group has settled
        held = [re.findall(r"\((\d+) held now\)", open(f).read()) for f in logs]
        if all(h and int(h[-1]) > 0 for h in held):
            break
        time.sleep(0.2)
    return procs, logs


def job(binary, brokers, prefix, tasks, window, nbytes):
    args = [binary, "submit", "noop", "--brokers", brokers, "--topic-prefix", prefix,
            "--tasks", str(tasks), "--bytes", str(nbytes)]
    if window:
        args += ["--window", str(window)]
    p = subprocess.run(args, capture_output=True, text=True, timeout=900)
    m = RT_RE.search(p.stdout)
    if p.returncode != 0 or not m:
        sys.exit(f"dist_roundtrip: submit failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return float(m[1]), float(m[2]), float(m[3])


def summary(xs):
    return f"{min(xs):8.2f} / {statistics.median(xs):8.2f} / {max(xs):8.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/looptune"))
    ap.add_argument("--brokers", default=os.environ.get("LT_KAFKA_BOOTSTRAP"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--latency-tasks", type=int, default=300)
    ap.add_argument("--throughput-tasks", type=int, default=20000)
    ap.add_argument("--unbatched-tasks", type=int, default=300)
    ap.add_argument("--bytes", type=int, default=4)
    ap.add_argument("--modes", default="exactly-once,at-least-once")
    ap.add_argument("--baseline-bin")
    a = ap.parse_args()
    modes = a.modes.split(",")
    if a.baseline_bin:
        modes += [f"{m}@base" for m in modes if not parse_mode(m)[1]]
    for m in modes:
        parse_mode(m)
    tmp = tempfile.mkdtemp(prefix="lt-dist-bench-")
    own_broker = not a.brokers
    load_before = loadavg()
    brokers = a.brokers or start_broker(os.path.join(tmp, "broker"))
    tag = f"b{os.getpid()}"
    prefixes = {m: f"{tag}-{m.replace(':', '-').replace('@', '-')}." for m in modes}
    procs, logs = {}, {}
    res = {m: {"median": [], "p99": [], "tps": []} for m in modes}
    per_commit = {}
    try:
        for m in modes:
            procs[m], logs[m] = workers(binary_of(a, m), brokers, prefixes[m], m, tmp)
        for r in range(a.rounds):
            k = r % len(modes)
            order = modes[k:] + modes[:k]
            for m in (order if r % 2 == 0 else order[::-1]):
                b = binary_of(a, m)
                med, p99, _ = job(b, brokers, prefixes[m], a.latency_tasks, 1, a.bytes)
                unbatched = parse_mode(m)[1] == 1 or m.endswith("@base")
                n = a.unbatched_tasks if unbatched else a.throughput_tasks
                _, _, tps = job(b, brokers, prefixes[m], n, 0, a.bytes)
                res[m]["median"].append(med)
                res[m]["p99"].append(p99)
                res[m]["tps"].append(tps)
    finally:
        for ps in procs.values():
            for p in ps:
                p.terminate()
            for p in ps:
                p.wait(30)
        for m, fs in logs.items():
            tasks = commits = 0
            for f in fs:
                d = DONE_RE.search(open(f).read())
                if d:
                    tasks, commits = tasks + int(d[1]), commits + int(d[2])
            # a task alone in flight is a commit of its own: the rest is the
            # throughput jobs' (and a few idle commits of skipped offsets)
            alone = a.rounds * a.latency_tasks
            per_commit[m] = (tasks - alone) / (commits - alone) if commits > alone \
                else float("nan")
        if own_broker:
            stop_broker(os.path.join(tmp, "broker"))
    print(f"machine: {machine()}; load average (1, 5, 15 min) before {load_before}, after "
          f"{loadavg()}; broker {brokers}; {a.rounds} rounds, payload {a.bytes} B, 2 workers, "
          f"round trip over {a.latency_tasks} tasks at --window 1, throughput over "
          f"{a.throughput_tasks} tasks at once")
    print(f"{'':22} {'round trip median ms':>28} {'round trip p99 ms':>28} {'tasks/s':>28} "
          f"{'tasks/commit':>13}")
    print(f"{'':22} {'min / median / max':>28} {'min / median / max':>28} "
          f"{'min / median / max':>28} {'(throughput)':>13}")
    for m in modes:
        print(f"{m:22} {summary(res[m]['median']):>28} {summary(res[m]['p99']):>28} "
              f"{summary(res[m]['tps']):>28} {per_commit[m]:13.1f}")


if __name__ == "__main__":
    main()
