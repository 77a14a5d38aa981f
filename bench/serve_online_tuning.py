#!/usr/bin/env python3
"""Aggregate tokens/s of `looptune serve` before and after online tuning of its batched steps.

1. A bad configuration: `looptune tune --regime batch` lists the model's batch keys, and
   every matvec batch key gets BAD (the activation modes stay at their defaults: they change
   the bits of the streams, and a serving run holds them).
2. Tuning: one worker with `--tune online --config-store BAD` and a `looptune optimizer`;
   a client keeps --streams greedy requests in flight for --tune-s seconds. The worker's
   summary gives the trials, the changes applied and the share of its observed steps spent
   in trials (and on candidates); the tuned configuration is BAD with those changes.
3. Interleaved rounds: every round serves --streams requests of --tokens tokens, produced at
   once, by a fresh worker of each configuration (--tune off): bad, tuned, and the defaults
   (no config store; with --baseline-bin also OLD's defaults), the order rotating. Aggregate
   tokens/s from the first request produced to the last final record read (read_committed).
   Prints min / median / max over the rounds.

    scripts/kafka/broker.sh start    # prints BOOTSTRAP=127.0.0.1:PORT
    bench/serve_online_tuning.py --looptune build/looptune --brokers 127.0.0.1:PORT \\
        -m stories15M-q8_0.gguf --streams 8 --tokens 200 --rounds 5 --tune-s 90 \\
        --baseline-bin /tmp/looptune-main
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "serve"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "dist"))

BAD = "rows_per_task=4,unroll=1,k_block=256,prefetch=0,act_int16=1,act_int8=1,tok_chunk_kb=32"
PROMPTS = ["Once upon a time", "The little dog ran", "A cat sat on the mat",
           "There was a girl named Lily"]
SUMMARY = re.compile(r"online tuning of the batched steps: (\d+) trials, (\d+) changes applied, "
                     r"(\d+) controls rejected; (\d+) of (\d+) observed steps in trials, "
                     r"(\d+) ran candidates")


def store_lines(path):
    with open(path) as f:
        return [l.rstrip("\n").split("\t") for l in f]


def write_store(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write("\t".join(r) + "\n")


def bad_store(args, wdir):
    keys = os.path.join(wdir, "keys.tsv")
    subprocess.run([args.looptune, "tune", "-m", args.model, "--regime", "batch", "--seqs",
                    str(args.streams), "--budget", "1", "-t", str(args.threads),
                    "--config-store", keys], check=True, capture_output=True, timeout=600)
    rows = []
    for r in store_lines(keys):
        if r[0].startswith("#"):
            rows.append(r)
        elif len(r) > 3 and "batch" in r[1].split(":"):
            if r[0] == "matvec":
                r[3] = BAD
            rows.append(r)
    path = os.path.join(wdir, "bad.tsv")
    write_store(path, rows)
    return path, rows


def tuned_store(rows, log, wdir):
    """BAD's rows with the changes the tuning worker reported ('  matvec KEY: p a -> b ...')."""
    changes = {}
    for line in log.splitlines():
        m = re.match(r"  (\S+) (\S+): (.*)$", line)
        if m and "->" in m.group(3):
            changes[(m.group(1), m.group(2))] = re.findall(r"(\w+) (-?\d+) -> (-?\d+)",
                                                         m.group(3))
    out = []
    for r in rows:
        r = list(r)
        if not r[0].startswith("#") and (r[0], r[1]) in changes:
            p = dict(kv.split("=") for kv in r[3].split(","))
            for name, _, new in changes[(r[0], r[1])]:
                p[name] = new
            r[3] = ",".join(f"{k}={v}" for k, v in p.items())
        out.append(r)
    path = os.path.join(wdir, "tuned.tsv")
    write_store(path, out)
    return path, len(changes)


def tune(args, bad, wdir):
    import serve_client as sc
    prefix = f"bench-tune-{uuid.uuid4().hex[:8]}."
    olog = open(os.path.join(wdir, "optimizer.log"), "w")
    opt = subprocess.Popen([args.looptune, "optimizer", "--brokers", args.brokers,
                            "--topic-prefix", prefix, "--group", prefix + "opt"],
                           stdout=olog, stderr=subprocess.STDOUT)
    srv = sc.Server(args.model, args.brokers, prefix, "tune", wdir,
                    ["--max-batch", str(args.streams), "--threads", str(args.threads),
                     "--partitions", "1", "--tune", "online", "--config-store", bad])
    srv.args[0] = args.looptune
    srv.start()
    client = sc.Client(args.brokers, prefix)
    try:
        sc.wait_holding([srv])
        live, k, t_end = set(), 0, time.time() + args.tune_s
        while time.time() < t_end:
            while len(live) < args.streams:
                rid = f"t{k}"
                client.request(rid, prompt=PROMPTS[k % len(PROMPTS)], max_tokens=args.tokens,
                               temp=0.0, ignore_eos=True)
                live.add(rid)
                k += 1
            client.poll(0.3)
            live = {r for r in live if client.streams[r].final is None}
        client.wait(sorted(live), timeout_s=300)
    finally:
        srv.stop(timeout=60)
        client.close()
        opt.send_signal(signal.SIGTERM)
        opt.wait(timeout=60)
        olog.close()
    return srv.text()


