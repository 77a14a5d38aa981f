#!/usr/bin/env python3
"""`looptune submit tune` on the real broker: `looptune tune` over the workers
of a host class, its configurations on the config store's topic.

A stories260K-shaped random-weight model (model-gen, 1.2 MB); budget 2.

1. Two workers of this host's class (--kinds tune) and one that pretends to
   be of another (--host-class): the job's every key has exactly one record
   on <prefix>configs (read here with confluent-kafka, decoded from the
   .proto), keyed kernel|shape|host class, the host class this host's; the
   keys are the ones local `looptune tune` stores for the same model and
   threads; every configuration parses back with the library (a store file
   made of them warm-starts `looptune run` with each one, none refused); the
   job's tasks are on the class's topic (none on the common tasks topic);
   the worker of the other class was alive and answered no task; `looptune
   jobs` lists the job, done.
2. --resume of the finished job: every key is found done on the results
   topic, no task is sent again.
3. A task naming a missing model (--remote-model): FAILED results naming the
   file, a dead letter after 2 attempts, the job's one-line error, exit 1.
4. A worker of both kinds of topic (--kinds noop,tune, --models-dir): a noop
   job counts it once (its tune loop, on the class's topic, is no worker of
   the common one); the model found in the folder by its file name, the
   results from its tune loop (ID/tune); then another file under that name
   (another seed: the same size, another CRC32C of its first MiB) is refused
   as not the job's model.
5. No worker of the host class asked for: one line saying so, exit 1."""
import os
import re
import shutil
import subprocess

import dist_harness as h


def run(*args, timeout=300):
    return subprocess.run([h.binary(), *args], capture_output=True, text=True, errors="replace",
                          timeout=timeout)


def submit_tune(servers, prefix, *args, timeout=300):
    return run("submit", "tune", "--brokers", servers, "--topic-prefix", prefix, "--budget", "2",
               "-t", "2", "--worker-timeout", "60", *args, timeout=timeout)


def last_error(p):
    lines = [l for l in p.stderr.splitlines() if l.startswith("looptune submit tune:")]
    h.check(len(lines) == 1, f"expected one error line, got:\n{p.stderr}")
    return lines[0]


def read_store(path):
    with open(path) as f:
        return [l.split("\t") for l in f.read().splitlines() if l and not l.startswith("#")]


def job_id(p):
    m = re.search(r"^job (\S+): (\d+) keys, (\d+) configurations", p.stdout, re.M)
    h.check(m, f"no job line:\n{p.stdout}\n{p.stderr}")
    return m.group(1), int(m.group(2)), int(m.group(3))


