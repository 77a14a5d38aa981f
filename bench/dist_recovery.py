#!/usr/bin/env python3
"""Recovery from `kill -9` of a worker: how long its partitions (and so its
tasks) wait for another owner, and how long until the job completes.

Three `looptune worker` processes (static members, --instance-id) share the
tasks topic. Jobs alternate, noop (--noop-tasks tasks at once) and matmul
(--m x --k times --k x --n in 64x64 tiles); in each a worker chosen at
random is sent SIGKILL at a random moment after the coordinator starts
sending (the kill schedule's seed is printed). Per kill:

- reassignment: from the kill to the moment a live worker process says the
  group gave it partitions ("kafka stage: assigned N partitions ..."): the
  killed worker's uncommitted tasks are read again from there;
- completion: from the kill to the job's end (the submit process exits),
  with the job's length without a kill alongside for comparison.

--mode restart (default) restarts the killed worker at once under its
instance id, as a supervisor would (systemd Restart=always): its
init_transactions aborts the transaction it left open, and the static
membership hands it its partitions back without a rebalance.
--mode replace leaves it dead: the others take its partitions when its
session times out (--session-timeout-ms, 6 s; the broker's
group.min.session.timeout.ms is 6 s by default), and its open transaction
holds read_committed readers of its results partitions back until the
broker aborts it (transaction.timeout.ms, 15 s, plus the broker's check
every 10 s); a fresh worker then joins for the next kill.

Every job must still complete with one result applied per task and no
duplicate; violations are counted and reported. Min/median/p99/max over the
kills, the machine (lscpu) and its load averages before and after.

usage: bench/dist_recovery.py [--bin build/looptune] [--brokers B] [--kills 100]
                              [--mode restart|replace] [--seed S]
Without --brokers (or LT_KAFKA_BOOTSTRAP) it starts the test broker
(scripts/kafka/broker.sh) in a temporary directory and stops it at the end."""
import argparse
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from benchlib import loadavg, machine, start_broker, stop_broker  # noqa: E402
ASSIGNED_RE = re.compile(r"kafka stage: assigned (\d+) partitions of \S+ \((\d+) held now\)")
JOB_RE = re.compile(r"job \S+: (\d+) tasks, (\d+) applied, (\d+) duplicates dropped")
STARTED_RE = re.compile(r"submit: job \S+: .* workers alive")




class Proc:
    """A process whose stderr lines are kept with the monotonic time they arrived."""

    def __init__(self, args, log):
        self.lines = []
        self.mu = threading.Lock()
        self.log = open(log, "a")
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, bufsize=1)
        self.ended = None
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            now = time.monotonic()
            with self.mu:
                self.lines.append((now, line))
            self.log.write(line)
        self.p.wait()
        self.ended = time.monotonic()
        self.log.close()

    def since(self, t0):
        with self.mu:
            return [(t, l) for t, l in self.lines if t >= t0]

    def text(self):
        with self.mu:
            return "".join(l for _, l in self.lines)

    def held(self):
        h = ASSIGNED_RE.findall(self.text())
        return int(h[-1][1]) if h else -1


