#!/usr/bin/env python3
"""k-splits and converted operands of a distributed matmul, on the real
broker with two workers.

1. A k-split (--block 64x64x64 over K = 200: splits of 64, 64, 64 and 8, four
   tasks per tile): C equals numpy's A @ B within f32 rounding, --verify says
   it equals the single-node product of the same splits bit for bit, and a
   second run of the job (its results arriving in another order) gives the
   same bytes: the partial tiles are added in split order, not arrival order.
2. --dtype f16 (the plain tile scheme): the tasks topic carries f16 panels
   (2 bytes a value, read back here), half the f32 bytes, C equals numpy's product of the f16-rounded operands within f32
   rounding, bit-exact to --verify's, and the reported difference from the
   f32 product is the one numpy finds.
3. --dtype q8_0 with a k-split (K = 256 in splits of 96, 96, 64): the panels
   are ggml's q8_0 blocks (34 bytes per 32 values); numpy quantises the
   operands as ggml's reference quantiser does and C equals the product of
   the dequantised operands within f32 rounding, bit-exact to --verify's;
   with the panels reused too, below 34/128 of the f32 bytes.
Needs the broker (ctest's kafka_broker fixture), numpy, protobuf,
grpcio-tools, confluent-kafka."""
import os
import re

import numpy as np

import dist_harness as h

F32_RE = re.compile(r"verify: max \|C - C_f32\| = (\S+)")


def q8_0(x):
    """x (rows of a multiple of 32) quantised and dequantised as
    lt_row_from_f32 / lt_row_to_f32 do (ggml's reference q8_0), in float32."""
    blocks = x.astype(np.float32).reshape(-1, 32)
    amax = np.abs(blocks).max(axis=1, keepdims=True)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    v = (blocks * inv).astype(np.float32).astype(np.float64)
    q = np.trunc(v + np.copysign(0.5, v))  # roundf: halves away from zero
    d16 = d.astype(np.float16).astype(np.float32)
    return (d16 * q.astype(np.float32)).astype(np.float32).reshape(x.shape)


def close(c, a, b, what):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-6 * a.shape[1] * float(np.abs(a).max()) * float(np.abs(b).max())
    err = float(np.abs(c.astype(np.float64) - ref).max())
    h.check(err <= tol, f"{what}: max |C - ref| = {err:.3g} > tolerance {tol:.3g}")
    return err, tol


def task_tensors(servers, prefix, job):
    """The input tensors of job's task records on the tasks topic."""
    out = []
    for _, _, key, value in h.records(servers, prefix + "tasks"):
        if key and key.startswith(job.encode() + b"/"):
            env = h.decode(value)
            if env.WhichOneof("payload") == "task":
                out.extend(env.task.inputs)
    return out


