#!/usr/bin/env python3
"""Panel reuse on the real broker: a tile row's panel of A travels once, the
row's other tasks reference it by id, and the bytes over Kafka say so.

1. The same job with panel reuse (by rows, then by columns) and with
   --no-panel-reuse (the plain tile scheme) on two workers: the three C are
   the same bits, equal to numpy's A @ B within f32 rounding. Read back from
   the tasks topic here: every tile row's records are on one partition, every
   panel reference comes after a record that carried that panel's bytes (same
   id, same CRC32C) on the same partition, and the coordinator's byte counts
   of both topics equal the sums of the records' sizes; reuse sends fewer
   bytes than the plain scheme, which sends its formula, 4 k (m tiles_n +
   n tiles_m), plus the envelopes.
2. A worker killed (SIGKILL) in the middle of a job and restarted under its
   instance id: its panel cache is empty, so the tasks that reference panels
   it had are answered NEED_PANEL and sent again with their panels; the job
   completes exactly once (one committed OK result per task on the results
   topic), every NEED_PANEL answer on the topic was acted on (the tasks
   topic holds tasks + resends task records), and C is the same bits as
   before.
3. A worker whose panel cache (--panel-cache-mb 1) cannot hold one panel:
   B's panels are not referenced (they would not fit), every reference to
   A's misses, and the job still completes, each miss's task carrying its
   panels the third time at the latest.
Needs the broker (ctest's kafka_broker fixture), numpy, protobuf,
grpcio-tools, confluent-kafka."""
import os
import re
import subprocess
import time

import numpy as np

import dist_harness as h


def check_topic(servers, prefix, job, fig, tiles_n, by):
    """The tasks topic's records of job: rows (or columns) on one partition
    each, references after their panel's bytes on that partition, and the
    byte counts the coordinator reported."""
    recs = sorted(r for r in h.records(servers, prefix + "tasks")
                  if r[2] and r[2].startswith(job.encode() + b"/"))
    h.check(sum(len(v) for *_, v in recs) == fig["bytes_sent"],
            f"{job}: bytes on the tasks topic differ from the {fig['bytes_sent']} reported")
    h.check(h.job_bytes(servers, prefix + "results", job) == fig["bytes_received"],
            f"{job}: bytes on the results topic differ from the {fig['bytes_received']} reported")
    line_part, carried, refs = {}, {}, 0
    for part, _, _, value in recs:  # in offset order within each partition
        env = h.decode(value)
        if env.WhichOneof("payload") != "task":
            continue
        t = env.task
        params = {p.name: p.value for p in t.params}
        line = params["row0"] if by == "rows" else params["col0"]
        h.check(line_part.setdefault(line, part) == part,
                f"{job}: tile {by[:-1]} {line} on partitions {line_part[line]} and {part}")
        for x in t.inputs:
            if x.panel_ref:
                refs += 1
                h.check(carried.get((part, x.panel_id)) == x.crc32c and not x.data and
                        not x.chunk_count,
                        f"{job}: task {t.task_index} references panel {x.panel_id:016x} "
                        f"not carried to partition {part} before it")
            elif x.panel_id:
                carried[(part, x.panel_id)] = x.crc32c
    h.check(refs == fig["panel_refs"], f"{job}: {refs} references on the topic, "
                                       f"{fig['panel_refs']} reported")
    return refs


