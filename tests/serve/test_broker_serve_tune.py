#!/usr/bin/env python3
"""Online tuning of the batch regime while serving, on the real broker.

A small q8_0 model (dim 128, 4 layers, a vocabulary of 4096) is served by one `looptune serve --tune
online` worker (8 KV slots, so its batched decode steps are of the batch
regime) that starts from a deliberately bad configuration of every matvec
batch key (a config store file); a `looptune optimizer` process closes the
loop; a client keeps 8 greedy requests in flight for 30 seconds. The
test asserts what the loop did, never a speed:
  - the worker's run start on the telemetry topic lists the bad values for
    the :batch matvec keys, and its step windows are of the batch step key;
  - the optimizer ran trials: its records on the trials topic parse, and
    every study (and every control on the control topic) names a key that
    ends in ":batch";
  - the worker ran the candidates of the trials (its summary counts the steps
    that ran them), and what it changed for good is what the optimizer
    decided: every parameter its summary lists as changed ends at a value of a
    configuration the optimizer kept for that key (whether a candidate is
    kept depends on the machine's speed and noise, so the test asserts no
    count of changes; see the test of the closed loop for a run long enough
    to keep some);
  - every completion equals `looptune run --temp 0` on the same prompt, token
    for token (indices 0..n-1 once each, n = max_tokens), whatever trials ran
    meanwhile.
Needs the real broker of the ctest fixture (LT_KAFKA_BOOTSTRAP_FILE)."""
import os
import re
import subprocess
import time

import serve_client as sc
from serve_client import check, say
import dist_harness as h

BAD = "rows_per_task=4,unroll=1,k_block=256,prefetch=0,act_int16=1,act_int8=1,tok_chunk_kb=32"
SLOTS = 8
MAX_TOKENS = 160
SERVE_S = 30  # requests are sent for this long (some 15 trials at the pace seen)
PROMPTS = ["Once upon a time", "The little dog ran", "A cat sat on the mat",
           "There was a girl named Lily"]


def batch_key(key):
    """A key of the batch regime: "q8_0:288x768:batch", "q8_0:288x288:batch:ia=1,0,0"."""
    return "batch" in key.split(":")


def sh(args, timeout=300):
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    check(r.returncode == 0, f"{' '.join(args[:3])} failed ({r.returncode}): {r.stderr[-2000:]}")
    return r


def bad_store(binary, model, wdir):
    """A config store with every matvec batch key of model set to BAD."""
    keys = os.path.join(wdir, f"tune-keys-{os.getpid()}.tsv")
    bad = os.path.join(wdir, f"tune-bad-{os.getpid()}.tsv")
    sh([binary, "tune", "-m", model, "--regime", "batch", "--seqs", str(SLOTS), "--budget", "1",
        "-t", "2", "--config-store", keys])
    n = 0
    with open(keys) as f, open(bad, "w") as g:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if line.startswith("#"):
                g.write(line)
            elif fields[0] == "matvec" and fields[1].split(":")[2] == "batch":
                fields[3] = BAD
                g.write("\t".join(fields) + "\n")
                n += 1
    check(n >= 3, f"only {n} matvec batch keys in {keys}")
    return bad


