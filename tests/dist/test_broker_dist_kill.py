#!/usr/bin/env python3
"""Killed workers lose nothing and double nothing.

A matmul job of 128 tiles runs on two worker processes (each task held
150 ms by --task-delay-ms, so the job lasts about ten seconds on any host,
long enough for every kill of the schedule, which takes up to 4.6 s from
1.5 s after the coordinator's first send). While it runs, a worker
chosen at random is killed with SIGKILL at random moments, several times,
and restarted each time under its instance id; the last kill leaves the
worker dead, so the other one takes its partitions over after the session
timeout.

Exactly once (transactions): the job completes, C equals numpy's A @ B
within f32 rounding and looptune's single-node product bit for bit, the
coordinator applied exactly one result per task and dropped no duplicate,
and the results topic read read_committed holds exactly one OK result per
task (the transactions of killed workers were aborted).
Zombie: a second worker under the same instance id fences the first, which
exits saying so; the results are still one per task.
At least once (--at-least-once): the job completes with C correct; results
of tasks redone after a kill may arrive twice, and the coordinator reports
how many it dropped (it may be 0: a kill need not fall between a produce and
its offset commit). The seed of the kill schedule is printed."""
import os
import random
import subprocess
import threading
import time

import numpy as np

import dist_harness as h

M, N, K = 512, 512, 128
BLOCK = "64x32"
TASKS = (M // 64) * (N // 32)


def run_job(servers, wdir, mode, rnd, a, b, pa, pb):
    prefix = h.unique_prefix(f"kill{mode}")
    extra = ["--task-delay-ms", "150"] + (["--at-least-once"] if mode == "alo" else [])
    workers = [h.Worker(servers, prefix, f"{mode}-w{i}", wdir, extra).start() for i in range(2)]
    h.wait_assigned(workers)  # both share the partitions before the job starts
    pc = os.path.join(wdir, f"c-{mode}.npy")
    job = f"kill-{mode}-{os.getpid()}"
    sub = subprocess.Popen(h.submit_args(servers, prefix, "--a", pa, "--b", pb, "--out", pc,
                                         "--block", BLOCK, "--verify", "--job-id", job),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    kills = []
    err_lines = []
    drain = threading.Thread(target=lambda: err_lines.extend(sub.stderr))
    try:
        # from its first send (after its wait for a heartbeat, up to 1 s): a
        # kill before either worker has run a task would leave it no result
        for line in sub.stderr:
            err_lines.append(line)
            if f"submit: job {job}:" in line:
                break
        drain.start()
        time.sleep(1.5)  # the first tasks run, some on each worker
        for i in range(4):
            if sub.poll() is not None:
                break
            time.sleep(rnd.uniform(0.2, 0.8))
            w = rnd.choice(workers)
            w.kill9()
            kills.append(w.wid)
            if i < 3:
                time.sleep(rnd.uniform(0.0, 0.4))
                w.start()  # the same instance id: it fences its predecessor
        out = sub.stdout.read()
        sub.wait(timeout=240)
    finally:
        if sub.poll() is None:
            sub.kill()
        if drain.is_alive():
            drain.join()
        codes = [w.stop() for w in workers if w.proc.poll() is None]
    err = "".join(err_lines)
    h.check(sub.returncode == 0, f"{mode}: submit failed ({sub.returncode}):\n{out}\n{err}")
    h.check(len(kills) >= 3, f"{mode}: the job ended before 3 kills ({kills}): make it longer")
    h.check(all(c == 0 for c in codes), f"{mode}: surviving workers' exit codes {codes}")
    fig = h.parse_job(out)
    c = np.load(pc)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-6 * K
    err_max = float(np.abs(c - ref).max())
    h.check(err_max <= tol, f"{mode}: max |C - A@B| = {err_max:.3g} > {tol:.3g}")
    h.check(fig.get("verify_differ") == 0, f"{mode}: C differs from the single-node product: {out}")
    h.check(fig["tasks"] == TASKS and fig["applied"] == TASKS,
            f"{mode}: {fig['applied']} results applied for {fig['tasks']} tasks")
    # what the results topic holds for the job, read as the coordinator does
    ok = {}
    for _, _, key, value in h.records(servers, prefix + "results"):
        if not key or not key.startswith(job.encode() + b"/"):
            continue
        env = h.decode(value)
        if env.WhichOneof("payload") == "result" and env.result.status == 1:
            ok[env.result.task_index] = ok.get(env.result.task_index, 0) + 1
    h.check(sorted(ok) == list(range(TASKS)), f"{mode}: tasks without an OK result on the topic")
    by_worker = {}
    for _, _, key, value in h.records(servers, prefix + "results"):
        env = h.decode(value)
        if env.WhichOneof("payload") == "result" and env.result.job_id == job:
            by_worker[env.result.worker] = by_worker.get(env.result.worker, 0) + 1
    # Both workers normally share the job; on a loaded host a worker killed
    # early and often may rejoin only after the other finished it, which is
    # no fault of exactly once (the counts above are what it promises).
    if len(by_worker) != 2:
        h.say(f"{mode}: note: committed results came from {by_worker} alone")
    extra_results = sum(ok.values()) - TASKS
    h.say(f"{mode}: {len(kills)} kills ({', '.join(kills)}), {fig['seconds']:.2f} s, "
          f"{fig['applied']} applied, {fig['duplicates']} duplicates dropped, "
          f"{fig['retries']} retries; committed OK results on the topic: {sum(ok.values())} "
          f"for {TASKS} tasks (by worker: {by_worker}); max |C - A@B| = {err_max:.3g}")
    return fig, extra_results


def committed_ok(servers, prefix, job):
    """OK results per task of job on the results topic, read read_committed."""
    ok = {}
    for _, _, key, value in h.records(servers, prefix + "results"):
        env = h.decode(value)
        if env.WhichOneof("payload") == "result" and env.result.job_id == job and \
                env.result.status == 1:
            ok[env.result.task_index] = ok.get(env.result.task_index, 0) + 1
    return ok


def zombie(servers, wdir, a, b, pa, pb):
    """A second worker started under the same instance id while the first
    works: the newer one fences the older (its producer's transactional id
    and its consumer's static membership), whose results in flight are
    aborted; the older exits with an error that says so, and the job's
    results are still one per task."""
    prefix = h.unique_prefix("zombie")
    first = h.Worker(servers, prefix, "same", wdir, ["--task-delay-ms", "60"]).start()
    h.wait_assigned([first])
    job = f"zombie-{os.getpid()}"
    pc = os.path.join(wdir, "c-zombie.npy")
    sub = subprocess.Popen(h.submit_args(servers, prefix, "--a", pa, "--b", pb, "--out", pc,
                                         "--block", BLOCK, "--verify", "--job-id", job),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.0)
    second = h.Worker(servers, prefix, "same", wdir, ["--task-delay-ms", "60"])
    second.log = os.path.join(wdir, "worker-same-2.log")
    second.start()
    try:
        out, err = sub.communicate(timeout=240)
        code_first = first.proc.wait(60)  # fenced: it ends by itself
    finally:
        if sub.poll() is None:
            sub.kill()
        code_second = second.stop()
    h.check(sub.returncode == 0, f"zombie: submit failed ({sub.returncode}):\n{out}\n{err}")
    fig = h.parse_job(out)
    h.check(fig["applied"] == TASKS and fig["duplicates"] == 0 and
            fig.get("verify_differ") == 0, f"zombie: {fig}")
    last = first.text().strip().splitlines()[-1]
    h.check(code_first == 1 and "fenced" in last, f"zombie: the older worker ({code_first}): {last}")
    h.check(code_second == 0, f"zombie: the newer worker's exit code {code_second}")
    ok = committed_ok(servers, prefix, job)
    h.check(sorted(ok) == list(range(TASKS)) and sum(ok.values()) == TASKS,
            f"zombie: committed OK results per task: {sorted(set(ok.values()))}")
    h.say(f"zombie: the older worker fenced ({last[:90]}...), {fig['applied']} applied, "
          f"0 duplicates, {fig['seconds']:.2f} s")


def main():
    servers = h.bootstrap()
    wdir = h.work_dir()
    seed = int(os.environ.get("LT_KILL_SEED", time.time_ns() % 100000))
    h.say(f"kill schedule seed {seed} (LT_KILL_SEED={seed} repeats it)")
    rnd = random.Random(seed)
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    pa, pb = os.path.join(wdir, "a.npy"), os.path.join(wdir, "b.npy")
    np.save(pa, a)
    np.save(pb, b)

    fig, extra = run_job(servers, wdir, "eos", rnd, a, b, pa, pb)
    h.check(fig["duplicates"] == 0, f"exactly once, yet {fig['duplicates']} duplicates arrived")
    h.check(extra == 0, f"exactly once, yet the results topic holds {extra} extra OK results")

    zombie(servers, wdir, a, b, pa, pb)

    fig, extra = run_job(servers, wdir, "alo", rnd, a, b, pa, pb)
    # every OK result beyond the first of a task reached the coordinator and was dropped
    h.check(fig["duplicates"] == extra,
            f"at least once: the topic holds {extra} extra results, the coordinator dropped "
            f"{fig['duplicates']}")
    h.say("passed")


if __name__ == "__main__":
    main()
