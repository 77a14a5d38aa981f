#!/usr/bin/env python3
"""A worker's batch of tasks commits whole or not at all.

Exactly once: a worker alone in its group (--batch 64, and
--test-commit-delay-ms, which flushes a batch's results into the open
transaction, says "N records produced" and waits before committing) is
killed with SIGKILL inside a batch of several tasks, twice, each time restarted under its
instance id (whose init_transactions aborts the open transaction), the last
time without the delay. The noop job completes with one result applied per
task and no duplicate; the results topic read read_committed holds exactly
one OK result per task, while read read_uncommitted it also holds the
results of the killed batches (at least the records they said they
produced): the kills fell inside batches of several tasks, and their
transactions were aborted whole.

At least once (--at-least-once): the same kill after a batch's results are
flushed and before its offsets commit. The restarted worker runs the batch
again; every result beyond one per task reached the coordinator and was
dropped (its "duplicates dropped" equals the topic's extra OK results), and
there are at least as many as the killed batch held."""
import os
import re
import subprocess
import time

import dist_harness as h

TASKS = 300
DELAY_MS = "3000"
PRODUCED_RE = re.compile(r"kafka stage: (\d+) records produced, committing in")


def wait_produced(w, timeout_s=90):
    """Records of a batch of several tasks that this run of w holds in an
    uncommitted commit (a first task may come alone: its batch is let go)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        run = w.text().split(f"---- start {w.starts}\n")[-1]
        several = [int(n) for n in PRODUCED_RE.findall(run) if int(n) >= 2]
        if several:
            return several[0]
        h.check(w.proc.poll() is None, f"worker {w.wid} exited ({w.proc.returncode}):\n{run}")
        time.sleep(0.05)
    h.fail(f"worker {w.wid} produced no batch in {timeout_s} s")


def ok_results(servers, prefix, job, committed_only):
    """OK results per task of job on the results topic."""
    ok = {}
    for _, _, _, value in h.records(servers, prefix + "results", committed_only=committed_only):
        env = h.decode(value)
        if env.WhichOneof("payload") == "result" and env.result.job_id == job and \
                env.result.status == 1:
            ok[env.result.task_index] = ok.get(env.result.task_index, 0) + 1
    return ok


def run(servers, wdir, mode):
    prefix = h.unique_prefix(f"batch{mode}")
    mode_args = ["--at-least-once"] if mode == "alo" else []
    wid = f"batch-{mode}"
    w = h.Worker(servers, prefix, wid, wdir,
                 ["--batch", "64", "--test-commit-delay-ms", DELAY_MS, *mode_args]).start()
    h.wait_assigned([w])
    job = f"batch-{mode}-{os.getpid()}"
    sub = subprocess.Popen([h.binary(), "submit", "noop", "--brokers", servers, "--topic-prefix",
                            prefix, "--worker-timeout", "60", "--tasks", str(TASKS),
                            "--job-id", job], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    killed = []
    kills = 2 if mode == "eos" else 1
    try:
        for i in range(kills):
            killed.append(wait_produced(w))
            w.kill9()
            if i + 1 < kills:
                w.start()  # the same delay: killed inside its next batch again
        # the same instance id without the delay finishes the job
        w = h.Worker(servers, prefix, wid, wdir, ["--batch", "64", *mode_args])
        w.log = os.path.join(wdir, f"worker-{wid}-last.log")
        w.start()
        out, err = sub.communicate(timeout=240)
    finally:
        if sub.poll() is None:
            sub.kill()
        code = w.stop() if w.proc else None
    h.check(sub.returncode == 0, f"{mode}: submit failed ({sub.returncode}):\n{out}\n{err}")
    h.check(code == 0, f"{mode}: the last worker's exit code {code}")
    fig = h.parse_job(out)
    h.check(fig["tasks"] == TASKS and fig["applied"] == TASKS,
            f"{mode}: {fig['applied']} results applied for {fig['tasks']} tasks")
    committed = ok_results(servers, prefix, job, True)
    h.check(sorted(committed) == list(range(TASKS)), f"{mode}: tasks without an OK result")
    extra = sum(committed.values()) - TASKS
    if mode == "eos":
        h.check(fig["duplicates"] == 0, f"eos: {fig['duplicates']} duplicates arrived")
        h.check(extra == 0 and set(committed.values()) == {1},
                f"eos: the committed results hold {extra} extra OK results")
        everything = ok_results(servers, prefix, job, False)
        aborted = sum(everything.values()) - TASKS
        h.check(aborted >= sum(killed),
                f"eos: the topic holds {aborted} uncommitted OK results, the killed batches "
                f"produced {killed}")
        h.say(f"eos: kills inside batches of {killed} results, {fig['seconds']:.2f} s, "
              f"{fig['applied']} applied, 0 duplicates; one committed OK result per task, "
              f"{aborted} more in aborted transactions")
    else:
        h.check(fig["duplicates"] == extra,
                f"alo: the topic holds {extra} extra OK results, the coordinator dropped "
                f"{fig['duplicates']}")
        h.check(extra >= killed[0],
                f"alo: the killed batch of {killed[0]} results ran again, yet only {extra} "
                "duplicates")
        h.say(f"alo: a kill after a batch of {killed[0]} results was delivered, "
              f"{fig['seconds']:.2f} s, {fig['applied']} applied, {fig['duplicates']} "
              f"duplicates dropped ({extra} extra OK results on the topic)")


def main():
    servers = h.bootstrap()
    wdir = h.work_dir()
    run(servers, wdir, "eos")
    run(servers, wdir, "alo")
    h.say("passed")


if __name__ == "__main__":
    main()
