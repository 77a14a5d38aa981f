#!/usr/bin/env python3
"""Batched decode tokens/s of looptune against llama.cpp's llama-batched-bench.

N sequences decode together, one batch of one token per sequence per step, and the figure is
the aggregate generation rate: N x TOKENS over the time of the TOKENS timed steps. For every
model, thread count and round, each N in turn is measured once by looptune and then once by
llama.cpp (rounds interleaved, so a change of the machine's load hits both), and the table
gives min/median/max of both over the rounds, the ratio of the medians, each runtime's
median at N over its own median at N = 1, and the per-token latency each of the N streams
sees (a step's time): looptune's p50 and p99 over the steps of a sample (medians over the
rounds), llama.cpp's mean (T_TG over the steps; llama-batched-bench times no single step).

  looptune   `looptune bench -m MODEL -t T --seqs N -n TOKENS -r 1 --no-warm-start --json`:
             one step at position 0 for every sequence, then TOKENS timed greedy steps (the
             argmax is not timed); the sample is its tok_s.
  llama.cpp  `llama-batched-bench -m MODEL -c CTX -b 2048 -ub 512 -npp 1 -ntg TOKENS -npl N
             -t T --output-format jsonl`: a one-token prompt for each of the N sequences (not
             shared), then TOKENS steps of N random tokens; the sample is its S_TG
             (speed_tg = N x TOKENS / T_TG). Build it with CMake from the llama.cpp tree
             that bench/peers/setup_llamacpp.sh fetches, e.g.

               cmake -S TREE -B /opt/peers/llamacpp-native-bb -DCMAKE_BUILD_TYPE=Release \\
                   -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \\
                   -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF
               cmake --build /opt/peers/llamacpp-native-bb --target llama-batched-bench

Default models (random weights, generated once into --cache-dir, never into the repository):

  stories110M-q8_0   looptune model-gen --preset stories110M --dtype q8_0
                       --vocab-file tests/data/llama2-tokenizer.bin
  1B-q8_0            looptune model-gen --preset 1B --dtype q8_0 (dim 2048, 16 layers,
                       32/8 heads, ffn 5632)
  1B-q4_k_m          looptune model-gen --preset 1B --dtype q4_k_m (the same shape;
                       llama.cpp's Q4_K_M mix)

The target this measures: on the 1B shape, looptune's aggregate at N = 8 at least 5x its
N = 1 figure, and ahead of llama.cpp at every N; the lines after the table say whether each
model and thread count meets both. The machine (lscpu's model name, AVX-512F/AVX2) and its
load (uptime) before and after are printed around the table. --quick is a short smoke run:
one round of 8 tokens, N = 1 and 4, one thread, stories110M only (unless --model is given).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from decode_vs_llamacpp import llama_bench_system_info, run, stat  # noqa: E402

DEFAULT_BB = "/opt/peers/llamacpp-native-bb/bin/llama-batched-bench"
DEFAULT_MODELS = [
    ("stories110M-q8_0", ["--preset", "stories110M", "--dtype", "q8_0", "--vocab-file",
                          os.path.join(ROOT, "tests", "data", "llama2-tokenizer.bin")]),
    ("1B-q8_0", ["--preset", "1B", "--dtype", "q8_0"]),
    ("1B-q4_k_m", ["--preset", "1B", "--dtype", "q4_k_m"]),
]
GOAL_SEQS, GOAL_SPEEDUP = 8, 5.0


def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def machine():
    out = sh(["lscpu"])
    name = re.search(r"^Model name:\s*(.+)$", out, re.M)
    cpus = re.search(r"^CPU\(s\):\s*(\d+)", out, re.M)
    flags = re.search(r"^Flags:\s*(.+)$", out, re.M)
    flags = set(flags.group(1).split()) if flags else set()
    return "%s, %s CPU(s), avx512f %s, avx2 %s" % (
        name.group(1).strip() if name else "?", cpus.group(1) if cpus else "?",
        "yes" if "avx512f" in flags else "no", "yes" if "avx2" in flags else "no")


def ensure_model(looptune, cache, label, gen_args):
    path = os.path.join(cache, label + ".gguf")
    if not os.path.exists(path):
        os.makedirs(cache, exist_ok=True)
        print("generating %s" % path, file=sys.stderr, flush=True)
        run([looptune, "model-gen"] + gen_args + ["-o", path], "looptune model-gen")
    return path


def looptune_sample(binary, model, threads, seqs, tokens, isa, warm_start, extra):
    cmd = [binary, "bench", "-m", model, "-t", str(threads), "--seqs", str(seqs),
           "-n", str(tokens), "-r", "1", "--json"] + extra
    if isa:
        cmd += ["--isa", isa]
    if not warm_start:
        cmd.append("--no-warm-start")
    j = json.loads(run(cmd, "looptune bench"))
    if j.get("seqs") != seqs:
        raise RuntimeError("looptune bench ran %r sequences, asked for %d" % (j.get("seqs"), seqs))
    st = j.get("step_ms", {})
    return {"tok_s": j["tok_s"]["median"], "isa": j.get("isa"), "p50": st.get("p50"),
            "p99": st.get("p99")}


def batched_bench_sample(binary, model, threads, seqs, tokens, ctx, extra, attempts=3):
    """One llama-batched-bench sample. Its results go through llama.cpp's asynchronous logger,
    which is never flushed at exit: now and then (about 1 run in 30 here) the process exits 0
    with its result line unwritten. Such a run is repeated, up to `attempts` times in all; the
    number of repeats is returned with the sample."""
    cmd = [binary, "-m", model, "-c", str(ctx), "-b", "2048", "-ub", "512", "-npp", "1",
           "-ntg", str(tokens), "-npl", str(seqs), "-t", str(threads),
           "--output-format", "jsonl"] + extra
    for attempt in range(attempts):
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError("llama-batched-bench failed (exit %d): %s" % (
                p.returncode, (p.stderr.strip().splitlines() or ["?"])[-1]))
        rows = []
        for line in (p.stdout + "\n" + p.stderr).splitlines():
            line = line.strip()
            if line.startswith("{") and "speed_tg" in line:
                rows.append(json.loads(line))
        rows = [r for r in rows
                if r.get("pl") == seqs and r.get("tg") == tokens and r.get("pp") == 1]
        if len(rows) == 1:
            break
        if rows or attempt + 1 == attempts:
            raise RuntimeError("llama-batched-bench gave %d results for npl %d in %d run(s) "
                               "(is -c %d at least npl x (1 + ntg)?)"
                               % (len(rows), seqs, attempt + 1, ctx))
        print("llama-batched-bench -npl %d -t %d: exit 0 without its result line, repeated"
              % (seqs, threads), file=sys.stderr, flush=True)
    r = rows[0]
    fa = r.get("flash_attn")  # llama_flash_attn_type: -1 auto, 0 disabled, 1 enabled
    return {"tok_s": float(r["speed_tg"]), "n_threads": r.get("n_threads"),
            "n_threads_batch": r.get("n_threads_batch"),
            "flash_attn": {-1: "auto", 0: "off", 1: "on"}.get(fa, fa), "repeats": attempt}


def fmt(s):
    return "%.1f / %.1f / %.1f" % (s["min"], s["median"], s["max"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--looptune", default=os.path.join(ROOT, "build", "looptune"))
    ap.add_argument("--batched-bench", metavar="PATH", default=DEFAULT_BB,
                    help="llama.cpp's llama-batched-bench (default %(default)s)")
    ap.add_argument("--no-llamacpp", action="store_true", help="measure looptune alone")
    ap.add_argument("--model", action="append", default=None,
                    help="LABEL=PATH.gguf, repeatable (default: the two models below)")
    ap.add_argument("--cache-dir", default=os.environ.get("LT_BENCH_MODELS",
                                                          "/tmp/looptune-bench"),
                    help="where the default models are generated (default $LT_BENCH_MODELS "
                         "or %(default)s)")
    ap.add_argument("--seqs", type=int, nargs="+", default=None,
                    help="parallel sequences N (default 1 2 4 8 16)")
    ap.add_argument("--threads", type=int, nargs="+", default=None, help="(default 1 2)")
    ap.add_argument("--tokens", type=int, default=None, help="timed steps per sample (default 32)")
    ap.add_argument("--rounds", type=int, default=None, help="(default 3)")
    ap.add_argument("--ctx", type=int, default=2048,
                    help="llama-batched-bench -c (at least max N x (1 + tokens))")
    ap.add_argument("--isa", choices=["portable", "avx2", "avx512"], default=None,
                    help="force looptune's kernels to this ISA")
    ap.add_argument("--warm-start", action="store_true",
                    help="let looptune start from its stored tuned configurations (default: "
                         "--no-warm-start, the kernels' default parameters)")
    ap.add_argument("--looptune-arg", action="append", default=[],
                    help="extra argument for looptune bench, repeatable (--looptune-arg=-X)")
    ap.add_argument("--llamacpp-arg", action="append", default=[],
                    help="extra argument for llama-batched-bench, repeatable "
                         "(--llamacpp-arg=-fa --llamacpp-arg=off)")
    ap.add_argument("--quick", action="store_true",
                    help="short smoke run (see below; options given still hold)")
    ap.add_argument("--jsonl", help="also append one JSON line per case here")
    a = ap.parse_args()
    # --quick changes the defaults only: options given still hold
    for k, full, quick in (("rounds", 3, 1), ("tokens", 32, 8), ("seqs", [1, 2, 4, 8, 16], [1, 4]),
                           ("threads", [1, 2], [1])):
        if getattr(a, k) is None:
            setattr(a, k, quick if a.quick else full)
    if a.tokens < 1 or a.rounds < 1 or min(a.seqs) < 1 or min(a.threads) < 1:
        ap.error("--tokens, --rounds, --seqs and --threads must be >= 1")
    if not a.no_llamacpp:
        if max(a.seqs) * (1 + a.tokens) > a.ctx:
            ap.error("--ctx %d is below max N x (1 + tokens) = %d" % (
                a.ctx, max(a.seqs) * (1 + a.tokens)))
        if not os.access(a.batched_bench, os.X_OK):
            ap.error("no llama-batched-bench at %s (--batched-bench PATH, or --no-llamacpp)"
                     % a.batched_bench)
    if a.model:
        models = []
        for spec in a.model:
            if "=" not in spec:
                ap.error("--model takes LABEL=PATH, not %r" % spec)
            models.append(spec.split("=", 1))
    else:
        defaults = DEFAULT_MODELS[:1] if a.quick else DEFAULT_MODELS
        models = [(label, ensure_model(a.looptune, a.cache_dir, label, gen))
                  for label, gen in defaults]

    print("machine: %s" % machine())
    print("load before: %s" % sh(["uptime"]))
    print("looptune: %s, %s" % (a.looptune, "its stored tuned configurations (warm start)"
                                 if a.warm_start else "kernels' default parameters "
                                 "(--no-warm-start)"))
    if not a.no_llamacpp:
        v = subprocess.run([a.batched_bench, "--version"], capture_output=True, text=True)
        ver = "; ".join(l.strip() for l in (v.stdout + v.stderr).splitlines() if l.strip())
        print("llama.cpp: %s, %s" % (a.batched_bench, ver or "version unknown"))
        info = llama_bench_system_info(a.batched_bench)
        if info:
            print("llama.cpp system info: %s" % info)
        print("llama-batched-bench -c %d -b 2048 -ub 512 -npp 1 -ntg %d -npl N -t T%s" % (
            a.ctx, a.tokens, "".join(" " + x for x in a.llamacpp_arg)))
    print("%d round(s) of %d steps, looptune then llama.cpp for each N in turn\n" % (
        a.rounds, a.tokens), flush=True)

    header_done = False
    verdicts = []
    repeats = 0
    for label, path in models:
        for t in a.threads:
            lt = {n: [] for n in a.seqs}
            lat = {n: [] for n in a.seqs}
            ll = {n: [] for n in a.seqs}
            isa_seen, ll_info = set(), None
            for _ in range(a.rounds):
                for n in a.seqs:
                    s = looptune_sample(a.looptune, path, t, n, a.tokens, a.isa, a.warm_start,
                                        a.looptune_arg)
                    lt[n].append(s["tok_s"])
                    if s["p50"] is not None:
                        lat[n].append((s["p50"], s["p99"]))
                    isa_seen.add(s["isa"] or "?")
                    if not a.no_llamacpp:
                        p = batched_bench_sample(a.batched_bench, path, t, n, a.tokens, a.ctx,
                                                 a.llamacpp_arg)
                        ll[n].append(p["tok_s"])
                        repeats += p["repeats"]
                        ll_info = ll_info or p
            isa = "/".join(sorted(isa_seen))
            if not header_done:
                if ll_info:
                    print("llama.cpp context: n_threads %s, n_threads_batch %s, flash_attn %s" % (
                        ll_info["n_threads"], ll_info["n_threads_batch"], ll_info["flash_attn"]))
                print("looptune ISA: %s%s\n" % (isa, " (--isa)" if a.isa else " (its own choice)"))
                print("| model | threads | N | looptune tok/s min / median / max "
                      "| llama.cpp S_TG t/s min / median / max | ratio (median) "
                      "| looptune / its N=1 | llama.cpp / its N=1 "
                      "| looptune ms per token p50 / p99 | llama.cpp ms per token (mean) |")
                print("|---|---|---|---|---|---|---|---|---|---|")
                header_done = True
            base_lt = statistics.median(lt[a.seqs[0]]) if a.seqs[0] == 1 else None
            base_ll = (statistics.median(ll[a.seqs[0]])
                       if a.seqs[0] == 1 and ll[a.seqs[0]] else None)
            ratios = {}
            for n in a.seqs:
                s_lt = stat(lt[n])
                row = "| %s | %d | %d | %s | " % (label, t, n, fmt(s_lt))
                if ll[n]:
                    s_ll = stat(ll[n])
                    ratios[n] = s_lt["median"] / s_ll["median"]
                    row += "%s | %.2fx | " % (fmt(s_ll), ratios[n])
                else:
                    s_ll = None
                    row += "- | - | "
                row += "%s | %s | " % (
                    "%.2fx" % (s_lt["median"] / base_lt) if base_lt else "-",
                    "%.2fx" % (s_ll["median"] / base_ll) if base_ll and s_ll else "-")
                row += "%s | %s |" % (
                    "%.2f / %.2f" % (statistics.median(x[0] for x in lat[n]),
                                     statistics.median(x[1] for x in lat[n])) if lat[n] else "-",
                    "%.2f" % (1e3 * n / s_ll["median"]) if s_ll else "-")
                print(row, flush=True)
                if a.jsonl:
                    with open(a.jsonl, "a") as f:
                        f.write(json.dumps({
                            "model": label, "path": path, "threads": t, "seqs": n,
                            "tokens": a.tokens, "rounds": a.rounds, "looptune": s_lt,
                            "looptune_samples": lt[n], "looptune_isa": isa,
                            "looptune_step_ms_p50_p99": lat[n],
                            "warm_start": a.warm_start, "llamacpp": s_ll,
                            "llamacpp_samples": ll[n], "llamacpp_ctx": a.ctx}) + "\n")
            if base_lt and GOAL_SEQS in lt:
                sp = statistics.median(lt[GOAL_SEQS]) / base_lt
                v = "%s, %d thread(s): looptune N=%d / N=1 = %.2fx (target >= %.0fx: %s)" % (
                    label, t, GOAL_SEQS, sp, GOAL_SPEEDUP, "met" if sp >= GOAL_SPEEDUP else "not met")
                if ratios:
                    worst = min(ratios, key=ratios.get)
                    v += "; against llama.cpp: %s (lowest ratio %.2fx at N=%d)" % (
                        "ahead at every N" if ratios[worst] > 1 else "not ahead at every N",
                        ratios[worst], worst)
                verdicts.append(v)
    if verdicts:
        print()
        for v in verdicts:
            print(v)
    if repeats:
        print("\nllama-batched-bench runs repeated for a lost result line: %d" % repeats)
    print("\nload after: %s" % sh(["uptime"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
