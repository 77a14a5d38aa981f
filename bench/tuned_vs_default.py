#!/usr/bin/env python3
"""Decode tokens/s at the kernels' defaults against what `looptune tune` stores, in one run.

For each model and thread count: `looptune tune` writes a fresh config store (its node timer
evicts the weights before each run when the model outgrows the last-level cache, so the
search sees them stream from memory as a step does), then R rounds run `looptune bench`
twice, once with --no-warm-start and once warm-started from that store, the order
alternating from round to round so a slow spell of the shared machine lands on both. Prints
each one's tokens/s and fraction of the read-only bandwidth (min of the benches' minima /
median of their medians / max of their maxima) and the per-round ratio tuned / default.

    bench/tuned_vs_default.py --looptune build/looptune -m 1B-q4km.gguf -t 1 2 --rounds 4
    bench/tuned_vs_default.py -m 1B-q6_k.gguf -t 2 --isa avx2        # tuned on the AVX2 path
    bench/tuned_vs_default.py -m 1B-q4km.gguf -t 1 --regime batch --seqs 8
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from benchlib import agg, loadavg, machine, stat


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if p.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), p.stderr[-2000:]))
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--looptune", default="build/looptune")
    ap.add_argument("-m", "--model", action="append", required=True)
    ap.add_argument("-t", "--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--budget", type=int, default=16, help="tune --budget (default 16)")
    ap.add_argument("--regime", choices=["decode", "batch"], default="decode")
    ap.add_argument("--seqs", type=int, default=8, help="sequences of --regime batch")
    ap.add_argument("--isa", help="tune and bench on this ISA's kernels (e.g. avx2)")
    ap.add_argument("--tokens", type=int, default=32, help="bench -n (default 32)")
    ap.add_argument("--runs", type=int, default=3, help="bench -r (default 3)")
    a = ap.parse_args()

    env = dict(os.environ)
    bench_extra = ["-n", str(a.tokens), "-r", str(a.runs)]
    tune_extra = ["--regime", a.regime]
    if a.regime == "batch":
        bench_extra += ["--seqs", str(a.seqs)]
        tune_extra += ["--seqs", str(a.seqs)]
    if a.isa:
        env["LT_ISA_MAX"] = a.isa  # tune has no --isa: its host class then names this ISA
        bench_extra += ["--isa", a.isa]
    print("machine: %s; load %s" % (machine(), loadavg()))
    with tempfile.TemporaryDirectory() as tmp:
        for model in a.model:
            for t in a.threads:
                store = os.path.join(tmp, "configs-%s-%d.tsv" % (os.path.basename(model), t))
                run([a.looptune, "tune", "-m", model, "-t", str(t), "--budget", str(a.budget),
                     "--config-store", store] + tune_extra, env)
                got = {"default": [], "tuned": []}
                ratios = []
                for r in range(a.rounds):
                    order = ["default", "tuned"] if r % 2 == 0 else ["tuned", "default"]
                    med = {}
                    for name in order:
                        warm = ["--no-warm-start"] if name == "default" else ["--config-store", store]
                        j = json.loads(run([a.looptune, "bench", "-m", model, "-t", str(t),
                                            "--json"] + bench_extra + warm, env))
                        got[name].append(j)
                        med[name] = j["tok_s"]["median"]
                        print("  round %d %-7s tok/s %s  of read-only %s" %
                              (r + 1, name, stat(list(j["tok_s"].values())),
                               stat(list(j["bw_fraction"].values()))), flush=True)
                    ratios.append(med["tuned"] / med["default"])
                print("%s, %d thread(s)%s, %s, %d rounds:" %
                      (model, t, ", " + a.isa if a.isa else "",
                       a.regime + (" of %d sequences" % a.seqs if a.regime == "batch" else ""),
                       a.rounds))
                for name in ("default", "tuned"):
                    js = got[name]
                    print("  %-7s tokens/s %s   of read-only %s" %
                          (name, agg([j["tok_s"] for j in js]), agg([j["bw_fraction"] for j in js])))
                print("  tuned / default per round (medians): %s\n" % stat(ratios), flush=True)


if __name__ == "__main__":
    main()
