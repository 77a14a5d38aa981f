#!/usr/bin/env python3
"""End-to-end benchmark of the closed loop on a real Kafka broker.

For a model and a starting configuration (the kernels' defaults, or a
deliberately bad one), in one session:
  1. `looptune optimizer` + `looptune run --tune online` from that start:
     trials, changes, when the last change came (time to converge), throughput
     while tuning against the incumbent's, and the run's own closing
     measurement (initial against tuned parameters, same positions);
  2. `looptune tune` offline (same model, its default budget) into a file store;
  3. decode tokens/s side by side, alternating rounds of `looptune bench`:
     the start, a new process warm-started from the configs topic the
     optimizer wrote (online-tuned), and one warm-started from the offline
     store. min / median / max over the rounds, and the ratios of medians.

Without --brokers it starts the test broker (scripts/kafka/broker.sh) in a
temporary directory and stops it at the end.

    bench/bench_online_tuning.py --looptune build/looptune --model M.gguf \
        [--start defaults|bad] [--tokens 2000] [--rounds 5] [--threads 2]
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

BAD = "rows_per_task=4,unroll=1,k_block=256,prefetch=0,act_int16=0,act_int8=0"
HERE = os.path.dirname(os.path.abspath(__file__))


def sh(args, timeout=3600):
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        sys.exit(f"bench_online_tuning: {' '.join(args[:3])} failed: {r.stderr.strip()[-1500:]}")
    return r


def bench_tok_s(lt, model, threads, extra):
    r = sh([lt, "bench", "-m", model, "-t", str(threads), "-n", "64", "-r", "3", *extra])
    v = [float(x) for x in re.findall(r"looped ([0-9.]+) tokens/s", r.stderr + r.stdout)]
    if not v:
        sys.exit(f"bench_online_tuning: no tokens/s in bench output: {r.stderr[-1500:]}")
    return statistics.median(v)


def stats(v):
    return f"{min(v):8.1f} {statistics.median(v):8.1f} {max(v):8.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--looptune", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--brokers")
    ap.add_argument("--start", choices=["defaults", "bad"], default="defaults")
    ap.add_argument("--tokens", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--budget", type=int, default=24)
    a = ap.parse_args()
    lt, model = os.path.abspath(a.looptune), os.path.abspath(a.model)
    work = tempfile.mkdtemp(prefix="lt-online-")
    broker_dir = None
    servers = a.brokers
    if not servers:
        broker_dir = os.path.join(work, "broker")
        out = sh([os.path.join(HERE, "..", "scripts", "kafka", "broker.sh"), "start", "--dir",
                  broker_dir], timeout=900).stdout
        servers = re.search(r"BOOTSTRAP=(\S+)", out).group(1)
    try:
        prefix = f"bench-online-{os.getpid()}."
        kafka = ["--brokers", servers, "--topic-prefix", prefix]
        # the starting configuration
        if a.start == "bad":
            keys = os.path.join(work, "keys.tsv")
            sh([lt, "tune", "-m", model, "--budget", "1", "--config-store", keys])
            start_store = os.path.join(work, "bad.tsv")
            with open(keys) as f, open(start_store, "w") as g:
                for line in f:
                    fields = line.rstrip("\n").split("\t")
                    if line.startswith("#"):
                        g.write(line)
                    elif fields[0] == "matvec":
                        fields[3] = BAD
                        g.write("\t".join(fields) + "\n")
            start = ["--config-store", start_store]
        else:
            start = ["--no-warm-start"]

        # 1. online tuning
        olog_path = os.path.join(work, "optimizer.log")
        olog = open(olog_path, "w")
        opt = subprocess.Popen([lt, "optimizer", *kafka, "--group", prefix + "opt"],
                               stdout=olog, stderr=subprocess.STDOUT)
        try:
            time.sleep(2)
            t0 = time.time()
            run = sh([lt, "run", "-m", model, "--prompt-ids", "1", "-n", str(a.tokens), "--temp",
                      "0", "--ignore-eos", "--print-ids", "-t", str(a.threads), "--tune", "online",
                      *kafka, *start])
            wall = time.time() - t0
            time.sleep(1)
        finally:  # also when the run fails: no optimizer left behind
            opt.send_signal(signal.SIGTERM)
            opt.wait(timeout=60)
            olog.close()
        err = run.stderr
        summary = [l for l in err.splitlines() if l.startswith("  ")]
        print(f"# online tuning: {a.tokens} tokens from {a.start}, run wall {wall:.1f} s")
        for l in summary:
            print("#" + l)
        kept = len(re.findall(r": kept ", open(olog_path).read()))
        print(f"# optimizer kept {kept} candidates")

        # 2. offline tuning
        offline = os.path.join(work, "offline.tsv")
        t0 = time.time()
        sh([lt, "tune", "-m", model, "-t", str(a.threads), "--budget", str(a.budget),
            "--config-store", offline])
        print(f"# offline tune: budget {a.budget}, {time.time() - t0:.1f} s")

        # 3. side by side
        configs = {"start (" + a.start + ")": start,
                   "online-tuned (warm start from the topic)": ["--config-store", "kafka", *kafka],
                   "offline-tuned (tune)": ["--config-store", offline]}
        res = {k: [] for k in configs}
        names = list(configs)
        for r in range(a.rounds):
            order = names if r % 2 == 0 else names[::-1]
            for k in order:
                res[k].append(bench_tok_s(lt, model, a.threads, configs[k]))
        base = statistics.median(res[names[0]])
        print(f"\n{'configuration':44s} {'min':>8s} {'median':>8s} {'max':>8s}  vs start")
        for k in names:
            print(f"{k:44s} {stats(res[k])}  {statistics.median(res[k]) / base:6.3f}x")
    finally:
        if broker_dir:
            subprocess.run([os.path.join(HERE, "..", "scripts", "kafka", "broker.sh"), "stop",
                            "--dir", broker_dir], capture_output=True)


if __name__ == "__main__":
    main()
