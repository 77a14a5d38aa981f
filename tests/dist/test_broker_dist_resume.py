#!/usr/bin/env python3
"""A coordinator killed in the middle of its job, and `submit --resume`.

One worker (tasks held 100 ms each) runs a job of 32 tiles. The coordinator
is killed with SIGKILL once some tiles are done. `submit --resume --job-id`
with the same operands reads back the results the workers committed, applies
them, sends only the tasks without one, and finishes: C equals numpy's A @ B
and the single-node product bit for bit, every task applied once. Resuming
with other operands, a job that is not on the topics, or without --job-id
fails with one line; `looptune jobs` shows the job done."""
import os
import re
import subprocess
import time

import numpy as np

import dist_harness as h


def main():
    servers = h.bootstrap()
    wdir = h.work_dir()
    prefix = h.unique_prefix("resume")
    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, (256, 128)).astype(np.float32)
    b = rng.uniform(-1, 1, (128, 256)).astype(np.float32)
    pa, pb, pb2, pc = (os.path.join(wdir, f) for f in ("a.npy", "b.npy", "b2.npy", "c.npy"))
    np.save(pa, a)
    np.save(pb, b)
    np.save(pb2, b + 1)
    job = f"resume-{os.getpid()}"
    args = ["--a", pa, "--b", pb, "--out", pc, "--block", "64x32", "--job-id", job]
    w = h.Worker(servers, prefix, "r-w0", wdir, ["--task-delay-ms", "100"]).start()
    try:
        h.wait_assigned([w])
        sub = subprocess.Popen(h.submit_args(servers, prefix, *args), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        done = 0
        for line in sub.stderr:  # progress lines every 2 s
            m = re.search(rf"job {job}: (\d+)/32 tasks", line)
            if m and int(m[1]) >= 4:
                done = int(m[1])
                break
        sub.kill()
        sub.wait()
        h.check(done >= 4, "the first coordinator never reported progress")
        h.check(not os.path.exists(pc), "a killed coordinator wrote C")
        time.sleep(1.0)  # the worker goes on with the queued tasks meanwhile

        rc, fig, out, err = h.submit(servers, prefix, *args, "--resume", "--verify")
        h.check(rc == 0, f"resume failed ({rc}):\n{out}\n{err}")
        m = re.search(rf"job {job} resumed: (\d+) of 32 tasks applied", err)
        h.check(m and int(m[1]) >= done, f"no 'resumed' line, or fewer than {done}:\n{err}")
        h.check(fig["applied"] == 32 and fig["tasks"] == 32, f"{fig}")
        h.check(fig.get("verify_differ") == 0, f"--verify: {out}")
        ref = a.astype(np.float64) @ b.astype(np.float64)
        diff = float(np.abs(np.load(pc) - ref).max())
        h.check(diff <= 1e-6 * 128, f"max |C - A@B| = {diff:.3g}")
        h.say(f"killed after {done} tiles; resumed with {m[1]} applied from the topic, "
              f"{fig['duplicates']} duplicates dropped, {fig['seconds']:.2f} s")

        for extra, text in ((["--b", pb2], "the operands differ from job"),
                            (["--job-id", "no-such-job"], "no task of job no-such-job")):
            a2 = args + extra
            rc, _, out, err = h.submit(servers, prefix, *a2, "--resume")
            lines = [l for l in err.splitlines() if l.startswith("looptune submit matmul:")]
            h.check(rc == 1 and len(lines) == 1 and text in lines[0],
                    f"resume {extra}: exit {rc}, expected one line with '{text}':\n{err}")
        p = subprocess.run(h.submit_args(servers, prefix, "--a", pa, "--b", pb, "--out", pc,
                                         "--resume"), capture_output=True, text=True, timeout=60)
        h.check(p.returncode == 1 and "--resume needs --job-id" in p.stderr, p.stderr)
        rows, _ = h.jobs(servers, prefix, "--job", job)
        h.check(rows[job]["state"] == "done" and rows[job]["done"] == 32, f"{rows}")
    finally:
        code = w.stop()
    h.check(code == 0, f"worker exit code {code}")
    h.say("passed")


if __name__ == "__main__":
    main()
