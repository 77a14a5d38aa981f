#!/usr/bin/env python3
"""A distributed matmul on the real broker with two worker processes.

1. C = A B for numpy-made A (300x200) and B (200x260) in tiles of 64x64 (25
   tasks, edge tiles included): C.npy equals numpy's A @ B (float64) within
   |C - ref| <= 1e-6 * K * max|A| * max|B| per element (f32 rounding of K
   products), and --verify says it equals looptune's single-node product bit
   for bit; every task is applied once, no duplicate.
2. Oversized tensors: A's row panels of 64 x 4500 f32 (1.15 MB, over Kafka's
   ~1 MB record limit) travel in 3 chunks each, once a row (panel reuse: the
   row's other task references it); the tasks topic is read back
   here: every record is below 1 MB, the chunks' CRC32C is recomputed, and
   task 0's panel reassembled from them equals A's rows byte for byte.
3. A result tile of 600x600 f32 (1.44 MB) is chunked by the worker and
   reassembled by the coordinator: C correct again.
4. `looptune jobs` lists the three jobs, done, each task once, and the two
   workers alive.
5. `submit noop`: six 600 KB payloads (chunked) come back unchanged from the
   noop kind (the coordinator compares them), two tasks in flight.
Needs the broker (ctest's kafka_broker fixture), numpy, protobuf,
grpcio-tools, confluent-kafka."""
import math
import os
import subprocess

import numpy as np

import dist_harness as h


def close_to_numpy(c, a, b, what):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    k = a.shape[1]
    tol = 1e-6 * k * float(np.abs(a).max()) * float(np.abs(b).max())
    err = float(np.abs(c.astype(np.float64) - ref).max())
    h.check(c.shape == ref.shape, f"{what}: C is {c.shape}, expected {ref.shape}")
    h.check(err <= tol, f"{what}: max |C - A@B| = {err:.3g} > tolerance {tol:.3g}")
    h.say(f"{what}: max |C - A@B| = {err:.3g} (tolerance {tol:.3g})")