def main():
    servers = h.bootstrap()
    wdir = h.work_dir()
    prefix = h.unique_prefix("tune")
    pb2 = h.proto()
    model = os.path.join(wdir, "s260k.gguf")
    p = run("model-gen", "--preset", "stories260K", "-o", model)
    h.check(p.returncode == 0, f"model-gen: {p.stderr}")

    # what the local tuner stores for this model, and this host's class
    local = os.path.join(wdir, "local.tsv")
    p = run("tune", "-m", model, "--budget", "2", "-t", "2", "--config-store", local)
    h.check(p.returncode == 0, f"local tune: {p.stderr[-500:]}")
    local_keys = {(e[0], e[1]) for e in read_store(local)}
    hosts = {e[2] for e in read_store(local)}
    h.check(len(hosts) == 1 and len(local_keys) >= 8, f"local store: {hosts} {local_keys}")
    host = hosts.pop()
    safe = re.sub(r"[^A-Za-z0-9-]", "_", host)
    fake = "Fake-CPU:avx2:99c"

    workers = [h.Worker(servers, prefix, f"tw{i}", wdir, ["--kinds", "tune"]).start()
               for i in range(2)]
    other = h.Worker(servers, prefix, "tw-other", wdir,
                     ["--kinds", "tune", "--host-class", fake]).start()
    try:
        # 1. the job
        p = submit_tune(servers, prefix, "-m", model, "--config-store", "kafka")
        h.check(p.returncode == 0, f"submit tune failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
        job, n_keys, n_configs = job_id(p)
        h.check(n_keys == n_configs == len(local_keys), f"{n_keys} keys, {n_configs} configs, "
                f"local tune has {len(local_keys)}:\n{p.stdout}")
        h.check(f"on host class {host} via {prefix}tasks.{safe}" in p.stderr, p.stderr)
        h.check(re.search(r"keys done, 2 workers of .* alive", p.stderr), p.stderr)
        h.check(f"written to {prefix}configs" in p.stderr, p.stderr[-300:])

        configs = {}
        for _, _, key, value in h.records(servers, prefix + "configs"):
            env = h.decode(value)
            h.check(env.WhichOneof("payload") == "config", f"not a config: {env}")
            c = env.config
            h.check(key.decode() == f"{c.kernel}|{c.shape}|{c.host_class}", f"key {key}")
            configs.setdefault((c.kernel, c.shape, c.host_class), []).append(c)
        h.check(all(len(v) == 1 for v in configs.values()),
                f"keys with more than one record: {[k for k, v in configs.items() if len(v) > 1]}")
        h.check({k[2] for k in configs} == {host}, f"host classes: {({k[2] for k in configs})}")
        h.check({(k[0], k[1]) for k in configs} == local_keys,
                f"distributed keys differ from local tune's:\n{sorted(configs)}\n"
                f"{sorted(local_keys)}")
        h.check(all(c[0].stats.trials >= 1 and c[0].stats.speedup > 0 for c in configs.values()),
                "stats")

        # every configuration parses back with the library: a store file warm-starts run
        store = os.path.join(wdir, "dist.tsv")
        with open(store, "w") as f:
            f.write("# looptune configs v1\n")
            for (kernel, shape, hc), (c,) in sorted(configs.items()):
                params = ",".join(f"{q.name}={q.value}" for q in c.params)
                f.write(f"{kernel}\t{shape}\t{hc}\t{params}\t{c.stats.median_ns}\t"
                        f"{c.stats.samples}\t{c.stats.speedup}\n")
        r = run("run", "-m", model, "-p", "Once", "-n", "2", "-t", "2", "--print-ids",
                "--config-store", store)
        h.check(r.returncode == 0, f"run: {r.stderr[-400:]}")
        m = re.search(r"warm start: (\d+) configurations", r.stderr)
        h.check(m and int(m.group(1)) == len(configs) and "refused" not in r.stderr
                and "skipped" not in r.stderr, f"warm start from the job's configs:\n{r.stderr}")

        # routed by host class: the job's tasks on the class's topic only
        tasks_class = [h.decode(v).task for _, _, k, v in h.records(servers, f"{prefix}tasks.{safe}")
                       if k.startswith(f"{job}/".encode())]
        h.check(len(tasks_class) == n_keys and all(t.kind == "tune" for t in tasks_class),
                f"{len(tasks_class)} tasks of the job on {prefix}tasks.{safe}")
        spec = pb2.TuneSpec()
        spec.ParseFromString(tasks_class[0].spec)
        h.check(spec.host_class == host and spec.model == os.path.realpath(model)
                and spec.model_bytes == os.path.getsize(model), f"spec: {spec}")
        common = [k for _, _, k, _ in h.records(servers, prefix + "tasks")
                  if k.startswith(f"{job}/".encode())]
        h.check(not common, f"{len(common)} tasks of the job on the common tasks topic")
        results = [h.decode(v) for _, _, _, v in h.records(servers, prefix + "results")]
        ours = [e.result for e in results if e.WhichOneof("payload") == "result"
                and e.result.job_id == job]
        h.check({r.worker for r in ours} <= {"tw0", "tw1"} and len(ours) == n_keys,
                f"results: {[(r.worker, r.task_index) for r in ours]}")
        beats = [e.heartbeat for e in results if e.WhichOneof("payload") == "heartbeat"
                 and e.heartbeat.worker == "tw-other"]
        h.check(beats and all(b.tasks_topic == prefix + "tasks.Fake-CPU_avx2_99c"
                              for b in beats), f"the other class's worker: {beats[:1]}")
        h.check(not [r for e in results if e.WhichOneof("payload") == "result"
                     for r in [e.result] if r.worker == "tw-other"],
                "the worker of another host class answered a task")
        rows, alive = h.jobs(servers, prefix, "--job", job)
        r0 = rows.get(job)
        h.check(r0 and r0["kind"] == "tune" and r0["state"] == "done" and r0["done"] == n_keys,
                f"looptune jobs: {r0}")
        split = {w: sum(r.worker == w for r in ours) for w in ("tw0", "tw1")}
        h.say(f"job {job}: {n_keys} keys tuned on 2 workers of {host} ({split}), one record "
              f"each on {prefix}configs, the same keys as local tune, none on {fake}")

        # 2. resume the finished job: nothing to send
        p = submit_tune(servers, prefix, "-m", model, "--config-store", store, "--job-id", job,
                        "--resume")
        h.check(p.returncode == 0, f"resume: {p.returncode}\n{p.stdout}\n{p.stderr}")
        h.check(f"resumed: {n_keys} of {n_keys} keys done" in p.stderr, p.stderr)
        again = [k for _, _, k, _ in h.records(servers, f"{prefix}tasks.{safe}")
                 if k.startswith(f"{job}/".encode())]
        h.check(len(again) == n_keys, f"resume sent tasks again: {len(again)}")
        h.say("resume of a finished job: every key found done, nothing sent")

        # 3. a missing model
        bad = f"missing-{os.getpid()}"
        missing = "/nonexistent/models/s260k.gguf"
        p = submit_tune(servers, prefix, "-m", model, "--config-store",
                        os.path.join(wdir, "none.tsv"), "--remote-model", missing,
                        "--max-attempts", "2", "--job-id", bad)
        h.check(p.returncode == 1, f"missing model: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
        err = last_error(p)
        h.check(f"task dead-lettered to {prefix}tasks.dead" in err and "failed 2 attempts" in err
                and f"model {missing} not found on this worker" in err, err)
        h.check(not os.path.exists(os.path.join(wdir, "none.tsv")), "configurations written")
        failed = [e.result for e in (h.decode(v) for _, _, _, v in h.records(servers, prefix +
                                                                             "results"))
                  if e.WhichOneof("payload") == "result" and e.result.job_id == bad]
        h.check(failed and all(r.status == pb2.STATUS_FAILED and missing in r.error
                               for r in failed), f"results: {failed[:2]}")
        dead = [h.decode(v).dead_letter for _, _, k, v in h.records(servers, prefix + "tasks.dead")
                if k.startswith(f"{bad}/".encode())]
        h.check(dead and all(len(d.errors) == 2 and d.task.kind == "tune" for d in dead),
                f"dead letters: {dead[:1]}")
        h.say(f"missing model: {len(failed)} FAILED results, {len(dead)} dead letters: {err[:90]}")
    finally:
        codes = [w.stop() for w in workers + [other]]
    h.check(codes == [0, 0, 0], f"workers did not leave cleanly: {codes}")

    # 4. --models-dir: the file by its name; another file under that name is refused
    prefix2 = h.unique_prefix("tunedir")
    mdir = os.path.join(wdir, "models")
    os.makedirs(mdir)
    shutil.copy(model, os.path.join(mdir, "s260k.gguf"))
    w = h.Worker(servers, prefix2, "tw-dir", wdir, ["--kinds", "noop,tune", "--models-dir", mdir])
    w.start()
    try:
        p = subprocess.run([h.binary(), "submit", "noop", "--brokers", servers, "--topic-prefix",
                            prefix2, "--tasks", "3", "--worker-timeout", "60"],
                           capture_output=True, text=True, timeout=120)
        h.check(p.returncode == 0, f"submit noop: {p.stdout}\n{p.stderr}")
        fig = h.parse_job(p.stdout)
        h.check(fig["applied"] == 3 and fig["workers"] == 1, f"noop beside tune: {fig}")
        p = submit_tune(servers, prefix2, "-m", model, "--config-store",
                        os.path.join(wdir, "dir.tsv"), "--remote-model", "/elsewhere/s260k.gguf")
        h.check(p.returncode == 0, f"--models-dir: {p.returncode}\n{p.stdout}\n{p.stderr}")
        h.check(len(read_store(os.path.join(wdir, "dir.tsv"))) == len(local_keys), "dir.tsv")
        h.check(re.search(r"^\S+ +\S+ .* tw-dir/tune ", p.stdout, re.M), p.stdout)
        p = run("model-gen", "--preset", "stories260K", "--seed", "2", "-o",
                os.path.join(mdir, "s260k.gguf"))
        h.check(p.returncode == 0, p.stderr)
        p = submit_tune(servers, prefix2, "-m", model, "--config-store",
                        os.path.join(wdir, "dir2.tsv"), "--max-attempts", "1")
        h.check(p.returncode == 1, f"another file: exit {p.returncode}\n{p.stderr}")
        err = last_error(p)
        h.check("is not the job's" in err and "CRC32C" in err, err)
        h.say(f"--models-dir: found by name; another file refused: {err[:100]}")

        # 5. no worker of the host class
        p = submit_tune(servers, prefix2, "-m", model, "--config-store",
                        os.path.join(wdir, "n.tsv"), "--host-class", "Nobody:none:1c",
                        "--worker-timeout", "3")
        h.check(p.returncode == 1, f"no worker: exit {p.returncode}\n{p.stderr}")
        err = last_error(p)
        h.check("no worker of host class Nobody:none:1c alive" in err, err)
        h.say(f"no worker of the class: {err[:90]}")
    finally:
        code = w.stop()
    h.check(code == 0, f"worker did not leave cleanly: {code}")
    h.say("passed")


if __name__ == "__main__":
    main()
