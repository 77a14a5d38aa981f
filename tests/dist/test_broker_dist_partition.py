#!/usr/bin/env python3
"""A worker cut off from the network in the middle of a job.

The test makes a network namespace joined to this one by a veth pair on a
private /30 and starts a broker of its own on the host end's address
(scripts/kafka/broker.sh start --host). One worker runs inside the namespace
(each task held 2 s), two outside it (150 ms). A matmul job of 128 tiles
starts; just after the namespaced worker's second result commits (well
within the 2 s of its next task, checked), the host end of the veth pair
goes down. The namespaced worker, holding its next task, is cut off without
a reset: its packets are dropped and the broker hears nothing more from it
(a blackhole route keeps the broker's answers from the default route
meanwhile).

- The group's session timeout (6 s) takes its partitions to the two others,
  which run its tasks again from its committed offsets; the job completes:
  C equals numpy's A @ B within f32 rounding and the single-node product bit
  for bit, every task applied once, no duplicate.
- The link comes back while the cut-off worker still runs. The result of the
  task it held does not commit: its transaction's send_offsets_to_transaction
  fails (UNKNOWN_MEMBER_ID: the group removed the member at the session
  timeout), the stage aborts it and drops the result ("the group moved on").
  Read read_committed, the results topic holds exactly one OK result per task
  of the job; that task's is another worker's, and the fenced one is there at
  most as an aborted record.
- The cut-off worker does not exit: it gives up its lost partitions, rejoins
  the group under its instance id and holds partitions again. A second job
  then completes with results from all three workers, correct and one per
  task, and `looptune jobs` counts the three alive (their heartbeats).

Timings printed: cut -> partitions reassigned, cut -> job done, link back ->
the result fenced and the worker holding partitions again. Needs root (ip
netns, veth); without the privilege it prints SKIP and passes."""
import os
import re
import subprocess
import sys
import time

import numpy as np

import dist_harness as h

PARTS = 6
BLOCK = "64x32"
JOB1 = (512, 512, 128)  # M, N, K: 128 tiles
# 48 tiles: 6 row lines and 8 column lines, so each of the PARTS partitions gets tasks
# whichever way the panels travel (a line's tasks share a partition)
JOB2 = (384, 256, 128)
CUT_DELAY_MS = 2000     # tasks of the worker that is cut off
DELAY_MS = 150          # the others'
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BROKER_SH = os.path.join(ROOT, "scripts", "kafka", "broker.sh")
MOVED_ON = re.compile(r"task (\S+)/(\d+): result not committed \(kafka stage: the group moved "
                      r"on \((.*)")