def main():
    servers = h.bootstrap()
    wdir = h.work_dir()
    prefix = h.unique_prefix("mm")
    rng = np.random.default_rng(7)
    workers = [h.Worker(servers, prefix, f"mm-w{i}", wdir).start() for i in range(2)]
    try:
        h.wait_assigned(workers)  # both share the partitions before the first job starts
        # 1. two workers, 25 tiles
        a = rng.uniform(-1, 1, (300, 200)).astype(np.float32)
        b = rng.uniform(-1, 1, (200, 260)).astype(np.float32)
        pa, pb, pc = (os.path.join(wdir, f) for f in ("a.npy", "b.npy", "c.npy"))
        np.save(pa, a)
        np.save(pb, b)
        rc, fig, out, err = h.submit(servers, prefix, "--a", pa, "--b", pb, "--out", pc,
                                     "--block", "64x64", "--verify")
        h.check(rc == 0, f"submit failed ({rc}):\n{out}\n{err}")
        h.check(fig["tasks"] == 25 and fig["applied"] == 25, f"tasks/applied: {fig}")
        h.check(fig["duplicates"] == 0 and fig["retries"] == 0 and fig["dead"] == 0, f"{fig}")
        h.check(fig["workers"] == 2, f"both workers should have been heard from: {fig}")
        h.check(fig.get("verify_differ") == 0 and fig["verify_diff"] == 0.0,
                f"--verify: the distributed C differs from the single-node one: {out}")
        h.check("workers alive" in err, f"no progress line on stderr:\n{err}")
        close_to_numpy(np.load(pc), a, b, "two workers, 25 tiles")
        first_job = fig["job"]
        h.say(f"job 1: {fig['tasks']} tasks in {fig['seconds']:.2f} s, verify bit-exact")

        # 2. oversized inputs: chunked, checked on the topic
        a2 = rng.uniform(-1, 1, (128, 4500)).astype(np.float32)
        b2 = rng.uniform(-1, 1, (4500, 128)).astype(np.float32)
        np.save(pa, a2)
        np.save(pb, b2)
        rc, fig, out, err = h.submit(servers, prefix, "--a", pa, "--b", pb, "--out", pc,
                                     "--block", "64x64", "--job-id", "big-inputs")
        h.check(rc == 0, f"submit (oversized inputs) failed ({rc}):\n{out}\n{err}")
        panel = 64 * 4500 * 4
        per = math.ceil(panel / (512 * 1024))
        h.check(per == 3, "the test's arithmetic")
        # panels by rows: A's row panel with the first task of each of the 2
        # rows, B's column panel with every one of the 4 tasks (each row has
        # a partition of its own: no B panel is there twice)
        want = (2 + 4) * per
        h.check(fig["chunks"] == want, f"chunks sent: {fig['chunks']}, expected {want}")
        close_to_numpy(np.load(pc), a2, b2, "oversized inputs")
        recs = h.records(servers, prefix + "tasks")
        h.check(recs, "nothing on the tasks topic")
        h.check(max(len(v) for _, _, _, v in recs) < 1_000_000,
                "a record on the tasks topic is over 1 MB")
        chunks, task0 = {}, None
        for _, _, key, value in recs:
            if key != b"big-inputs/0":
                continue
            env = h.decode(value)
            kind = env.WhichOneof("payload")
            if kind == "chunk":
                h.check(h.crc32c(env.chunk.data) == env.chunk.crc32c,
                        f"chunk {env.chunk.index}: CRC32C differs from ours")
                chunks.setdefault(env.chunk.blob_id, {})[env.chunk.index] = env.chunk
            elif kind == "task":
                task0 = env.task
        h.check(task0 is not None, "task 0 is not on the tasks topic")
        ta = next(t for t in task0.inputs if t.name == "a")
        h.check(ta.chunk_count == per and list(ta.shape) == [64, 4500], f"input a: {ta}")
        got = chunks.get(ta.blob_id, {})
        h.check(sorted(got) == list(range(per)), f"chunks of a: {sorted(got)}")
        whole = b"".join(got[i].data for i in range(per))
        h.check(whole == a2[:64].tobytes(), "task 0's a, reassembled here, is not A's rows")
        h.check(h.crc32c(whole) == ta.crc32c, "the whole tensor's CRC32C differs from ours")
        sent = sum(len(v) for _, _, k, v in recs if k and k.startswith(b"big-inputs/"))
        got = h.job_bytes(servers, prefix + "results", "big-inputs")
        h.check(fig["bytes_sent"] == sent and fig["bytes_received"] == got,
                f"bytes over Kafka: the coordinator says {fig['bytes_sent']} sent, "
                f"{fig['bytes_received']} received; the topics hold {sent} and {got}")
        h.check(fig["bytes_plain"] == 4 * 4500 * (128 * 2 + 128 * 2), f"plain: {fig}")
        h.say(f"job 2: {fig['chunks']} chunks of <= 512 KiB, task 0's panel reassembled in Python; "
              f"{sent} bytes on the tasks topic, {got} on the results topic, as reported")

        # 3. an oversized result tile: chunked by the worker
        a3 = rng.uniform(-1, 1, (600, 8)).astype(np.float32)
        b3 = rng.uniform(-1, 1, (8, 600)).astype(np.float32)
        np.save(pa, a3)
        np.save(pb, b3)
        rc, fig, out, err = h.submit(servers, prefix, "--a", pa, "--b", pb, "--out", pc,
                                     "--block", "600x600", "--job-id", "big-result", "--verify")
        h.check(rc == 0, f"submit (oversized result) failed ({rc}):\n{out}\n{err}")
        h.check(fig["tasks"] == 1 and fig["applied"] == 1, f"{fig}")
        h.check(fig.get("verify_differ") == 0, f"--verify: {out}")
        close_to_numpy(np.load(pc), a3, b3, "oversized result")
        res = [h.decode(v) for _, _, k, v in h.records(servers, prefix + "results")
               if k == b"big-result/0"]
        n_chunks = sum(e.WhichOneof("payload") == "chunk" for e in res)
        h.check(n_chunks == math.ceil(600 * 600 * 4 / (512 * 1024)),
                f"result chunks on the results topic: {n_chunks}")
        h.say(f"job 3: a 600x600 result tile in {n_chunks} chunks")

        # 4. looptune jobs: the three jobs as the topics tell them, the two workers alive
        rows, alive = h.jobs(servers, prefix)
        h.check(alive == 2, f"looptune jobs: {alive} workers alive, expected 2")
        want = {first_job: 25, "big-inputs": 4, "big-result": 1}
        for jid, n in want.items():
            r = rows.get(jid)
            h.check(r and r["kind"] == "matmul" and r["state"] == "done" and r["tasks"] == n
                    and r["done"] == n and r["extra"] == 0 and r["failed"] == 0
                    and r["attempts"] == 1, f"looptune jobs: {jid}: {r}")
        rows, _ = h.jobs(servers, prefix, "--job", "big-result")
        h.check(list(rows) == ["big-result"], f"looptune jobs --job: {rows}")
        h.say("looptune jobs: the three jobs done, 2 workers alive")

        # 5. the noop kind: payloads (chunked: 600 KB) sent back unchanged, two in flight
        p = subprocess.run([h.binary(), "submit", "noop", "--brokers", servers, "--topic-prefix",
                            prefix, "--tasks", "6", "--bytes", "600000", "--window", "2",
                            "--job-id", "noop-echo"], capture_output=True, text=True, timeout=120)
        h.check(p.returncode == 0, f"submit noop failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
        fig = h.parse_job(p.stdout)
        h.check(fig["applied"] == 6 and fig["retries"] == 0 and fig["chunks"] == 6 * 2,
                f"noop: {fig}")
        h.check("round trip: median" in p.stdout, f"noop: no round trip figures:\n{p.stdout}")
        h.say(f"noop: 6 echoes of 600 KB in {fig['seconds']:.2f} s")
    finally:
        codes = [w.stop() for w in workers]
    h.check(codes == [0, 0], f"workers did not leave cleanly on SIGTERM: {codes}")
    for w in workers:
        h.check("tasks done" in w.text(), f"worker {w.wid} printed no summary")
    h.say("passed")


if __name__ == "__main__":
    main()
