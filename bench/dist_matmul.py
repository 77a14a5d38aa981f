#!/usr/bin/env python3
"""A distributed matmul over Kafka against single-node products on the same
cores, and the bytes it moves with and without panel reuse.

C = A B for n x n f32 operands (default n = 4096) in tiles of --block
(default 512: t = n / 512 = 8 tiles a side), four ways per round, the order
rotating from round to round so a change of the machine's load hits all:

  dist, panel reuse   `looptune submit matmul` on --workers local `looptune
                      worker` processes (--threads each; the tasks topic has
                      as many partitions as workers, so the tile rows split
                      evenly): a tile row's panel of A travels once, B's
                      column panels once a partition
  dist, plain tiles   the same with --no-panel-reuse: every task carries both
                      of its panels, 8 n^2 t bytes in all
  OpenBLAS sgemm      numpy's matmul (numpy links OpenBLAS: numpy.show_config())
                      in one process, OPENBLAS_NUM_THREADS = workers x threads
  looptune, 1 process the library's matmul kernel on as many threads
                      (bench_matmul --shape n x n x n; its own OpenBLAS line,
                      Debian's libopenblas, is reported too)

GFLOP/s are 2 n^3 over the time: a distributed job's is the coordinator's
whole job (operands transposed and cut, tasks sent, results applied, from the
moment it starts); a single-node product's is the call. Reports min / median
/ max over the rounds, the bytes over Kafka of both schemes against 8 n^2 t,
and the machine's load (uptime) before and after.

usage: bench/dist_matmul.py [--bin build/looptune] [--bench-matmul build/bench_matmul]
                            [--brokers B] [--n 4096] [--block 512] [--rounds 3]
                            [--workers 2] [--threads 1]
Without --brokers (or LT_KAFKA_BOOTSTRAP) it starts the test broker
(scripts/kafka/broker.sh) in a temporary directory and stops and removes it at
the end (each round writes about 8 n^2 t + 4 n^2 (t + 1) bytes to its log)."""
import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from benchlib import start_broker, stop_broker  # noqa: E402
JOB_RE = re.compile(r"job \S+: (\d+) tasks, (\d+) applied, .*?, ([0-9.]+) s, \d+ resumed")
BYTES_RE = re.compile(r"bytes over Kafka: .*\((\d+), (\d+), (\d+) bytes\)")
PANELS_RE = re.compile(r"panels: by (\w+), (\d+) sent, (\d+) referenced, (\d+) NEED_PANEL")
OURS_RE = re.compile(r"looptune f32\s+([0-9.]+) /\s+([0-9.]+) /\s+([0-9.]+) GFLOP/s")
BLAS_RE = re.compile(r"OpenBLAS sgemm f32\s+([0-9.]+) /\s+([0-9.]+) /\s+([0-9.]+) GFLOP/s")

NUMPY_SGEMM = r"""
import sys, time
import numpy as np
n = int(sys.argv[1])
rng = np.random.default_rng(1)
a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
c = a @ b  # warm-up: threads, pages
t0 = time.perf_counter()
c = a @ b
print(time.perf_counter() - t0)
"""


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()



def start_workers(a, brokers, prefix, logdir):
    procs = []
    for i in range(a.workers):
        log = open(os.path.join(logdir, f"w{i}.log"), "w")
        procs.append(subprocess.Popen(
            [a.bin, "worker", "--brokers", brokers, "--topic-prefix", prefix, "--instance-id",
             f"bench-mm-{i}", "--threads", str(a.threads), "--partitions", str(a.workers)],
            stdout=log, stderr=subprocess.STDOUT))
    deadline = time.time() + 90
    while time.time() < deadline:  # every worker holds partitions: the group has settled
        held = []
        for i in range(a.workers):
            with open(os.path.join(logdir, f"w{i}.log")) as f:
                h = re.findall(r"\((\d+) held now\)", f.read())
            held.append(int(h[-1]) if h else 0)
        if all(held):
            return procs
        time.sleep(0.2)
    sys.exit(f"dist_matmul: the workers' group did not settle: {held}")