def one(args, binary, store):
    """A fresh worker serves --streams requests of --tokens at once: aggregate tokens/s."""
    import serve_client as sc
    prefix = f"bench-{uuid.uuid4().hex[:8]}."
    extra = ["--config-store", store] if store else []
    srv = sc.Server(args.model, args.brokers, prefix, f"b-{prefix[6:14]}", args.wdir,
                    ["--max-batch", str(args.streams), "--threads", str(args.threads),
                     "--partitions", "1", *extra])
    srv.args[0] = binary
    srv.start()
    client = sc.Client(args.brokers, prefix)
    try:
        sc.wait_holding([srv])
        client.request("warm", prompt="Hi", max_tokens=2)
        client.wait(["warm"], timeout_s=120)
        rids = [f"r{i}" for i in range(args.streams)]
        t0 = time.time()
        for i, rid in enumerate(rids):
            client.request(rid, prompt=PROMPTS[i % len(PROMPTS)], max_tokens=args.tokens,
                           temp=0.0, ignore_eos=True)
        # short polls: the end is seen within 20 ms (Client.wait polls 300 ms at a time)
        deadline = t0 + 600
        while not all(client.streams[r].final for r in rids):
            if time.time() > deadline:
                sys.exit(f"no final record in 600 s:\n{srv.text()[-2000:]}")
            client.poll(0.02)
        dt = time.time() - t0
        n = sum(client.streams[r].length() for r in rids)
    finally:
        srv.stop()
        client.close()
    return n / dt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--looptune", required=True)
    ap.add_argument("--baseline-bin")
    ap.add_argument("--brokers", required=True)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tune-s", type=float, default=90)
    args = ap.parse_args()
    os.environ["LT_BIN"] = args.looptune
    os.environ.setdefault("LT_KAFKA_BOOTSTRAP", args.brokers)
    args.wdir = tempfile.mkdtemp(prefix="serve-online-tuning-")
    os.environ.setdefault("LT_PROTO_DIR", os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "proto"))
    os.environ.setdefault("LT_WORK_DIR", args.wdir)
    bad, rows = bad_store(args, args.wdir)
    log = tune(args, bad, args.wdir)
    m = SUMMARY.search(log)
    if not m:
        sys.exit(f"no online tuning summary in the worker's log:\n{log[-3000:]}")
    trials, applied, _, in_trials, observed, cand = (int(x) for x in m.groups())
    tuned, n_keys = tuned_store(rows, log, args.wdir)
    print(f"tuning ({args.tune_s:.0f} s, {args.streams} streams): {trials} trials, {applied} "
          f"changes applied ({n_keys} keys changed); {in_trials} of {observed} observed steps "
          f"in trials ({100.0 * in_trials / max(observed, 1):.1f}%), {cand} on candidates "
          f"({100.0 * cand / max(observed, 1):.1f}%)")
    for line in log.splitlines():
        if re.match(r"  \S+ \S+: .* -> ", line):
            print(line)
    configs = [("bad", args.looptune, bad), ("tuned", args.looptune, tuned),
               ("defaults", args.looptune, None)]
    if args.baseline_bin:
        configs.append(("baseline defaults", args.baseline_bin, None))
    got = {c[0]: [] for c in configs}
    for r in range(args.rounds):
        order = configs[r % len(configs):] + configs[:r % len(configs)]
        for name, binary, store in order:
            got[name].append(one(args, binary, store))
        print(f"round {r + 1}: " + ", ".join(f"{n} {got[n][-1]:.1f}" for n, _, _ in configs),
              flush=True)
    print(f"aggregate tokens/s, {args.streams} streams x {args.tokens} tokens, "
          f"{args.rounds} interleaved rounds (min / median / max):")
    for name, _, _ in configs:
        v = got[name]
        print(f"  {name:18s} {min(v):7.1f} / {statistics.median(v):7.1f} / {max(v):7.1f}")
    b, t = statistics.median(got["bad"]), statistics.median(got["tuned"])
    print(f"  tuned / bad (medians): {t / b:.3f}x")


if __name__ == "__main__":
    main()