def main():
    servers = h.bootstrap()
    wdir = h.work_dir()
    prefix = h.unique_prefix("panels")
    rng = np.random.default_rng(31)
    a = rng.uniform(-1, 1, (384, 320)).astype(np.float32)
    b = rng.uniform(-1, 1, (320, 448)).astype(np.float32)
    pa, pb = os.path.join(wdir, "a.npy"), os.path.join(wdir, "b.npy")
    np.save(pa, a)
    np.save(pb, b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-6 * 320
    tiles_n = 448 // 64

    # 1. reuse by rows, by columns, and the plain tile scheme
    workers = [h.Worker(servers, prefix, f"p-w{i}", wdir).start() for i in range(2)]
    cs, figs = {}, {}
    try:
        h.wait_assigned(workers)
        for mode, extra in (("rows", ["--panel-by", "rows"]), ("cols", ["--panel-by", "cols"]),
                            ("plain", ["--no-panel-reuse"])):
            job = f"pan-{mode}-{os.getpid()}"
            pc = os.path.join(wdir, f"c-{mode}.npy")
            rc, fig, out, err = h.submit(servers, prefix, "--a", pa, "--b", pb, "--out", pc,
                                         "--block", "64x64", "--job-id", job, *extra)
            h.check(rc == 0, f"{mode}: submit failed ({rc}):\n{out}\n{err}")
            h.check(fig["applied"] == fig["tasks"] == 42 and fig["duplicates"] == 0, f"{fig}")
            cs[mode], figs[mode] = np.load(pc), fig
            e = float(np.abs(cs[mode] - ref).max())
            h.check(e <= tol, f"{mode}: max |C - A@B| = {e:.3g} > {tol:.3g}")
            if mode == "plain":
                h.check("panel_by" not in fig, f"plain: panels reported: {out}")
                h.check(fig["bytes_plain"] == 4 * 320 * (384 * 7 + 448 * 6), f"{fig}")
                over = fig["bytes_sent"] / fig["bytes_plain"]
                h.check(1.0 <= over < 1.01, f"plain: {over:.4f}x its formula")
            else:
                h.check(fig["panel_by"] == mode and fig["need_panel"] == 0, f"{mode}: {fig}")
                check_topic(servers, prefix, job, fig, tiles_n, mode)
            h.say(f"{mode}: {fig['bytes_sent']} bytes sent, "
                  f"{fig['bytes_sent'] / fig['bytes_plain']:.3f}x the plain tile scheme's "
                  f"{fig['bytes_plain']}; {fig.get('panels_sent', '-')} panels carried, "
                  f"{fig.get('panel_refs', '-')} referenced; max |C - A@B| = {e:.3g}")
        for mode in ("rows", "cols"):
            h.check(cs[mode].tobytes() == cs["plain"].tobytes(),
                    f"panels by {mode}: C differs from the plain scheme's")
            h.check(figs[mode]["bytes_sent"] < 0.75 * figs["plain"]["bytes_sent"],
                    f"{mode}: reuse saved too little: {figs[mode]['bytes_sent']}")
        h.say("reuse by rows and by columns: C bit-identical to the plain tile scheme's")
    finally:
        codes = [w.stop() for w in workers]
    h.check(codes == [0, 0], f"workers' exit codes {codes}")

    # 2. a worker killed mid-job and restarted: its panels are gone
    prefix2 = h.unique_prefix("panelkill")
    w = h.Worker(servers, prefix2, "pk-w0", wdir, ["--task-delay-ms", "100"]).start()
    job = f"pan-kill-{os.getpid()}"
    pc = os.path.join(wdir, "c-kill.npy")
    try:
        h.wait_assigned([w])
        sub = subprocess.Popen(h.submit_args(servers, prefix2, "--a", pa, "--b", pb, "--out", pc,
                                             "--block", "64x64", "--job-id", job, "--verify"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        done = 0
        for line in sub.stderr:  # progress every 2 s
            m = re.search(rf"job {job}: (\d+)/42 tasks", line)
            if m and int(m[1]) >= 3:
                done = int(m[1])
                break
        h.check(0 < done < 36, f"the job did not show progress mid-way ({done})")
        w.kill9()
        time.sleep(0.3)
        w.start()  # the same instance id: its partitions back, its cache empty
        out, err = sub.communicate(timeout=240)
    finally:
        if sub.poll() is None:
            sub.kill()
        code = w.stop()
    h.check(sub.returncode == 0, f"kill: submit failed ({sub.returncode}):\n{out}\n{err}")
    h.check(code == 0, f"kill: the restarted worker's exit code {code}")
    fig = h.parse_job(out)
    h.check(fig["applied"] == 42 and fig["duplicates"] == 0 and fig["retries"] == 0, f"{fig}")
    h.check(fig.get("verify_differ") == 0, f"kill: --verify: {out}")
    h.check(np.load(pc).tobytes() == cs["plain"].tobytes(), "kill: C differs")
    h.check(fig["panel_resends"] > 0, f"kill: no task needed its panels again: {fig}")
    ok, need = {}, 0
    for _, _, key, value in h.records(servers, prefix2 + "results"):
        env = h.decode(value)
        if env.WhichOneof("payload") == "result" and env.result.job_id == job:
            if env.result.status == 1:
                ok[env.result.task_index] = ok.get(env.result.task_index, 0) + 1
            elif env.result.status == 4:  # STATUS_NEED_PANEL
                need += 1
    h.check(sorted(ok) == list(range(42)) and set(ok.values()) == {1},
            f"kill: committed OK results per task: {ok}")
    h.check(need == fig["need_panel"] == fig["panel_resends"],
            f"kill: {need} NEED_PANEL answers on the topic, {fig['need_panel']} received, "
            f"{fig['panel_resends']} tasks sent again")
    tasks = [h.decode(v).task for _, _, k, v in h.records(servers, prefix2 + "tasks")
             if k and k.startswith(job.encode() + b"/") and h.decode(v).WhichOneof("payload") == "task"]
    h.check(len(tasks) == 42 + fig["panel_resends"],
            f"kill: {len(tasks)} task records for 42 tasks and {fig['panel_resends']} resends")
    h.check(all(t.attempt == 1 for t in tasks), "kill: a NEED_PANEL counted as an attempt")
    h.check(max(t.panel_resend for t in tasks) >= 1, "kill: no resend marked on the topic")
    h.say(f"kill: {done} tasks done before the kill; {need} NEED_PANEL answers, each task sent "
          f"again with its panels; one OK result per task; C the same bits")

    # 3. a panel cache too small for a panel
    prefix3 = h.unique_prefix("panelsmall")
    a3 = rng.uniform(-1, 1, (128, 4500)).astype(np.float32)  # panels of 64 x 4500: 1.15 MB
    b3 = rng.uniform(-1, 1, (4500, 192)).astype(np.float32)
    np.save(pa, a3)
    np.save(pb, b3)
    w = h.Worker(servers, prefix3, "ps-w0", wdir, ["--panel-cache-mb", "1"]).start()
    try:
        h.wait_assigned([w])
        pc = os.path.join(wdir, "c-small.npy")
        rc, fig, out, err = h.submit(servers, prefix3, "--a", pa, "--b", pb, "--out", pc,
                                     "--block", "64x64", "--verify")
        h.check(rc == 0, f"small cache: submit failed ({rc}):\n{out}\n{err}")
    finally:
        code = w.stop()
    h.check(code == 0, f"small cache: worker exit code {code}")
    h.check("B's column panels once a partition" not in err, f"small cache: B reused:\n{err}")
    h.check(fig["applied"] == 6 and fig.get("verify_differ") == 0, f"small cache: {fig}")
    h.check(fig["need_panel"] == fig["panel_resends"] > 0, f"small cache: {fig}")
    e = float(np.abs(np.load(pc) - a3.astype(np.float64) @ b3).max())
    h.check(e <= 1e-6 * 4500, f"small cache: max |C - A@B| = {e:.3g}")
    h.say(f"small cache: {fig['need_panel']} references missed, each task sent again; C correct")
    h.say("passed")


if __name__ == "__main__":
    main()