def main():
    servers = h.bootstrap()
    prefix = h.unique_prefix("servetune")
    wdir = h.work_dir()
    binary = h.binary()
    pb = h.proto()
    # small enough that the portable path too runs thousands of batched steps a minute
    model = os.path.join(wdir, "servetune-d128-q8_0.gguf")
    if not os.path.exists(model):
        sh([binary, "model-gen", "--dim", "128", "--hidden", "512", "--layers", "4", "--heads",
            "4", "--vocab", "4096", "--seq-len", "256", "--dtype", "q8_0", "-o", model])
    bad = bad_store(binary, model, wdir)
    refs = {p: sc.run_reference(model, p, MAX_TOKENS, "--temp", "0", "--ignore-eos")[0]
            for p in PROMPTS}
    for p, ids in refs.items():
        check(len(ids) == MAX_TOKENS, f"reference of {p!r}: {len(ids)} tokens")

    opt = sc.Optimizer(servers, prefix, wdir, 3).start()
    srv = sc.Server(model, servers, prefix, "t1", wdir,
                    ["--max-batch", str(SLOTS), "--ctx", "256", "--threads", "2",
                     "--tune", "online", "--config-store", bad,
                     "--telemetry-drain-ms", "50"]).start()
    client = sc.Client(servers, prefix)
    try:
        sent = serve(client, srv)
    finally:
        code = srv.stop(timeout=60)
        client.close()
        opt.stop(timeout=60)
    log = srv.text()
    otext = opt.text()
    check(code == 0, f"serve exited with {code}:\n{log[-3000:]}")

    # (3) every stream is run's greedy output
    sc.check_streams(client, sent, refs)
    say(f"{len(sent)} completions equal looptune run's, token for token")

    # the run start and windows of the worker's batched steps
    run_start, windows = None, 0
    for *_, value in h.records(servers, prefix + "telemetry"):
        env = pb.Envelope.FromString(value)
        kind = env.WhichOneof("payload")
        if kind == "run_start":
            check(run_start is None, "two run starts from one worker")
            run_start = env.run_start
        elif kind == "kernel_window" and env.kernel_window.kernel == "step":
            # the whole steps' windows are of the batch regime's step key
            check(env.kernel_window.shape.endswith(":batch"),
                  f"a step window of key {env.kernel_window.shape}")
            windows += 1
    check(run_start is not None, "no run start on the telemetry topic")
    check(windows > 0, "no step window on the telemetry topic")
    bad_params = dict(kv.split("=") for kv in BAD.split(","))
    bad_keys = 0
    for k in run_start.kernels:
        cs = k.config_shape or k.shape
        if k.kernel == "matvec":
            check(batch_key(cs), f"run start: a matvec of key {cs}")
            # the parameters it lists (those that act on this ISA) at BAD's values
            params = {p.name: str(p.value) for p in k.params}
            bad_keys += all(params.get(n, v) == v for n, v in bad_params.items())
    check(bad_keys > 0, "the run start lists no matvec at the bad configuration")
    check(any(k.kernel == "threads" and (k.config_shape or k.shape).endswith(":batch")
              for k in run_start.kernels), "the run start lists no batch thread count")
    say(f"run start: {bad_keys} matvec nodes at the bad configuration; {windows} step windows of the batch key")

    # (1) the optimizer's trials, all of batch keys
    trials = 0
    for *_, value in h.records(servers, prefix + "trials"):
        env = pb.Envelope.FromString(value)
        check(env.WhichOneof("payload") == "trial", f"a {env.WhichOneof('payload')} on trials")
        study = env.trial.study_id
        check(study.startswith("tune:") and len(study[5:].split("|")) == 3,
              f"trial study {study!r}")
        check(batch_key(study[5:].split("|")[1]), f"a trial of {study!r}")
        trials += 1
    controls = 0
    for *_, value in h.records(servers, prefix + "control"):
        env = pb.Envelope.FromString(value)
        check(env.WhichOneof("payload") == "control", "not a control on the control topic")
        check(batch_key(env.control.shape), f"a control of {env.control.shape}")
        controls += 1
    m = re.search(r"online tuning of the batched steps: (\d+) trials, (\d+) changes applied, "
                  r"(\d+) controls rejected; (\d+) of (\d+) observed steps in trials, "
                  r"(\d+) ran candidates", log)
    check(m, f"no online tuning summary:\n{log[-3000:]}")
    check(int(m.group(1)) >= 1 and trials >= 1 and controls >= 1,
          f"no trial ({m.group(0)}; {trials} trial records, {controls} controls):\n"
          f"{otext[-3000:]}")
    check(int(m.group(3)) == 0, f"controls rejected: {m.group(0)}\n{log[-3000:]}")
    check(int(m.group(6)) > 0, f"no step ran a candidate: {m.group(0)}\n{log[-3000:]}")

    # (2) what the worker changed for good is what the optimizer kept
    bad_params = dict(kv.split("=") for kv in BAD.split(","))
    applied = sc.applied_changes(log)
    kept = sc.kept_configs(otext)
    check(int(m.group(2)) == 0 or applied, f"{m.group(0)} but no change listed:\n{log[-3000:]}")
    for key, changes in applied.items():
        check(batch_key(key), f"a change of {key}")
        final = dict(bad_params, **{n: b for n, (_, b) in changes.items()})
        for n, (a, _) in changes.items():
            check(a == bad_params.get(n, a), f"{key}: {n} changed from {a}, not from the bad value")
        check(any(all(final.get(n, v) == v for n, v in k.items()) for k in kept.get(key, [])),
              f"{key}: the worker ended at {final}, which the optimizer never kept nor holds "
              f"({kept.get(key)}):\n{log[-3000:]}\noptimizer:\n{otext[-3000:]}")
    say(f"{m.group(0)}; {trials} trial records, {controls} controls; the optimizer kept "
        f"{sum(map(len, kept.values()))} configurations of {len(kept)} keys, the worker changed "
        f"{len(applied)} keys, each to one of them")
    say("ok")


def serve(client, srv):
    """Keeps SLOTS greedy requests in flight for SERVE_S seconds, then lets them finish.
    Returns {request id: prompt}."""
    sc.wait_holding([srv])
    sent, live, k = {}, set(), 0
    t_end = time.time() + SERVE_S
    while True:
        while time.time() < t_end and len(live) < SLOTS:
            rid = f"r{k}"
            prompt = PROMPTS[k % len(PROMPTS)]
            client.request(rid, prompt=prompt, max_tokens=MAX_TOKENS, temp=0.0, ignore_eos=True)
            sent[rid] = prompt
            live.add(rid)
            k += 1
        client.poll(0.3)
        live = {r for r in live if client.streams[r].final is None}
        if time.time() >= t_end:
            break
        check(srv.proc.poll() is None, f"serve died:\n{srv.text()[-3000:]}")
    client.wait(sorted(live), timeout_s=120)
    return sent


if __name__ == "__main__":
    main()
