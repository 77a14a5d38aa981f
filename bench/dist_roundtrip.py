#!/usr/bin/env python3
"""Round trip and throughput of distributed tasks, exactly once against at
least once, side by side on one broker.

For each mode (workers with transactions, then with --at-least-once), two
`looptune worker` processes and, per round, two noop jobs
(`looptune submit noop`): --window 1 (one task in flight: the round trip of
a task, its send to its result applied, median and p99 over the job) and all
tasks at once (throughput, tasks/s). Rounds alternate the modes so a change
of the machine's load hits both. Reports min/median/max over the rounds and
the machine it ran on.

usage: bench/dist_roundtrip.py [--bin build/looptune] [--brokers B] [--rounds 3]
                               [--latency-tasks 100] [--throughput-tasks 500] [--bytes 4]
Without --brokers (or LT_KAFKA_BOOTSTRAP) it starts the test broker
(scripts/kafka/broker.sh) in a temporary directory and stops it at the end."""
import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RT_RE = re.compile(r"round trip: median ([0-9.]+) ms, p99 ([0-9.]+) ms; ([0-9.]+) tasks/s")


def start_broker(tmp):
    out = subprocess.run([os.path.join(ROOT, "scripts/kafka/broker.sh"), "start", "--dir", tmp],
                         capture_output=True, text=True, check=True).stdout
    return re.search(r"BOOTSTRAP=(\S+)", out)[1]


def workers(binary, brokers, prefix, mode, logdir):
    extra = ["--at-least-once"] if mode == "at-least-once" else []
    procs = []
    for i in range(2):
        log = open(os.path.join(logdir, f"{prefix}w{i}.log"), "w")
        procs.append(subprocess.Popen([binary, "worker", "--brokers", brokers, "--topic-prefix",
                                       prefix, "--instance-id", f"bench-{mode}-{i}", *extra],
                                      stdout=log, stderr=subprocess.STDOUT))
    deadline = time.time() + 60
    while time.time() < deadline:  # both hold partitions: the group has settled
        texts = [open(os.path.join(logdir, f"{prefix}w{i}.log")).read() for i in range(2)]
        if all(re.findall(r"\((\d+) held now\)", t) and
               int(re.findall(r"\((\d+) held now\)", t)[-1]) > 0 for t in texts):
            break
        time.sleep(0.2)
    return procs


def job(binary, brokers, prefix, tasks, window, nbytes):
    args = [binary, "submit", "noop", "--brokers", brokers, "--topic-prefix", prefix,
            "--tasks", str(tasks), "--bytes", str(nbytes)]
    if window:
        args += ["--window", str(window)]
    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
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
    ap.add_argument("--latency-tasks", type=int, default=100)
    ap.add_argument("--throughput-tasks", type=int, default=500)
    ap.add_argument("--bytes", type=int, default=4)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="lt-dist-bench-")
    own_broker = not a.brokers
    brokers = a.brokers or start_broker(os.path.join(tmp, "broker"))
    modes = ["exactly-once", "at-least-once"]
    tag = f"b{os.getpid()}"
    prefixes = {m: f"{tag}-{m}." for m in modes}
    procs = {}
    res = {m: {"median": [], "p99": [], "tps": []} for m in modes}
    try:
        for m in modes:
            procs[m] = workers(a.bin, brokers, prefixes[m], m, tmp)
        for r in range(a.rounds):
            for m in (modes if r % 2 == 0 else modes[::-1]):
                med, p99, _ = job(a.bin, brokers, prefixes[m], a.latency_tasks, 1, a.bytes)
                _, _, tps = job(a.bin, brokers, prefixes[m], a.throughput_tasks, 0, a.bytes)
                res[m]["median"].append(med)
                res[m]["p99"].append(p99)
                res[m]["tps"].append(tps)
    finally:
        for ps in procs.values():
            for p in ps:
                p.terminate()
            for p in ps:
                p.wait(30)
        if own_broker:
            subprocess.run([os.path.join(ROOT, "scripts/kafka/broker.sh"), "stop", "--dir",
                            os.path.join(tmp, "broker")], capture_output=True)
    print(f"machine: {platform.node()} {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; broker {brokers}; "
          f"{a.rounds} rounds, payload {a.bytes} B, 2 workers")
    print(f"{'':16} {'round trip median ms':>28} {'round trip p99 ms':>28} {'tasks/s':>28}")
    print(f"{'':16} {'min / median / max':>28} {'min / median / max':>28} "
          f"{'min / median / max':>28}")
    for m in modes:
        print(f"{m:16} {summary(res[m]['median']):>28} {summary(res[m]['p99']):>28} "
              f"{summary(res[m]['tps']):>28}")


if __name__ == "__main__":
    main()