def dist_job(a, brokers, prefix, tmp, reuse, seed):
    args = [a.bin, "submit", "matmul", "--brokers", brokers, "--topic-prefix", prefix,
            "--partitions", str(a.workers), "--m", str(a.n), "--n", str(a.n), "--k", str(a.n),
            "--seed", str(seed), "--block", f"{a.block}x{a.block}",
            "--out", os.path.join(tmp, "c.npy"), "--timeout", "3000"]
    if not reuse:
        args.append("--no-panel-reuse")
    p = subprocess.run(args, capture_output=True, text=True, timeout=3600)
    m, b = JOB_RE.search(p.stdout), BYTES_RE.search(p.stdout)
    if p.returncode != 0 or not m or not b or m[1] != m[2]:
        sys.exit(f"dist_matmul: submit failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    pn = PANELS_RE.search(p.stdout)
    return {"s": float(m[3]), "sent": int(b[1]), "plain": int(b[2]), "received": int(b[3]),
            "panels": pn.groups() if pn else None}


def numpy_sgemm(n, threads):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    p = subprocess.run([sys.executable, "-c", NUMPY_SGEMM, str(n)], capture_output=True,
                       text=True, env=env, timeout=3600, check=True)
    return float(p.stdout.strip())


def bench_matmul(a, threads):
    p = subprocess.run([a.bench_matmul, "--shape", f"{a.n}x{a.n}x{a.n}", "--threads",
                        str(threads), "--reps", "1", "--rounds", "1"],
                       capture_output=True, text=True, timeout=3600)
    m = OURS_RE.search(p.stdout)
    if p.returncode != 0 or not m:
        sys.exit(f"dist_matmul: bench_matmul failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    blas = BLAS_RE.search(p.stdout)
    return float(m[2]), float(blas[2]) if blas else None


def mmm(xs):
    return f"{min(xs):7.1f} / {statistics.median(xs):7.1f} / {max(xs):7.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/looptune"))
    ap.add_argument("--bench-matmul", default=os.path.join(ROOT, "build/bench_matmul"))
    ap.add_argument("--brokers", default=os.environ.get("LT_KAFKA_BOOTSTRAP"))
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--block", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="threads per worker")
    a = ap.parse_args()
    t = -(-a.n // a.block)
    cores = a.workers * a.threads
    flop = 2.0 * a.n ** 3
    load_before = uptime()
    tmp = tempfile.mkdtemp(prefix="lt-dist-mm-")
    own_broker = not a.brokers
    brokers = a.brokers or start_broker(os.path.join(tmp, "broker"))
    prefix = f"bmm{os.getpid()}."
    kinds = ["dist, panel reuse", "dist, plain tiles", "OpenBLAS sgemm (numpy)",
             "looptune, 1 process"]
    gf = {k: [] for k in kinds}
    gf_debian = []
    jobs = {True: [], False: []}
    procs = []
    try:
        procs = start_workers(a, brokers, prefix, tmp)
        for r in range(a.rounds):
            order = kinds[r % len(kinds):] + kinds[:r % len(kinds)]
            for k in order:
                if k.startswith("dist"):
                    reuse = k == kinds[0]
                    j = dist_job(a, brokers, prefix, tmp, reuse, seed=r + 1)
                    jobs[reuse].append(j)
                    gf[k].append(flop / j["s"] * 1e-9)
                elif k.startswith("OpenBLAS"):
                    gf[k].append(flop / numpy_sgemm(a.n, cores) * 1e-9)
                else:
                    ours, debian = bench_matmul(a, cores)
                    gf[k].append(ours)
                    if debian:
                        gf_debian.append(debian)
            print(f"round {r + 1}/{a.rounds}: " +
                  ", ".join(f"{k} {gf[k][-1]:.1f}" for k in kinds) + " GFLOP/s", flush=True)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
        if own_broker:
            stop_broker(os.path.join(tmp, "broker"))
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print(f"machine: {platform.node()} {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs; broker {brokers}")
    print(f"load before: {load_before}")
    print(f"load after:  {uptime()}")
    print(f"C = A B, n = {a.n} f32, tiles of {a.block} (t = {t}, {t * t} tasks), {a.rounds} "
          f"rounds; {a.workers} workers x {a.threads} thread(s); single-node products on "
          f"{cores} threads")
    print(f"{'':40} {'GFLOP/s min / median / max':>28}")
    for k in kinds:
        print(f"{k:40} {mmm(gf[k]):>28}")
    if gf_debian:
        print(f"{'OpenBLAS sgemm (Debian, bench_matmul)':40} {mmm(gf_debian):>28}")
    print()
    plain = 8 * a.n * a.n * t
    print(f"bytes over Kafka (8 n^2 t = {plain / 1e6:.1f} MB; the coordinator's counts of record "
          f"values, median over rounds)")
    for reuse, name in ((False, "plain tiles"), (True, "panel reuse")):
        js = jobs[reuse]
        sent = statistics.median(j["sent"] for j in js)
        got = statistics.median(j["received"] for j in js)
        secs = [j["s"] for j in js]
        pn = js[-1]["panels"]
        extra = (f"; panels by {pn[0]}: {pn[1]} carried, {pn[2]} referenced, {pn[3]} NEED_PANEL"
                 if pn else "")
        print(f"  {name:12} {sent / 1e6:8.1f} MB sent ({sent / plain:.3f} x 8 n^2 t), "
              f"{got / 1e6:6.1f} MB received; job {mmm(secs)} s{extra}")


if __name__ == "__main__":
    main()