def ip(*args, ns=None, check=True):
    cmd = (["ip", "netns", "exec", ns, "ip"] if ns else ["ip"]) + list(args)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and p.returncode:
        h.fail(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    return p


class Net:
    """A network namespace joined to this one by a veth pair on a /30 of
    10.213.0.0/16 that no interface here uses."""

    def __init__(self):
        pid = os.getpid()
        self.ns = f"ltpart{pid}"
        self.host_if, self.ns_if = f"ltp{pid}h", f"ltp{pid}n"
        used = ip("-4", "-o", "addr").stdout
        for i in range(256):
            n = (pid + i * 7919) % (256 * 64)
            base = (10 << 24) | (213 << 16) | (n << 2)
            addr = [f"10.213.{(base + j) >> 8 & 255}.{(base + j) & 255}" for j in range(4)]
            if not any(f" {a}/" in used for a in addr):
                break
        self.net = f"{addr[0]}/30"
        self.host_addr, self.ns_addr = addr[1], addr[2]
        self.made = []

    def create(self):
        p = ip("netns", "add", self.ns, check=False)
        if p.returncode:
            if os.geteuid() != 0 or re.search(r"Operation not permitted|Permission denied",
                                              p.stderr):
                h.say(f"SKIP: cannot create a network namespace ({p.stderr.strip()}): this "
                      "test needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN)")
                sys.exit(0)
            h.fail(f"ip netns add {self.ns}: {p.stderr.strip()}")
        self.made.append("ns")
        ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
        self.made.append("veth")
        ip("link", "set", self.ns_if, "netns", self.ns)
        ip("addr", "add", f"{self.host_addr}/30", "dev", self.host_if)
        # While the host end is down its /30 route is gone; this one, below
        # it while the link is up, drops the broker's packets to the
        # namespace then instead of giving them to the default route.
        ip("route", "add", "blackhole", self.net, "metric", "4242")
        self.made.append("route")
        ip("link", "set", self.host_if, "up")
        ip("addr", "add", f"{self.ns_addr}/30", "dev", self.ns_if, ns=self.ns)
        ip("link", "set", self.ns_if, "up", ns=self.ns)
        ip("link", "set", "lo", "up", ns=self.ns)

    def cut(self):
        # The namespace's end loses its carrier: what the worker sends is
        # dropped, nothing answers it (no RST). The host end's address stays
        # (its local route), so the others reach the broker as before.
        ip("link", "set", self.host_if, "down")

    def heal(self):
        ip("link", "set", self.host_if, "up")

    def destroy(self):
        """Removes what create made, whatever fails."""
        for what, args in (("route", ("route", "del", "blackhole", self.net, "metric", "4242")),
                           ("veth", ("link", "del", self.host_if)),  # both ends go
                           ("ns", ("netns", "del", self.ns))):
            if what in self.made:
                p = ip(*args, check=False)
                if p.returncode:
                    print(f"{h.NAME}: cleanup: ip {' '.join(args)}: {p.stderr.strip()}",
                          file=sys.stderr)
        self.made = []


class Broker:
    def __init__(self, wdir):
        self.dir = os.path.join(wdir, "broker")
        self.started = False

    def start(self, host):
        self.started = True
        p = subprocess.run([BROKER_SH, "start", "--dir", self.dir, "--host", host],
                           capture_output=True, text=True, timeout=600)
        m = re.search(r"^BOOTSTRAP=(\S+)$", p.stdout, re.M)
        h.check(p.returncode == 0 and m, f"broker.sh start --host {host} failed "
                f"({p.returncode}): {p.stderr.strip()}")
        return m[1]

    def stop(self):
        if self.started:
            subprocess.run([BROKER_SH, "stop", "--dir", self.dir], capture_output=True,
                           timeout=60)


class Watch:
    """The results topic from now on, read_committed, as it is written."""

    def __init__(self, servers, topic):
        from confluent_kafka import Consumer, TopicPartition
        self.c = Consumer({"bootstrap.servers": servers, "group.id": f"py-watch-{os.getpid()}",
                           "enable.auto.commit": False, "isolation.level": "read_committed",
                           "fetch.wait.max.ms": 10})
        parts = self.c.list_topics(topic, timeout=10).topics[topic].partitions
        tps = []
        for p in parts:
            _, hi = self.c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            tps.append(TopicPartition(topic, p, hi))
        self.c.assign(tps)

    def result_of(self, worker, job, nth, timeout_s):
        """Waits for the nth committed OK result of worker in job: (its task,
        its record's timestamp in s)."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            m = self.c.poll(0.05)
            if m is None or m.error():
                continue
            env = h.decode(m.value())
            if env.WhichOneof("payload") == "result" and env.result.worker == worker and \
                    env.result.job_id == job and env.result.status == 1:
                nth -= 1
                if nth == 0:
                    return env.result.task_index, m.timestamp()[1] / 1000.0
        h.fail(f"no result of {worker} in job {job} within {timeout_s} s")

    def close(self):
        self.c.close()


def results_of(servers, prefix, job, committed_only=True):
    """{task: [(worker, status)]} of job on the results topic."""
    out = {}
    for _, _, _, value in h.records(servers, prefix + "results", committed_only=committed_only):
        env = h.decode(value)
        if env.WhichOneof("payload") == "result" and env.result.job_id == job:
            out.setdefault(env.result.task_index, []).append((env.result.worker,
                                                              env.result.status))
    return out


def operands(wdir, tag, shape, rng):
    m, n, k = shape
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    pa, pb = os.path.join(wdir, f"a-{tag}.npy"), os.path.join(wdir, f"b-{tag}.npy")
    np.save(pa, a)
    np.save(pb, b)
    return a, b, pa, pb


def settle(workers):
    """Until every worker holds partitions and together they hold all PARTS."""
    h.wait_assigned(workers, 90)
    deadline = time.time() + 60
    while sum(w.holding() for w in workers) != PARTS and time.time() < deadline:
        time.sleep(0.1)
    h.check(sum(w.holding() for w in workers) == PARTS,
            f"the group did not settle: {[(w.wid, w.holding()) for w in workers]}")


def check_job(servers, prefix, job, out, pc, a, b, tasks, workers):
    """The job's figures, C, and the committed results: one OK per task, from workers."""
    fig = h.parse_job(out)
    h.check(fig["tasks"] == tasks and fig["applied"] == tasks and fig["duplicates"] == 0 and
            fig["retries"] == 0 and fig["dead"] == 0, f"{job}: {fig}")
    h.check(fig.get("verify_differ") == 0 and fig.get("verify_diff") == 0.0,
            f"{job}: C differs from the single-node product:\n{out}")
    c = np.load(pc)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    k = a.shape[1]
    tol = 1e-6 * k * float(np.abs(a).max()) * float(np.abs(b).max())
    diff = float(np.abs(c.astype(np.float64) - ref).max())
    h.check(c.shape == ref.shape and diff <= tol, f"{job}: max |C - A@B| = {diff:.3g} > {tol:.3g}")
    res = results_of(servers, prefix, job)
    ok = {t: [w for w, s in v if s == 1] for t, v in res.items()}
    h.check(sorted(ok) == list(range(tasks)) and all(len(v) == 1 for v in ok.values()),
            f"{job}: committed OK results per task should be exactly one: "
            f"{ {t: v for t, v in ok.items() if len(v) != 1} }, "
            f"{tasks - len(ok)} tasks without one")
    by_worker = {}
    for v in ok.values():
        by_worker[v[0]] = by_worker.get(v[0], 0) + 1
    h.check(set(by_worker) == set(workers), f"{job}: results by worker {by_worker}, "
            f"expected from {sorted(workers)}")
    return fig, ok, by_worker, diff


def run(net, wdir):
    broker = Broker(wdir)
    workers = []
    try:
        net.create()
        h.say(f"namespace {net.ns}: {net.ns_if} {net.ns_addr} <-> {net.host_if} "
              f"{net.host_addr}")
        servers = broker.start(net.host_addr)
        h.say(f"own broker on {servers}")
        prefix = h.unique_prefix("part")
        parts = ["--partitions", str(PARTS)]
        cut_w = h.Worker(servers, prefix, "part-ns", wdir,
                         ["--task-delay-ms", str(CUT_DELAY_MS), *parts])
        cut_w.args = ["ip", "netns", "exec", net.ns] + cut_w.args
        others = [h.Worker(servers, prefix, f"part-h{i}", wdir,
                           ["--task-delay-ms", str(DELAY_MS), *parts]) for i in range(2)]
        workers = [cut_w.start()] + [w.start() for w in others]
        settle(workers)
        ids = [w.wid for w in workers]

        # ---- job 1, cut mid-job
        rng = np.random.default_rng(os.getpid())
        a, b, pa, pb = operands(wdir, "1", JOB1, rng)
        tasks1 = (JOB1[0] // 64) * (JOB1[1] // 32)
        job1, pc1 = f"part1-{os.getpid()}", os.path.join(wdir, "c1.npy")
        watch = Watch(servers, prefix + "results")
        sub = subprocess.Popen(h.submit_args(servers, prefix, "--a", pa, "--b", pb, "--out", pc1,
                                             "--block", BLOCK, "--verify", "--job-id", job1),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # just after one of its results commits it starts the next task,
            # held CUT_DELAY_MS: the cut falls while it holds that task (its
            # sleep began after the result was produced: checked below)
            task_before, produced = watch.result_of(cut_w.wid, job1, 2, 90)
            watch.close()
            mark = len(cut_w.text())
            net.cut()
            t_cut = time.time()
            h.check(t_cut < produced + CUT_DELAY_MS / 1000.0,
                    f"the cut came {t_cut - produced:.2f} s after the result of task "
                    f"{task_before} was produced: the worker may have begun its next commit "
                    "(host too slow for the test's timing)")
            h.check(sub.poll() is None, "job 1 ended before the cut")
            h.say(f"link cut {t_cut - produced:.2f} s after {cut_w.wid}'s result of task "
                  f"{task_before} was produced")
            t_moved = None
            while sub.poll() is None and time.time() - t_cut < 150:
                if t_moved is None and sum(w.holding() for w in others) == PARTS:
                    t_moved = time.time()
                time.sleep(0.1)
            h.check(sub.poll() is not None, "job 1 did not complete within 150 s of the cut")
            t_done = time.time()
            out, err = sub.communicate()
        finally:
            if sub.poll() is None:
                sub.kill()
                sub.wait()
        h.check(sub.returncode == 0, f"job 1 failed ({sub.returncode}):\n{out}\n{err}")
        h.check(t_moved is not None, "job 1 completed before the cut-off worker's partitions "
                f"moved: {[(w.wid, w.holding()) for w in others]}")
        h.check(cut_w.proc.poll() is None, f"the cut-off worker exited during the cut:\n"
                f"{cut_w.text()[mark:]}")
        h.check(not MOVED_ON.search(cut_w.text()[mark:]),
                "the cut-off worker heard from the broker during the cut")
        h.say(f"cut -> partitions reassigned: {t_moved - t_cut:.1f} s; cut -> job 1 done: "
              f"{t_done - t_cut:.1f} s")

        # ---- the link back: the held task's result fenced, the worker back in the group
        net.heal()
        t_heal = time.time()
        t_fenced = t_back = None
        while time.time() - t_heal < 90 and cut_w.proc.poll() is None:
            log = cut_w.text()[mark:]
            if t_fenced is None and MOVED_ON.search(log):
                t_fenced = time.time()
            held = re.findall(r"\((\d+) held now\)", log)
            if "(0 held now)" in log and held and int(held[-1]) > 0:
                t_back = time.time()
                break
            time.sleep(0.1)
        log = cut_w.text()[mark:]
        h.check(cut_w.proc.poll() is None, f"the cut-off worker exited "
                f"({cut_w.proc.returncode}) after the link came back:\n{log}")
        h.check(t_back, f"the cut-off worker did not hold partitions again within 90 s:\n{log}")
        m = MOVED_ON.search(log)
        h.check(m and m[1] == job1, "the result of the task the cut-off worker held was not "
                f"dropped for the group having moved on:\n{log}")
        fenced_task, why = int(m[2]), m[3]
        t_fenced = t_fenced or time.time()
        h.check(re.search(r"UNKNOWN_MEMBER_ID|Unknown member|ILLEGAL_GENERATION|generation|"
                          r"FENCED_INSTANCE_ID", why), f"fenced, but why? {why}")
        h.say(f"link back -> task {fenced_task}'s result fenced: {t_fenced - t_heal:.1f} s "
              f"({why.split('(Broker: ')[-1].split(')')[0]}); -> {cut_w.wid} holds "
              f"partitions again: {t_back - t_heal:.1f} s")

        fig1, ok1, by1, diff1 = check_job(servers, prefix, job1, out, pc1, a, b, tasks1, ids)
        h.check(ok1[fenced_task] != [cut_w.wid],
                f"task {fenced_task}'s fenced result of {cut_w.wid} is committed")
        late = [w for w, s in results_of(servers, prefix, job1, committed_only=False)
                .get(fenced_task, []) if w == cut_w.wid]
        h.say(f"job 1: {fig1['applied']} of {tasks1} applied, 0 duplicates, bit-exact, "
              f"max |C - A@B| = {diff1:.3g}; committed OK results by worker {by1}; task "
              f"{fenced_task}: committed by {ok1[fenced_task][0]}, {len(late)} aborted "
              f"record(s) of {cut_w.wid}")

        # ---- job 2 on all three workers, once the rebalance of the rejoin is over (a
        # worker between revocation and its new assignment would take none of its tasks)
        settle(workers)
        a2, b2, pa2, pb2 = operands(wdir, "2", JOB2, rng)
        tasks2 = (JOB2[0] // 64) * (JOB2[1] // 32)
        job2, pc2 = f"part2-{os.getpid()}", os.path.join(wdir, "c2.npy")
        rc, _, out2, err2 = h.submit(servers, prefix, "--a", pa2, "--b", pb2, "--out", pc2,
                                     "--block", BLOCK, "--verify", "--job-id", job2,
                                     timeout=150)
        h.check(rc == 0, f"job 2 failed ({rc}):\n{out2}\n{err2}")
        fig2, _, by2, _ = check_job(servers, prefix, job2, out2, pc2, a2, b2, tasks2, ids)
        _, alive = h.jobs(servers, prefix)
        h.check(alive == 3, f"looptune jobs: {alive} workers alive, expected 3")
        h.say(f"job 2: {fig2['applied']} of {tasks2} applied, bit-exact, {fig2['seconds']:.1f} "
              f"s; results by worker {by2}; 3 workers alive")

        codes = [w.stop() for w in workers]
        h.check(codes == [0, 0, 0], f"workers' exit codes {codes}")
        last = cut_w.text().strip().splitlines()[-1]
        d = re.search(r"(\d+) dropped \(partition moved\)", last)
        h.check(d and int(d[1]) >= 1, f"{cut_w.wid}'s figures: {last}")
        h.say(f"{cut_w.wid}: {last}")
    finally:
        # each step on its own: a failing one must not keep the namespace,
        # the veth pair and the route from going
        steps = [lambda w=w: w.proc and w.proc.poll() is None and w.stop(15) for w in workers]
        for step in steps + [broker.stop, net.destroy]:
            try:
                step()
            except Exception as e:  # noqa: BLE001 (the test's own failure comes first)
                print(f"{h.NAME}: cleanup: {e!r}", file=sys.stderr)


def main():
    wdir = h.work_dir()
    t0 = time.time()
    run(Net(), wdir)
    h.say(f"passed in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
