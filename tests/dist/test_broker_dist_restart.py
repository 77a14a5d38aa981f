#!/usr/bin/env python3
"""A broker lost in the middle of a job loses nothing and doubles nothing.

Each part starts a broker of its own with scripts/kafka/broker.sh, in a
directory under LT_WORK_DIR (the shared fixture broker is never touched),
and stops it at the end whatever happens. Two workers (tasks held 150 ms by
--task-delay-ms) run a matmul job of random operands while:

- single: the one broker is killed with SIGKILL and started again on its
  port and data (`broker.sh restart`). Nothing commits while it is down
  (15 s or more: the restarted node waits out its old registration's
  session); workers and coordinator reconnect and go on.
- cluster: a node of a three-broker cluster (replication 3,
  min.insync.replicas=2), the group coordinator of the workers, is killed
  with SIGKILL; the job goes on with two brokers, then the node is started
  again (`broker.sh kill-node N`, `start-node N`) and catches up.

Both times the job completes with the coordinator and both workers alive
throughout, C equals numpy's A @ B within f32 rounding and the single-node
product bit for bit, the coordinator applied one result per task and
dropped no duplicate, and the results topic read read_committed holds
exactly one OK result per task: effects are counted, not deliveries (a task
whose transaction the outage aborted runs again).

The workers' group session (120 s) and the coordinator's worker timeout
outlast the outage. With the default 6 s session a worker waiting inside a
transactional call when its session expires is fenced by its own heartbeat
once the coordinator answers, and exits (docs/distributed.md, "A broker
lost"). The seed of the operands and of the kill moments is printed."""
import os
import random
import re
import subprocess
import threading
import time

import numpy as np

import dist_harness as h

K = 128
# A group session that outlasts a broker's restart on a busy host (15 to 50
# s), heartbeats as often as with the default session.
WORKER_ARGS = ["--task-delay-ms", "150", "--session-timeout-ms", "120000",
               "-X", "heartbeat.interval.ms=1000"]