def main():
    servers = h.bootstrap()
    wdir = h.work_dir()
    prefix = h.unique_prefix("ks")
    rng = np.random.default_rng(23)
    workers = [h.Worker(servers, prefix, f"ks-w{i}", wdir).start() for i in range(2)]
    try:
        h.wait_assigned(workers)
        a = rng.uniform(-1, 1, (300, 200)).astype(np.float32)
        b = rng.uniform(-1, 1, (200, 260)).astype(np.float32)
        pa, pb = os.path.join(wdir, "a.npy"), os.path.join(wdir, "b.npy")
        np.save(pa, a)
        np.save(pb, b)

        # 1. k-split, f32: four splits a tile, added in order
        outs = []
        for run in range(2):
            pc = os.path.join(wdir, f"c-split{run}.npy")
            rc, fig, out, err = h.submit(servers, prefix, "--a", pa, "--b", pb, "--out", pc,
                                         "--block", "64x64x64", "--verify")
            h.check(rc == 0, f"k-split: submit failed ({rc}):\n{out}\n{err}")
            h.check(fig["tasks"] == 25 * 4 and fig["applied"] == 100, f"k-split: {fig}")
            h.check(fig.get("verify_differ") == 0, f"k-split: --verify: {out}")
            h.check("k in 4 splits of 64" in err, f"k-split: the job line:\n{err}")
            m = F32_RE.search(out)
            h.check(m, f"k-split: no difference from the f32 product reported:\n{out}")
            c = np.load(pc)
            e, tol = close(c, a, b, "k-split")
            h.check(float(m[1]) <= tol, f"k-split: |C - C_f32| = {m[1]} > {tol:.3g}")
            outs.append(c)
        h.check(outs[0].tobytes() == outs[1].tobytes(),
                "k-split: two runs of the same job gave different bits")
        h.say(f"k-split: 100 tasks, bit-exact to the single-node splits and across runs; "
              f"max |C - A@B| = {e:.3g}, |C - C_f32| = {m[1]}")

        # 2. f16 operands
        job = f"f16-{os.getpid()}"
        pc = os.path.join(wdir, "c-f16.npy")
        rc, fig, out, err = h.submit(servers, prefix, "--a", pa, "--b", pb, "--out", pc,
                                     "--block", "64x64", "--dtype", "f16", "--verify",
                                     "--job-id", job, "--no-panel-reuse")
        h.check(rc == 0, f"f16: submit failed ({rc}):\n{out}\n{err}")
        h.check(fig.get("verify_differ") == 0, f"f16: --verify: {out}")
        c = np.load(pc)
        a16, b16 = a.astype(np.float16).astype(np.float32), b.astype(np.float16).astype(np.float32)
        e, tol = close(c, a16, b16, "f16")
        d32 = float(np.abs(c.astype(np.float64) - a.astype(np.float64) @ b).max())
        m = F32_RE.search(out)
        h.check(m and abs(float(m[1]) - d32) <= tol, f"f16: reported {m and m[1]}, numpy {d32}")
        ins = task_tensors(servers, prefix, job)
        h.check(len(ins) == 50 and all(t.dtype == "f16" for t in ins), "f16: panels' dtype")
        h.check(all(t.nbytes == t.shape[0] * t.shape[1] * 2 for t in ins), "f16: panels' bytes")
        ratio = fig["bytes_sent"] / fig["bytes_plain"]
        h.check(0.5 <= ratio < 0.52, f"f16: {ratio:.3f} of the plain scheme's f32 bytes sent")
        h.say(f"f16: panels of 2 bytes a value; max |C - A16@B16| = {e:.3g}, "
              f"|C - A@B| = {d32:.3g} (reported {m[1]})")

        # 3. q8_0 operands, k in splits of 96
        a3 = rng.uniform(-1, 1, (150, 256)).astype(np.float32)
        b3 = rng.uniform(-1, 1, (256, 100)).astype(np.float32)
        np.save(pa, a3)
        np.save(pb, b3)
        job = f"q8-{os.getpid()}"
        pc = os.path.join(wdir, "c-q8.npy")
        rc, fig, out, err = h.submit(servers, prefix, "--a", pa, "--b", pb, "--out", pc,
                                     "--block", "64x64x96", "--dtype", "q8_0", "--verify",
                                     "--job-id", job)
        h.check(rc == 0, f"q8_0: submit failed ({rc}):\n{out}\n{err}")
        h.check(fig["tasks"] == 3 * 2 * 3, f"q8_0: {fig}")
        h.check(fig.get("verify_differ") == 0, f"q8_0: --verify: {out}")
        c = np.load(pc)
        aq, bq = q8_0(a3), q8_0(np.ascontiguousarray(b3.T)).T
        e, tol = close(c, aq, bq, "q8_0")
        ins = task_tensors(servers, prefix, job)
        h.check(ins and all(t.dtype == "q8_0" and t.shape[1] in (96, 64) and
                            t.nbytes == t.shape[0] * t.shape[1] // 32 * 34 for t in ins),
                "q8_0: panels' dtype and bytes")
        d32 = float(np.abs(c.astype(np.float64) - a3.astype(np.float64) @ b3).max())
        ratio = fig["bytes_sent"] / fig["bytes_plain"]  # panels reused as well
        h.check(ratio < 34 / 128, f"q8_0: {ratio:.3f} of the f32 bytes sent, expected < 34/128")
        h.check(fig["bytes_sent"] == h.job_bytes(servers, prefix + "tasks", job),
                "q8_0: bytes sent differ from the tasks topic's")
        h.say(f"q8_0: panels of 34 bytes per 32 values in k-splits of 96 ({ratio:.3f}x the f32 "
              f"bytes); max |C - Aq@Bq| = {e:.3g} (tolerance {tol:.3g}), |C - A@B| = {d32:.3g}")
    finally:
        codes = [w.stop() for w in workers]
    h.check(codes == [0, 0], f"workers' exit codes {codes}")
    h.say("passed")


if __name__ == "__main__":
    main()
