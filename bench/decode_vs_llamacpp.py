#!/usr/bin/env python3
"""Decode tokens/s of looptune against llama.cpp, side by side in one run.

For every model and thread count, R rounds alternate: one `looptune bench --json` sample (which
also measures the machine's read-only and STREAM-triad bandwidth in the same process), then one
llama.cpp sample (bench/peers/llamacpp_decode.py through the given Python, which has
llama-cpp-python installed), so both see the same machine conditions. Prints a Markdown table
of min/median/max tokens/s for both, the median ratio, and looptune's achieved fraction of the
read-only bandwidth.

    bench/decode_vs_llamacpp.py --looptune build/looptune \\
        --llamacpp-python /opt/peers/venv-omp/bin/python \\
        --model stories110M-q8_0=models/s110-q8_0.gguf --threads 1 2 --rounds 5
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def stat(xs):
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs)}


def looptune_sample(binary, model, threads, tokens, executor):
    out = subprocess.run([binary, "bench", "-m", model, "-t", str(threads), "-n", str(tokens),
                          "-r", "1", "--executor", executor, "--json"],
                         capture_output=True, text=True, check=True).stdout
    j = json.loads(out)
    return j["tok_s"]["median"], j["bw_fraction"]["median"], j["read_gb_s"]["median"]


def llamacpp_sample(python, model, threads, tokens, extra):
    cmd = [python, os.path.join(HERE, "peers", "llamacpp_decode.py"), model, "-t", str(threads),
           "-n", str(tokens), "-r", "1"] + extra
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("llama.cpp probe failed: " + (p.stderr.strip().splitlines() or ["?"])[-1])
    return json.loads(p.stdout)["tok_s"]["median"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--looptune", default=os.path.join(HERE, "..", "build", "looptune"))
    ap.add_argument("--llamacpp-python", default=None,
                    help="a Python with llama-cpp-python (omit to measure looptune alone)")
    ap.add_argument("--llamacpp-arg", action="append", default=[],
                    help="extra argument for the llama.cpp probe (default: its fastest path; "
                         "--no-extra-bufts selects the plain ggml kernels, about half as fast on Q8_0)")
    ap.add_argument("--model", action="append", required=True, help="LABEL=PATH.gguf")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--executor", default="looped")
    ap.add_argument("--jsonl", help="also append one JSON line per case here")
    a = ap.parse_args()

    print("| model | threads | looptune tok/s min / median / max | llama.cpp tok/s min / median / max"
          " | ratio (median) | looptune of read-only (median) |")
    print("|---|---|---|---|---|---|")
    for spec in a.model:
        label, path = spec.split("=", 1)
        for t in a.threads:
            lt, frac, ll = [], [], []
            for _ in range(a.rounds):
                tok_s, f, _ = looptune_sample(a.looptune, path, t, a.tokens, a.executor)
                lt.append(tok_s)
                frac.append(f)
                if a.llamacpp_python:
                    ll.append(llamacpp_sample(a.llamacpp_python, path, t, a.tokens,
                                              a.llamacpp_arg))
            s_lt = stat(lt)
            row = "| %s | %d | %.1f / %.1f / %.1f | " % (label, t, s_lt["min"], s_lt["median"],
                                                        s_lt["max"])
            if ll:
                s_ll = stat(ll)
                row += "%.1f / %.1f / %.1f | %.2fx | " % (s_ll["min"], s_ll["median"], s_ll["max"],
                                                          s_lt["median"] / s_ll["median"])
            else:
                row += "- | - | "
            row += "%.2f |" % statistics.median(frac)
            print(row, flush=True)
            if a.jsonl:
                with open(a.jsonl, "a") as f:
                    f.write(json.dumps({"model": label, "threads": t, "looptune": s_lt,
                                        "llamacpp": stat(ll) if ll else None,
                                        "bw_fraction": stat(frac)}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