class Job:
    """A `looptune submit matmul` in the background; its progress lines
    (tasks applied, every 2 s) kept with their times."""

    def __init__(self, servers, prefix, job, args):
        self.job = job
        self.proc = subprocess.Popen(h.submit_args(servers, prefix, *args, "--job-id", job),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.progress = []  # (time, tasks applied)
        self.err = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stderr:
            self.err.append(line)
            m = re.search(rf"job {self.job}: (\d+)/\d+ tasks", line)
            if m:
                self.progress.append((time.time(), int(m[1])))

    def applied(self):
        return self.progress[-1][1] if self.progress else 0

    def wait(self, what, timeout_s):
        """Until what() is true while the job runs; False if it ended first or time ran out."""
        deadline = time.time() + timeout_s
        while time.time() < deadline and self.proc.poll() is None:
            if what():
                return True
            time.sleep(0.1)
        return what()

    def finish(self, timeout_s):
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(10)
        return self.proc.returncode, self.proc.stdout.read(), "".join(self.err)


def committed_ok(servers, prefix, job):
    """OK results per task of job on the results topic, read read_committed."""
    ok = {}
    for _, _, _, value in h.records(servers, prefix + "results"):
        env = h.decode(value)
        if env.WhichOneof("payload") == "result" and env.result.job_id == job and \
                env.result.status == 1:
            ok[env.result.task_index] = ok.get(env.result.task_index, 0) + 1
    return ok


def worker_figures(workers):
    """Sums of the workers' exit summaries: results committed, results not
    committed (their tasks ran again), transactions aborted."""
    done = uncommitted = aborted = 0
    for w in workers:
        text = w.text()
        uncommitted += text.count("result not committed")
        m = re.findall(r"worker: (\d+) tasks done .* (\d+) transactions aborted", text)
        done += sum(int(d) for d, _ in m)
        aborted += sum(int(a) for _, a in m)
    return done, uncommitted, aborted


def run(name, servers, wdir, rnd, rng, m, n, block, outage):
    """One job on two workers, outage(job, prefix, tasks) called once some
    tasks are applied; every check of exactly once after it."""
    bm, bn = (int(x) for x in block.split("x"))
    tasks = (m // bm) * (n // bn)
    a = rng.uniform(-1, 1, (m, K)).astype(np.float32)
    b = rng.uniform(-1, 1, (K, n)).astype(np.float32)
    pa, pb, pc = (os.path.join(wdir, f"{name}-{x}.npy") for x in "abc")
    np.save(pa, a)
    np.save(pb, b)
    prefix = h.unique_prefix(name)
    workers = [h.Worker(servers, prefix, f"{name}-w{i}", wdir, WORKER_ARGS) for i in range(2)]
    job_id = f"{name}-{os.getpid()}"
    job = None
    try:
        t0 = time.time()
        for w in workers:
            w.start()
        h.wait_assigned(workers, 120)
        settle_s = time.time() - t0
        job = Job(servers, prefix, job_id, ["--a", pa, "--b", pb, "--out", pc, "--block", block,
                                            "--verify", "--worker-timeout", "120"])
        h.check(job.wait(lambda: job.applied() >= 8, 120),
                f"{name}: the job did not get going ({job.applied()} applied)")
        time.sleep(rnd.uniform(0.0, 1.5))  # some tasks done, most to come
        h.check(job.proc.poll() is None and job.applied() < tasks,
                f"{name}: the job ended before the broker was lost: make it longer")
        said = outage(job, prefix, tasks)
        rc, out, err = job.finish(240)
        alive = [w.proc.poll() is None for w in workers]
    finally:
        if job and job.proc.poll() is None:
            job.proc.kill()
        codes = [w.stop() for w in workers]
    h.check(rc == 0, f"{name}: submit failed ({rc}):\n{out}\n{err[-3000:]}")
    h.check(all(alive), f"{name}: a worker exited during the job: "
            f"{[w.text()[-800:] for w, up in zip(workers, alive) if not up]}")
    h.check(codes == [0, 0], f"{name}: the workers' exit codes {codes}")
    fig = h.parse_job(out)
    c = np.load(pc)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err_max = float(np.abs(c - ref).max())
    h.check(err_max <= 1e-6 * K, f"{name}: max |C - A@B| = {err_max:.3g}")
    h.check(fig.get("verify_differ") == 0, f"{name}: C differs from the single-node product: {out}")
    h.check(fig["tasks"] == tasks and fig["applied"] == tasks and fig["duplicates"] == 0,
            f"{name}: {fig['applied']} applied, {fig['duplicates']} duplicates for "
            f"{fig['tasks']} tasks")
    ok = committed_ok(servers, prefix, job_id)
    h.check(sorted(ok) == list(range(tasks)) and sum(ok.values()) == tasks,
            f"{name}: committed OK results: {sum(ok.values())} for {tasks} tasks, "
            f"{tasks - len(ok)} tasks without one")
    done, uncommitted, aborted = worker_figures(workers)
    h.say(f"{name}: group settled in {settle_s:.1f} s; {said}; job {fig['seconds']:.1f} s, "
          f"{fig['applied']} applied for {tasks} "
          f"tasks, 0 duplicates, {fig['retries']} retries; workers: {done} results committed, "
          f"{uncommitted} not (run again), {aborted} transactions aborted; "
          f"{sum(ok.values())} committed OK results on the topic; max |C - A@B| = {err_max:.3g}")


def single(broker, wdir, rnd, rng):
    def outage(job, prefix, tasks):
        before = job.applied()
        secs = broker.sh("restart")  # SIGKILL, then the same node on its port and data
        # nothing commits while the only broker is down: the job cannot have
        # ended meanwhile
        h.check(job.proc.poll() is None, "single: the job ended while the broker was down")
        return (f"broker killed at about {before} of {tasks} applied, back after {secs:.1f} s "
                f"at {job.applied()}")
    run("single", broker.servers, wdir, rnd, rng, 512, 512, "64x32", outage)


def cluster_state(servers, prefix, topics):
    """{topic: [(partition, replicas, in sync)]}, the results topic's
    min.insync.replicas and the node coordinating the workers' group."""
    from confluent_kafka.admin import AdminClient, ConfigResource
    admin = AdminClient({"bootstrap.servers": servers, "log_level": 3})
    md = admin.list_topics(timeout=10)
    rep = {t: sorted((p.id, len(p.replicas), len(p.isrs)) for p in md.topics[t].partitions.values())
           for t in topics if t in md.topics}
    res = ConfigResource(ConfigResource.Type.TOPIC, prefix + "results")
    min_isr = admin.describe_configs([res])[res].result(timeout=10)["min.insync.replicas"].value
    group = prefix + "workers"
    coord = admin.describe_consumer_groups([group])[group].result(timeout=10).coordinator.id
    return rep, min_isr, coord


def cluster(broker, wdir, rnd, rng):
    servers = broker.servers

    def outage(job, prefix, tasks):
        topics = [prefix + s for s in ("tasks", "results", "tasks.dead")]
        rep, min_isr, node = cluster_state(servers, prefix, topics)
        h.check(len(rep) == 3 and all(r == 3 for t in rep.values() for _, r, _ in t),
                f"cluster: the job's topics are not replicated 3 times: {rep}")
        h.check(min_isr == "2", f"cluster: min.insync.replicas={min_isr} on the results")
        # the node that coordinates the workers' group (and leads about a
        # third of the partitions): its loss moves the group too
        broker.sh("kill-node", str(node))
        t_kill = time.time()
        # a progress line printed 1.5 s after the kill counts every result
        # committed before it; a dozen more were committed without the node
        h.check(job.wait(lambda: job.progress[-1][0] > t_kill + 1.5, 30),
                "cluster: no progress line after the kill")
        at_kill = job.applied()
        h.check(job.wait(lambda: job.applied() >= at_kill + 12, 120),
                f"cluster: no progress with node {node} down ({job.applied()} applied)")
        down_s = time.time() - t_kill
        during = job.applied()
        secs = broker.sh("start-node", str(node))
        mid_job = job.proc.poll() is None
        # the restarted node catches up: every replica in sync again
        deadline = time.time() + 90
        while time.time() < deadline:
            rep, _, _ = cluster_state(servers, prefix, topics)
            if all(i == 3 for t in rep.values() for _, _, i in t):
                break
            time.sleep(0.5)
        h.check(all(i == 3 for t in rep.values() for _, _, i in t),
                f"cluster: node {node} did not catch up within 90 s: {rep}")
        return (f"node {node} (the group coordinator) killed at about {at_kill} of {tasks} "
                f"applied, {during} applied {down_s:.1f} s later on two brokers; node back "
                f"after {secs:.1f} s ({'mid-job' if mid_job else 'after the job'}), "
                f"replicas in sync")
    run("cluster", servers, wdir, rnd, rng, 512, 512, "32x32", outage)


def main():
    wdir = h.work_dir()
    seed = int(os.environ.get("LT_RESTART_SEED", time.time_ns() % 100000))
    h.say(f"seed {seed} (LT_RESTART_SEED={seed} repeats it)")
    rnd = random.Random(seed)
    rng = np.random.default_rng(seed)
    t0 = time.time()
    # one after the other: JVMs starting beside a restart lengthen its outage
    one = h.Broker(wdir, "broker-single")
    three = h.Broker(wdir, "broker-cluster", nodes=3)
    try:
        single(one.start().ready(), wdir, rnd, rng)
        one.stop()
        t1 = time.time()
        cluster(three.start().ready(), wdir, rnd, rng)
    finally:
        one.stop()
        three.stop()
    h.say(f"passed (single {t1 - t0:.0f} s, cluster {time.time() - t1:.0f} s)")


if __name__ == "__main__":
    main()
