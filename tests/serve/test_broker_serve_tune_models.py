#!/usr/bin/env python3
"""Online tuning of every model a worker serves, on the real broker.

One `looptune serve --tune online` worker serves two small q8_0 models of
different shapes (so their batch keys differ), each with 4 KV slots; a
`looptune optimizer` closes the loop; a client keeps 4 greedy requests of
each model in flight for about 40 s. The test asserts what the loop did:
  - the telemetry topic has one run start per model, each naming its model
    and listing only batch keys of that model's shapes;
  - the optimizer's trials and controls reach both models' keys;
  - the worker's summary has a line per model with at least one trial and
    no rejected control;
  - every completion equals `looptune run --temp 0` on its model, token for
    token, whatever trials ran meanwhile.
Needs the real broker of the ctest fixture (LT_KAFKA_BOOTSTRAP_FILE)."""
import os
import re
import subprocess
import time

import serve_client as sc
from serve_client import check, say
import dist_harness as h

SLOTS = 4
MAX_TOKENS = 96
SERVE_S = 40
PROMPTS = ["Once upon a time", "The little dog ran", "A cat sat on the mat"]
SHAPES = {"small": ("96", "256"), "wide": ("128", "384")}  # name: (dim, hidden)


def sh(args, timeout=300):
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    check(r.returncode == 0, f"{' '.join(args[:3])} failed ({r.returncode}): {r.stderr[-2000:]}")
    return r


def dims(key):
    """The shape field of a key ("q8_0:96x256:batch" -> {96, 256})."""
    return {int(d) for d in key.split(":")[1].split("x") if d.isdigit()}


def main():
    servers = h.bootstrap()
    prefix = h.unique_prefix("servetunem")
    wdir = h.work_dir()
    binary = h.binary()
    pb = h.proto()
    models = {}
    for name, (dim, hidden) in SHAPES.items():
        models[name] = os.path.join(wdir, f"servetunem-{name}-q8_0.gguf")
        if not os.path.exists(models[name]):
            sh([binary, "model-gen", "--dim", dim, "--hidden", hidden, "--layers", "3", "--heads",
                "4", "--vocab", "2048", "--seq-len", "256", "--dtype", "q8_0", "-o",
                models[name]])
    refs = {(n, p): sc.run_reference(models[n], p, MAX_TOKENS, "--temp", "0", "--ignore-eos")[0]
            for n in models for p in PROMPTS}
    for k, ids in refs.items():
        check(len(ids) == MAX_TOKENS, f"reference of {k}: {len(ids)} tokens")

    opt = sc.Optimizer(servers, prefix, wdir, 5).start()
    srv = sc.Server(f"small={models['small']}", servers, prefix, "m1", wdir,
                    ["-m", f"wide={models['wide']}", "--max-batch", str(SLOTS), "--ctx", "256",
                     "--threads", "2", "--tune", "online", "--telemetry-drain-ms", "50"]).start()
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

    sc.check_streams(client, sent, refs)
    say(f"{len(sent)} completions of both models equal looptune run's, token for token")

    # a run start per model, each of its own shapes' batch keys
    starts = {}
    for *_, value in h.records(servers, prefix + "telemetry"):
        env = pb.Envelope.FromString(value)
        if env.WhichOneof("payload") == "run_start":
            rs = env.run_start
            check(rs.model not in starts, f"two run starts for model {rs.model!r}")
            starts[rs.model] = rs
    check(set(starts) == set(SHAPES), f"run starts for models {sorted(starts)}")
    run_of = {}
    for name, rs in starts.items():
        dim, hidden = (int(v) for v in SHAPES[name])
        for k in rs.kernels:
            cs = k.config_shape or k.shape
            if k.kernel == "matvec":
                check("batch" in cs.split(":"), f"{name}: a matvec of key {cs}")
                check(dims(cs) & {dim, hidden}, f"{name}: key {cs} of another model's shape")
        run_of[rs.run_id] = name
    say(f"run starts: {sorted(starts)}")

    # trials and controls reach both models
    controlled = set()
    for *_, value in h.records(servers, prefix + "control"):
        env = pb.Envelope.FromString(value)
        check(env.WhichOneof("payload") == "control", "not a control on the control topic")
        check("batch" in env.control.shape.split(":"), f"a control of {env.control.shape}")
        if env.control.run_id in run_of:
            controlled.add(run_of[env.control.run_id])
    check(controlled == set(SHAPES), f"controls reached only {sorted(controlled)}:\n"
          f"{otext[-3000:]}")
    lines = re.findall(r"model (\w+): online tuning of the batched steps: (\d+) trials, "
                       r"(\d+) changes applied, (\d+) controls rejected", log)
    check(sorted(l[0] for l in lines) == sorted(SHAPES), f"tuning summaries: {lines}\n{log[-3000:]}")
    for name, trials, _, rejected in lines:
        check(int(trials) >= 1, f"model {name}: no trial\n{log[-3000:]}\n{otext[-3000:]}")
        check(int(rejected) == 0, f"model {name}: {rejected} controls rejected\n{log[-3000:]}")
    say(f"tuning summaries: {lines}")
    say("ok")


def serve(client, srv):
    """Keeps SLOTS greedy requests of each model in flight for SERVE_S seconds, then lets
    them finish. Returns {request id: (model, prompt)}."""
    sc.wait_holding([srv])
    sent, live, k = {}, {n: set() for n in SHAPES}, 0
    t_end = time.time() + SERVE_S
    while True:
        for name in SHAPES:
            while time.time() < t_end and len(live[name]) < SLOTS:
                rid = f"{name}-{k}"
                prompt = PROMPTS[k % len(PROMPTS)]
                client.request(rid, prompt=prompt, max_tokens=MAX_TOKENS, temp=0.0,
                               ignore_eos=True, model=name)
                sent[rid] = (name, prompt)
                live[name].add(rid)
                k += 1
        client.poll(0.3)
        for name in SHAPES:
            live[name] = {r for r in live[name] if client.streams[r].final is None}
        if time.time() >= t_end:
            break
        check(srv.proc.poll() is None, f"serve died:\n{srv.text()[-3000:]}")
    client.wait(sorted(set().union(*live.values())), timeout_s=120)
    return sent


if __name__ == "__main__":
    main()
