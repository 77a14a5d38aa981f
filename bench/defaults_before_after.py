#!/usr/bin/env python3
"""Decode tokens/s at the kernels' defaults, two builds of looptune side by side.

For a change that should not move performance (a refactor of how parameter
values reach the kernels): each round runs `looptune bench --no-warm-start`
of both binaries on the same model, in alternating order (A B, B A, ...), so
a slow spell of the shared machine lands on both. Prints, per model, the
min/median/max of each binary's median tokens/s over the rounds and of the
per-round ratio after/before.

    bench/defaults_before_after.py --before OLD/looptune --after build/looptune \
        -m models/a.gguf -m models/b.gguf --rounds 5
"""
import argparse
import json
import statistics
import subprocess
import sys


def tok_s(binary, model, args):
    cmd = [binary, "bench", "-m", model, "--no-warm-start", "--json", "-n", str(args.tokens),
           "-r", str(args.runs), "--membw-mib", str(args.membw_mib), "-t", str(args.threads)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {p.stderr.strip().splitlines()[-1:]}")
    return json.loads(p.stdout)["tok_s"]["median"]


def mmm(xs):
    return f"{min(xs):.1f} / {statistics.median(xs):.1f} / {max(xs):.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="the baseline looptune binary")
    ap.add_argument("--after", required=True, help="the looptune binary measured")
    ap.add_argument("-m", "--model", action="append", required=True, help="model (repeatable)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3, help="bench runs per process")
    ap.add_argument("--membw-mib", type=int, default=64)
    ap.add_argument("-t", "--threads", type=int, default=2)
    args = ap.parse_args()
    if args.rounds < 1 or args.tokens < 1 or args.runs < 1:
        sys.exit("--rounds, --tokens and --runs must be positive")
    for model in args.model:
        before, after, ratio = [], [], []
        for r in range(args.rounds):
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            got = {}
            for which in order:
                got[which] = tok_s(args.before if which == "before" else args.after, model, args)
            before.append(got["before"])
            after.append(got["after"])
            ratio.append(got["after"] / got["before"])
        print(f"{model}: tokens/s min / median / max over {args.rounds} interleaved rounds "
              f"({args.tokens} tokens x {args.runs} runs each, {args.threads} threads)")
        print(f"  before {mmm(before)}")
        print(f"  after  {mmm(after)}")
        print(f"  after/before per round {min(ratio):.3f} / {statistics.median(ratio):.3f} / "
              f"{max(ratio):.3f}")


if __name__ == "__main__":
    main()
