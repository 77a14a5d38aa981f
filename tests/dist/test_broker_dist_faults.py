#!/usr/bin/env python3
"""Faults of the data, on the real broker with two workers.

1. A corrupted chunk (--test-corrupt 2:1: a byte of task 2's first input
   flipped after its CRC32C was taken, in the first send only; 16 KiB
   chunks): the worker detects it, names the chunk, answers FAILED; the
   coordinator reports it and sends attempt 2; the job completes with C
   equal to numpy's A @ B.
2. A poison task (--test-corrupt 5: every send of task 5 corrupted, its
   input inline): after 3 attempts the task is on tasks.dead, decoded here
   from the .proto with the errors of its 3 attempts, and the job fails with
   one line that says so.
3. Records from a foreign writer (made here in Python): on the tasks topic
   garbage bytes, an envelope without a version, a control message, a task
   without a job id, a chunk whose index is past its count, a task of an
   unknown kind, a task whose operands disagree, a task whose chunks never
   came; on the results topic while a job runs, garbage, a result for a task
   the job does not have and a broken result. The workers log each one and
   go on, the three well-formed foreign tasks get FAILED results naming the
   problem, the coordinator rejects what it cannot use, and the job's C is
   correct."""
import os
import re
import subprocess
import threading

import numpy as np

import dist_harness as h


def close_to_numpy(c, a, b, what):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-6 * a.shape[1]
    err = float(np.abs(c - ref).max())
    h.check(err <= tol, f"{what}: max |C - A@B| = {err:.3g} > {tol:.3g}")


def corrupted_chunk(servers, prefix, wdir, workers, pa, pb, a, b):
    pc = os.path.join(wdir, "c1.npy")
    rc, fig, out, err = h.submit(servers, prefix, "--a", pa, "--b", pb, "--out", pc,
                                 "--block", "64x64", "--chunk-kb", "16", "--test-corrupt", "2:1",
                                 "--job-id", f"crc-{os.getpid()}")
    h.check(rc == 0, f"corrupted chunk: the job failed ({rc}):\n{out}\n{err}")
    h.check(fig["retries"] == 1 and fig["failed"] == 1 and fig["dead"] == 0, f"{fig}")
    # 4 chunks a panel; panels by rows, each of the 4 rows on a partition of
    # its own: A's row panel once a row (4 x 4), B's column panel with each
    # task (16 x 4); task 2's corrupted send carries its A panel too (+4)
    # and its retry carries both (+8)
    h.check(fig["applied"] == fig["tasks"] == 16 and fig["chunks"] == 16 + 64 + 4 + 8, f"{fig}")
    h.check("task 2 attempt 1 of 3 failed" in err and "chunk 1 of 4: CRC32C mismatch" in err,
            f"the coordinator did not report the corrupted chunk:\n{err}")
    h.check(any("CRC32C mismatch" in w.text() for w in workers), "no worker logged the CRC error")
    close_to_numpy(np.load(pc), a, b, "corrupted chunk")
    h.say(f"corrupted chunk: detected, reported, task 2 retried; {fig['seconds']:.2f} s")


def poison(servers, prefix, wdir, pa, pb):
    job = f"poison-{os.getpid()}"
    rc, fig, out, err = h.submit(servers, prefix, "--a", pa, "--b", pb, "--out",
                                 os.path.join(wdir, "c2.npy"), "--block", "64x64",
                                 "--test-corrupt", "5", "--job-id", job)
    h.check(rc == 1, f"poison: exit {rc}, expected 1:\n{out}\n{err}")
    last = [l for l in err.splitlines() if l.startswith("looptune submit matmul:")]
    h.check(len(last) == 1, f"poison: expected one error line:\n{err}")
    h.check("dead-lettered" in last[0] and "task 5" in last[0] and "failed 3 attempts" in last[0]
            and "CRC32C mismatch" in last[0], f"poison: the error line says too little: {last[0]}")
    h.check(fig and fig["dead"] == 1 and fig["failed"] == 3 and fig["retries"] == 2, f"{fig}")
    h.check(not os.path.exists(os.path.join(wdir, "c2.npy")), "a failed job wrote C")
    dead = [h.decode(v) for _, _, k, v in h.records(servers, prefix + "tasks.dead")
            if k == f"{job}/5".encode()]
    h.check(len(dead) == 1, f"poison: {len(dead)} dead letters for task 5, expected 1")
    dl = dead[0].dead_letter
    h.check(dl.task.job_id == job and dl.task.task_index == 5 and dl.task.attempt == 3,
            f"dead letter: {dl.task}")
    h.check(len(dl.errors) == 3 and all(f"attempt {i + 1}:" in e and "CRC32C mismatch" in e
                                        for i, e in enumerate(dl.errors)), f"{list(dl.errors)}")
    h.check("failed 3 attempts" in dl.reason, dl.reason)
    rows, _ = h.jobs(servers, prefix, "--job", job)
    r = rows.get(job)
    h.check(r and r["state"] == "failed" and r["dead"] == 1 and r["failed"] == 3
            and r["attempts"] == 3, f"looptune jobs: {job}: {r}")
    h.say(f"poison: dead-lettered after 3 attempts: {dl.reason[:100]}")