class Pool:
    def __init__(self, a, brokers, prefix, wdir):
        self.a, self.brokers, self.prefix, self.wdir = a, brokers, prefix, wdir
        self.workers = {}  # instance id -> Proc
        self.next_id = 0

    def start(self, wid=None):
        if wid is None:
            wid = f"rec-{self.next_id}"
            self.next_id += 1
        self.workers[wid] = Proc(
            [self.a.bin, "worker", "--brokers", self.brokers, "--topic-prefix", self.prefix,
             "--instance-id", wid, "--session-timeout-ms", str(self.a.session_timeout_ms)],
            os.path.join(self.wdir, f"worker-{wid}.log"))
        return wid

    def settle(self, timeout_s=120, quiet_s=1.0):
        """Until every worker holds partitions and the group has been quiet
        for quiet_s (a cooperative rebalance takes two rounds)."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            last = max((t for w in self.workers.values() for t, l in w.since(0)
                        if "kafka stage: " in l), default=0)
            if all(w.held() > 0 for w in self.workers.values()) and \
                    time.monotonic() - last >= quiet_s:
                return
            time.sleep(0.05)
        sys.exit(f"dist_recovery: the group did not settle: "
                 f"{[(k, w.held()) for k, w in self.workers.items()]}")

    def stop(self):
        for w in self.workers.values():
            if w.p.poll() is None:
                w.p.send_signal(signal.SIGTERM)
        for w in self.workers.values():
            try:
                w.p.wait(30)
            except subprocess.TimeoutExpired:
                w.p.kill()


def job_args(a, brokers, prefix, kind, wdir):
    base = [a.bin, "submit", kind, "--brokers", brokers, "--topic-prefix", prefix,
            "--worker-timeout", "120"]
    if kind == "noop":
        return base + ["--tasks", str(a.noop_tasks)]
    return base + ["--a", os.path.join(wdir, "a.npy"), "--b", os.path.join(wdir, "b.npy"),
                   "--out", os.path.join(wdir, "c.npy"), "--block", "64x64"]


def started(sub):
    """When the coordinator starts sending (after its first heartbeat)."""
    while sub.ended is None and not STARTED_RE.search(sub.text()):
        time.sleep(0.002)
    return time.monotonic()


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


def line(name, xs):
    if not xs:
        return f"{name:40} (none)"
    return (f"{name:40} {min(xs):8.2f} {statistics.median(xs):8.2f} {pct(xs, 0.99):8.2f} "
            f"{max(xs):8.2f}   n={len(xs)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/looptune"))
    ap.add_argument("--brokers", default=os.environ.get("LT_KAFKA_BOOTSTRAP"))
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--mode", choices=["restart", "replace"], default="restart")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--noop-tasks", type=int, default=8000)
    ap.add_argument("--m", type=int, default=1536)
    ap.add_argument("--n", type=int, default=1536)
    ap.add_argument("--k", type=int, default=256)
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else time.time_ns() % 100000
    rnd = random.Random(seed)
    wdir = tempfile.mkdtemp(prefix="lt-dist-recovery-")
    import numpy as np
    rng = np.random.default_rng(seed)
    np.save(os.path.join(wdir, "a.npy"), rng.uniform(-1, 1, (a.m, a.k)).astype(np.float32))
    np.save(os.path.join(wdir, "b.npy"), rng.uniform(-1, 1, (a.k, a.n)).astype(np.float32))
    load_before = loadavg()
    own_broker = not a.brokers
    brokers = a.brokers or start_broker(os.path.join(wdir, "broker"))
    prefix = f"rec{os.getpid()}."
    pool = Pool(a, brokers, prefix, wdir)
    reassign, done, baseline = {"noop": [], "matmul": []}, {"noop": [], "matmul": []}, \
        {"noop": [], "matmul": []}
    bad, late = [], 0
    try:
        for _ in range(3):
            pool.start()
        pool.settle()
        # the jobs' length without a kill, from the first task sent
        for kind in ("noop", "matmul"):
            for i in range(3):
                sub = Proc(job_args(a, brokers, prefix, kind, wdir),
                           os.path.join(wdir, f"submit-{kind}-{i}.log"))
                t0 = started(sub)
                sub.t.join()
                if sub.p.returncode:
                    sys.exit(f"dist_recovery: a {kind} job failed:\n{sub.text()}")
                baseline[kind].append(sub.ended - t0)
        kills = 0
        while kills < a.kills:
            kind = "noop" if kills % 2 == 0 else "matmul"
            sub = Proc(job_args(a, brokers, prefix, kind, wdir),
                       os.path.join(wdir, f"submit-{kills}.log"))
            started(sub)
            # somewhere in the job: it has tasks in flight on every worker
            time.sleep(rnd.uniform(0.05, 0.5) * statistics.median(baseline[kind]))
            wid = rnd.choice(sorted(pool.workers))
            victim = pool.workers.pop(wid)
            victim.p.send_signal(signal.SIGKILL)
            t_kill = time.monotonic()
            victim.p.wait()
            if sub.ended is not None:  # the job was done before the kill landed
                late += 1
                victim.t.join()
                pool.start(wid if a.mode == "restart" else None)
                pool.settle()
                continue
            if a.mode == "restart":
                pool.start(wid)
            t_assign = None
            # restart: the new process takes the partitions back (no
            # rebalance); replace: the others get them after the rebalance
            takers = [pool.workers[wid]] if a.mode == "restart" else list(pool.workers.values())
            while sub.ended is None or t_assign is None:
                if t_assign is None:
                    for w in takers:
                        for t, l in w.since(t_kill):
                            m = ASSIGNED_RE.search(l)
                            if m and int(m[1]) > 0 and (t_assign is None or t < t_assign):
                                t_assign = t
                if sub.ended is not None and t_assign is None and \
                        time.monotonic() - sub.ended > 60:
                    break
                time.sleep(0.01)
            sub.t.join()
            out = sub.text()
            m = JOB_RE.search(out)
            if sub.p.returncode != 0 or not m or m[1] != m[2] or m[3] != "0":
                bad.append(f"kill {kills} ({kind}, {wid}): exit {sub.p.returncode}: "
                           f"{m[0] if m else out[-300:]}")
            if t_assign is not None:
                reassign[kind].append(t_assign - t_kill)
            done[kind].append(sub.ended - t_kill)
            kills += 1
            if a.mode == "replace":
                pool.start()
            pool.settle()
            if kills % 10 == 0:
                print(f"dist_recovery: {kills} kills; reassignment median "
                      f"{statistics.median(reassign['noop'] + reassign['matmul']):.2f} s",
                      file=sys.stderr, flush=True)
    finally:
        pool.stop()
        if own_broker:
            stop_broker(os.path.join(wdir, "broker"))
    both = reassign["noop"] + reassign["matmul"]
    print(f"machine: {machine()}; load average (1, 5, 15 min) before {load_before}, after "
          f"{loadavg()}; broker {brokers}; mode {a.mode}; {a.kills} kills (seed {seed}, "
          f"{late} more landed after their job's end and were not counted); 3 workers, "
          f"session timeout {a.session_timeout_ms} ms; noop {a.noop_tasks} tasks, matmul "
          f"{a.m}x{a.k} times {a.k}x{a.n} in 64x64 tiles")
    print(f"{'seconds':40} {'min':>8} {'median':>8} {'p99':>8} {'max':>8}")
    print(line("kill to reassignment, all", both))
    for kind in ("noop", "matmul"):
        print(line(f"kill to reassignment, {kind}", reassign[kind]))
        print(line(f"kill to job completion, {kind}", done[kind]))
        print(line(f"{kind} job without a kill (sending on)", baseline[kind]))
    within = sum(x <= 3.0 for x in both)
    print(f"reassigned within 3 s: {within} of {len(both)}; jobs not exactly once or failed: "
          f"{len(bad)}")
    for b in bad:
        print(f"  {b}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
