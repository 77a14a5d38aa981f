#!/usr/bin/env python3
"""Decode tokens/s of one model under different kernel parameters, side by side in one run.

Each variant is a set of `--param KERNEL.NAME=VALUE` for `looptune bench` (which measures the
machine's read-only bandwidth in the same process, between its decode runs). R rounds each run
every variant once, the order rotating from round to round, so all see the same machine
conditions. Prints, per variant, tokens/s and the fraction of read-only bandwidth (each run
against its own bandwidth sample, as bench does): the minimum of the benches' minima, the median
of their medians, the maximum of their maxima; and per round the ratio of each variant's median
tokens/s to the first variant's.

    bench/decode_params.py --looptune build/looptune -m 1B-q8_0.gguf -t 1 --rounds 3 \\
        --variant int16=matvec.act_int8=0 --variant int8=matvec.act_int8=1 -- -n 32 -r 5
"""
import argparse
import json
import subprocess
import sys

from benchlib import agg, stat


def sample(binary, model, threads, params, extra):
    cmd = [binary, "bench", "-m", model, "-t", str(threads), "--no-warm-start", "--json"]
    for p in params:
        cmd += ["--param", p]
    p = subprocess.run(cmd + extra, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd + extra), p.stderr[-2000:]))
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--looptune", default="build/looptune")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-t", "--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variant", action="append", required=True,
                    help="NAME=K.P=V[,K.P=V...] (NAME= alone: the defaults)")
    ap.add_argument("extra", nargs="*", help="more bench arguments, after --")
    a = ap.parse_args()
    variants = []
    for v in a.variant:
        name, _, params = v.partition("=")
        variants.append((name, [p for p in params.split(",") if p]))
    got = {name: [] for name, _ in variants}
    ratios = {name: [] for name, _ in variants[1:]}
    for r in range(a.rounds):
        meds = {}
        for i in range(len(variants)):
            name, params = variants[(i + r) % len(variants)]
            j = sample(a.looptune, a.model, a.threads, params, a.extra)
            got[name].append(j)
            meds[name] = j["tok_s"]["median"]
            print("round %d %-8s tok/s %s  of read-only %s  (read-only %.1f GB/s median)" %
                  (r + 1, name, stat(list(j["tok_s"].values())),
                   stat(list(j["bw_fraction"].values())), j["read_gb_s"]["median"]),
                  flush=True)
        for name, _ in variants[1:]:
            ratios[name].append(meds[name] / meds[variants[0][0]])
    print("\n%s, %d thread(s), %d rounds (min of the benches' minima / median of their medians "
          "/ max of their maxima):" % (a.model, a.threads, a.rounds))
    for name, _ in variants:
        js = got[name]
        print("  %-8s tokens/s %s   of read-only %s" %
              (name, agg([j["tok_s"] for j in js]), agg([j["bw_fraction"] for j in js])))
    for name, rs in ratios.items():
        print("  %s / %s per round (medians): %s" % (name, variants[0][0], stat(rs)))


if __name__ == "__main__":
    main()