def foreign_records(servers, prefix, wdir, workers, pa, pb, a, b):
    pb2 = h.proto()
    tasks = prefix + "tasks"

    def task(job, kind, inputs):
        t = pb2.Task(job_id=job, task_index=0, kind=kind, attempt=1, max_attempts=3)
        t.inputs.extend(inputs)
        return h.envelope(task=t)

    def tensor(name, rows, cols, **kw):
        data = np.zeros((rows, cols), np.float32).tobytes()
        t = pb2.Tensor(name=name, dtype="f32", shape=[rows, cols], nbytes=len(data), **kw)
        if not kw:
            t.data = data
            t.crc32c = h.crc32c(data)
        return t

    bad_version = pb2.Envelope(version=0, task=pb2.Task(job_id="x", kind="matmul", attempt=1))
    h.produce(servers, tasks, [
        (b"junk/0", b"\x00\xffnot a protobuf at all\x07"),
        (b"junk/1", bad_version.SerializeToString()),
        (b"junk/2", h.envelope(control=pb2.Control(run_id="r", kernel="matvec"))),
        (b"junk/3", h.envelope(task=pb2.Task(kind="matmul", attempt=1))),
        (b"junk/4", h.envelope(chunk=pb2.Chunk(job_id="j", blob_id=9, index=5, count=2))),
        (b"foreign-kind/0", task("foreign-kind", "nosuch", [])),
        (b"foreign-shape/0", task("foreign-shape", "matmul",
                                  [tensor("a", 2, 3), tensor("b_t", 2, 4)])),
        (b"foreign-chunks/0", task("foreign-chunks", "matmul",
                                   [tensor("a", 2, 3, blob_id=99, chunk_count=2),
                                    tensor("b_t", 2, 3)])),
    ])

    # the job, with foreign results injected as soon as it announces itself
    job = f"foreign-{os.getpid()}"
    pc = os.path.join(wdir, "c3.npy")
    sub = subprocess.Popen(h.submit_args(servers, prefix, "--a", pa, "--b", pb, "--out", pc,
                                         "--block", "64x64", "--job-id", job),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err_lines = []
    for line in sub.stderr:
        err_lines.append(line)
        if f"submit: job {job}:" in line:
            break
    broken = pb2.Result(job_id=job, task_index=0, attempt=1, status=1, worker="py")
    broken.outputs.append(tensor("c", 3, 3))
    h.produce(servers, prefix + "results", [
        (f"{job}/0".encode(), b"\xff\xfe garbage"),
        (f"{job}/0".encode(), h.envelope(result=pb2.Result(job_id=job, task_index=10**6,
                                                           attempt=1, status=1))),
        (f"{job}/0".encode(), h.envelope(result=broken)),
    ])
    drain = threading.Thread(target=lambda: err_lines.extend(sub.stderr))
    drain.start()
    out = sub.stdout.read()
    sub.wait(timeout=240)
    drain.join()
    err = "".join(err_lines)
    h.check(sub.returncode == 0, f"foreign records: the job failed ({sub.returncode}):\n{out}\n{err}")
    fig = h.parse_job(out)
    h.check(fig["rejected"] >= 2 and fig["applied"] == fig["tasks"], f"{fig}")
    h.check("rejected" in err, f"the coordinator logged no rejection:\n{err}")
    close_to_numpy(np.load(pc), a, b, "foreign records")
    h.check(all(w.proc.poll() is None for w in workers), "a worker died of a foreign record")

    # the workers' answers to the well-formed foreign tasks
    failed = {}
    for _, _, key, value in h.records(servers, prefix + "results"):
        env = h.decode(value)
        if env.WhichOneof("payload") == "result" and env.result.job_id.startswith("foreign-"):
            failed[env.result.job_id] = (env.result.status, env.result.error)
    want = {"foreign-kind": "task kind 'nosuch' is not run",
            "foreign-shape": "inner dimensions differ",
            "foreign-chunks": "none of its 2 chunks arrived"}
    for jid, text in want.items():
        h.check(jid in failed and failed[jid][0] == 2 and text in failed[jid][1],
                f"{jid}: result {failed.get(jid)}, expected FAILED with '{text}'")
    logs = "".join(w.text() for w in workers)
    for text in ("field number 0 out of range", "no schema version", "a control, not a task",
                 "no job id", "chunk index 5 of count 2"):
        h.check(text in logs, f"no worker logged the rejection '{text}'")
    h.say(f"foreign records: {fig['rejected']} rejected by the coordinator; job correct")


def main():
    servers = h.bootstrap()
    wdir = h.work_dir()
    prefix = h.unique_prefix("faults")
    rng = np.random.default_rng(11)
    a = rng.uniform(-1, 1, (256, 256)).astype(np.float32)
    b = rng.uniform(-1, 1, (256, 256)).astype(np.float32)
    pa, pb = os.path.join(wdir, "a.npy"), os.path.join(wdir, "b.npy")
    np.save(pa, a)
    np.save(pb, b)
    # tasks held 150 ms: a job of 16 outlasts the foreign results' produce
    # (the workers' batches finish it in milliseconds otherwise)
    workers = [h.Worker(servers, prefix, f"f-w{i}", wdir, ["--task-delay-ms", "150"]).start()
               for i in range(2)]
    try:
        h.wait_assigned(workers)
        corrupted_chunk(servers, prefix, wdir, workers, pa, pb, a, b)
        poison(servers, prefix, wdir, pa, pb)
        foreign_records(servers, prefix, wdir, workers, pa, pb, a, b)
    finally:
        codes = [w.stop() for w in workers]
    h.check(codes == [0, 0], f"workers' exit codes {codes}")
    rejected = sum(int(n) for w in workers
                   for n in re.findall(r"(\d+) records rejected", w.text()))
    h.check(rejected == 5, f"the workers' summaries count {rejected} rejected records, not 5")
    h.say("passed")


if __name__ == "__main__":
    main()
