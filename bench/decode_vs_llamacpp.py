#!/usr/bin/env python3
"""Decode (or prefill) tokens/s of looptune against llama.cpp, side by side in one run.

For every model and thread count, R rounds alternate: one `looptune bench --json` sample (which
also measures the machine's read-only and STREAM-triad bandwidth in the same process), then one
llama.cpp sample, so both see the same machine conditions. Prints a Markdown table of
min/median/max tokens/s for both, the median ratio, and looptune's achieved fraction of the
read-only bandwidth. The lines above the table name the looptune ISA (the forced --isa, or the
one looptune picked) and the llama.cpp build (its label and, for --llama-bench, the system-info
line of the libllama beside the binary); the column headings repeat both.

llama.cpp is measured one of two ways:

  --llama-bench PATH      llama.cpp's own benchmark binary: per sample
                          `PATH -m MODEL -t T -p 0 -n TOKENS -r 1 -o json` (an empty prompt, then
                          TOKENS generated tokens after llama-bench's one-token warm-up), and the
                          sample is the `avg_ts` of its JSON. Build the binaries with
                          `bench/peers/setup_llamacpp.sh --llama-bench` (variants native, avx2).
  --llamacpp-python PY    a Python with llama-cpp-python installed, running
                          bench/peers/llamacpp_decode.py (a 16-token prompt, then TOKENS timed
                          llama_decode() calls).

--prefill N measures prefill instead of decode: each sample is one N-token prompt at position 0,
`looptune bench --prefill N -r 1 --json` against `llama-bench -p N -n 0 -r 1 -o json` (its
`avg_ts` of the pp test); the bandwidth column is then empty (prefill is not bound by it), and
--llamacpp-python is not supported. Prefill of a 128-token prompt, AVX2 and native:

    bench/decode_vs_llamacpp.py --looptune build/looptune --prefill 128 \\
        --llama-bench /opt/peers/llamacpp-native-bb/bin/llama-bench \\
        --model 1B-q4_0=models/1B-q4_0.gguf --threads 1 2 --rounds 5

Without either, looptune is measured alone. --baseline PATH adds a second looptune binary (say
the build of the branch point) to every round, right after the first, with the same flags: its
own columns, and the ratio of the first's median to its median.

Each case also gives the 1-minute load average (min / max over its rounds): on a shared host the
spread it implies is part of the result. --llamacpp-arg adds arguments to the llama.cpp
command of either kind. --isa NAME and --no-warm-start are passed to `looptune bench`, so an
AVX2-only comparison is

    bench/decode_vs_llamacpp.py --looptune build/looptune \\
        --llama-bench /opt/peers/llamacpp-avx2/bin/llama-bench --isa avx2 \\
        --model s110-q8_0=/opt/peers/models/s110-q8_0.gguf --threads 1 2 --rounds 5

and the same with /opt/peers/llamacpp-native/bin/llama-bench and no --isa compares both at
their best on this CPU. Through llama-cpp-python:

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


def fmt_frac(fr):
    """The median fraction of read-only bandwidth, or '-' for prefill (none measured)."""
    fr = [f for f in fr if f is not None]
    return "%.2f" % statistics.median(fr) if fr else "-"


def run(cmd, what):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s failed (exit %d): %s" % (
            what, p.returncode, (p.stderr.strip().splitlines() or ["?"])[-1]))
    return p.stdout


def looptune_sample(binary, model, threads, tokens, executor, isa, no_warm_start, prefill=0):
    cmd = [binary, "bench", "-m", model, "-t", str(threads), "-r", "1",
           "--executor", executor, "--json"]
    cmd += ["--prefill", str(prefill)] if prefill else ["-n", str(tokens)]
    if isa:
        cmd += ["--isa", isa]
    if no_warm_start:
        cmd.append("--no-warm-start")
    j = json.loads(run(cmd, "looptune bench"))
    if prefill:
        return {"tok_s": j["prefill_tok_s"]["median"], "bw_fraction": None, "isa": j.get("isa")}
    return {"tok_s": j["tok_s"]["median"], "bw_fraction": j["bw_fraction"]["median"],
            "read_gb_s": j["read_gb_s"]["median"], "isa": j.get("isa")}


def llamacpp_python_sample(python, model, threads, tokens, extra):
    cmd = [python, os.path.join(HERE, "peers", "llamacpp_decode.py"), model, "-t", str(threads),
           "-n", str(tokens), "-r", "1"] + extra
    j = json.loads(run(cmd, "llama.cpp probe"))
    return {"tok_s": j["tok_s"]["median"],
            "build": "llama-cpp-python %s" % j.get("llama_cpp_python", "?"),
            "system_info": j.get("system_info")}


def llama_bench_sample(binary, model, threads, tokens, extra, prefill=0):
    p, n = (prefill, 0) if prefill else (0, tokens)
    cmd = [binary, "-m", model, "-t", str(threads), "-p", str(p), "-n", str(n), "-r", "1",
           "-o", "json"] + extra
    tests = json.loads(run(cmd, "llama-bench"))
    gen = [t for t in tests if t.get("n_prompt") == p and t.get("n_gen") == n]
    if len(gen) != 1:
        raise RuntimeError("llama-bench gave %d %s%d results, expected 1" % (
            len(gen), "pp" if prefill else "tg", p or n))
    t = gen[0]
    return {"tok_s": float(t["avg_ts"]),
            "build": "llama.cpp build %s (%s)" % (t.get("build_number", "?"),
                                                  t.get("build_commit", "?"))}


def llama_bench_label(binary):
    """The variant's name: the build directory holding bin/llama-bench (llamacpp-avx2, ...)."""
    d = os.path.dirname(os.path.abspath(binary))
    if os.path.basename(d) == "bin":
        d = os.path.dirname(d)
    return os.path.basename(d) or binary


def llama_bench_system_info(binary):
    """llama_print_system_info() of the libllama beside the binary (llama-bench itself never
    prints it), read in a child Python through ctypes; None when there is no such library."""
    lib = os.path.join(os.path.dirname(os.path.abspath(binary)), "libllama.so")
    if not os.path.exists(lib):
        return None
    code = ("import ctypes, sys\n"
            "l = ctypes.CDLL(sys.argv[1])\n"
            "l.llama_print_system_info.restype = ctypes.c_char_p\n"
            "print(l.llama_print_system_info().decode(errors='replace').strip())\n")
    p = subprocess.run([sys.executable, "-c", code, lib], capture_output=True, text=True)
    if p.returncode != 0:
        return None
    return p.stdout.strip() or None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--looptune", default=os.path.join(HERE, "..", "build", "looptune"))
    ap.add_argument("--baseline", metavar="PATH", default=None,
                    help="a second looptune binary measured in the same rounds")
    peer = ap.add_mutually_exclusive_group()
    peer.add_argument("--llama-bench", metavar="PATH", default=None,
                      help="llama.cpp's llama-bench binary")
    peer.add_argument("--llamacpp-python", metavar="PY", default=None,
                      help="a Python with llama-cpp-python")
    ap.add_argument("--llamacpp-label", default=None,
                    help="name of the llama.cpp variant in the headings (default: the "
                         "llama-bench build directory's name, or llama-cpp-python)")
    ap.add_argument("--llamacpp-arg", action="append", default=[],
                    help="extra argument for the llama.cpp command, repeatable, written "
                         "--llamacpp-arg=-X: llama-bench's own options, or llamacpp_decode.py's "
                         "(its default is llama.cpp's fastest path; --no-extra-bufts selects the "
                         "plain ggml kernels, about half as fast on Q8_0)")
    ap.add_argument("--model", action="append", required=True, help="LABEL=PATH.gguf")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--prefill", type=int, default=0, metavar="N",
                    help="measure prefill of an N-token prompt instead of decode")
    ap.add_argument("--executor", default="looped")
    ap.add_argument("--isa", choices=["portable", "avx2", "avx512"], default=None,
                    help="force looptune's kernels to this ISA (looptune bench --isa)")
    ap.add_argument("--no-warm-start", action="store_true",
                    help="looptune with its kernels' default parameters (looptune bench "
                         "--no-warm-start)")
    ap.add_argument("--jsonl", help="also append one JSON line per case here")
    a = ap.parse_args()
    if a.tokens < 1 or a.rounds < 1 or a.prefill < 0:
        ap.error("--tokens and --rounds must be >= 1, --prefill >= 0")
    if a.prefill and a.llamacpp_python:
        ap.error("--prefill needs --llama-bench (llamacpp_decode.py measures decode only)")
    models = []
    for spec in a.model:
        if "=" not in spec:
            ap.error("--model takes LABEL=PATH, not %r" % spec)
        models.append(spec.split("=", 1))

    if a.llama_bench:
        peer_kind = "llama-bench"
        peer_label = a.llamacpp_label or llama_bench_label(a.llama_bench)
        peer_sysinfo = llama_bench_system_info(a.llama_bench)

        def peer_sample(path, t):
            return llama_bench_sample(a.llama_bench, path, t, a.tokens, a.llamacpp_arg,
                                      a.prefill)
    elif a.llamacpp_python:
        peer_kind = "llama-cpp-python"
        peer_label = a.llamacpp_label or "llama-cpp-python"
        peer_sysinfo = None  # from the first sample

        def peer_sample(path, t):
            return llamacpp_python_sample(a.llamacpp_python, path, t, a.tokens, a.llamacpp_arg)
    else:
        peer_kind = peer_label = peer_sysinfo = None
        peer_sample = None

    header_done = False
    for label, path in models:
        for t in a.threads:
            lt, frac, ll, base, base_frac, load = [], [], [], [], [], []
            isa_seen, peer_build = set(), None
            for _ in range(a.rounds):
                s = looptune_sample(a.looptune, path, t, a.tokens, a.executor, a.isa,
                                    a.no_warm_start, a.prefill)
                lt.append(s["tok_s"])
                frac.append(s["bw_fraction"])
                isa_seen.add(s["isa"] or a.isa or "?")
                load.append(os.getloadavg()[0])
                if a.baseline:
                    b = looptune_sample(a.baseline, path, t, a.tokens, a.executor, a.isa,
                                        a.no_warm_start, a.prefill)
                    base.append(b["tok_s"])
                    base_frac.append(b["bw_fraction"])
                if peer_sample:
                    p = peer_sample(path, t)
                    ll.append(p["tok_s"])
                    peer_build = p.get("build")
                    peer_sysinfo = peer_sysinfo or p.get("system_info")
            isa = "/".join(sorted(isa_seen))
            if not header_done:
                lt_head = "looptune %s%s" % (isa, "" if a.isa else " (auto)")
                if a.no_warm_start:
                    lt_head += ", no warm start"
                print("looptune: ISA %s%s, executor %s%s" % (
                    isa, " (--isa)" if a.isa else " (its own choice)", a.executor,
                    ", kernels' default parameters (--no-warm-start)" if a.no_warm_start else ""))
                if peer_kind:
                    print("llama.cpp: %s via %s%s" % (peer_label, peer_kind,
                                                      ", " + peer_build if peer_build else ""))
                    if peer_sysinfo:
                        print("llama.cpp system info: %s" % peer_sysinfo)
                print("%d rounds of %s, interleaved\n" % (
                    a.rounds, "a %d-token prompt (prefill)" % a.prefill if a.prefill
                    else "%d tokens" % a.tokens))
                ll_head = "llama.cpp %s" % (peer_label or "")
                base_head = ("| baseline tok/s min / median / max | vs baseline (median) "
                             "| baseline of read-only (median) " if a.baseline else "")
                print("| model | threads | %s tok/s min / median / max %s| %s tok/s min / median"
                      " / max | ratio (median) | looptune of read-only (median) | load 1 min "
                      "min / max |" % (lt_head, base_head, ll_head.strip()))
                print("|---|---|---|---|---|---|---|" + ("---|---|---|" if a.baseline else ""))
                header_done = True
            s_lt = stat(lt)
            row = "| %s | %d | %.1f / %.1f / %.1f | " % (label, t, s_lt["min"], s_lt["median"],
                                                        s_lt["max"])
            if base:
                s_b = stat(base)
                row += "%.1f / %.1f / %.1f | %.2fx | %s | " % (
                    s_b["min"], s_b["median"], s_b["max"], s_lt["median"] / s_b["median"],
                    fmt_frac(base_frac))
            if ll:
                s_ll = stat(ll)
                row += "%.1f / %.1f / %.1f | %.2fx | " % (s_ll["min"], s_ll["median"], s_ll["max"],
                                                          s_lt["median"] / s_ll["median"])
            else:
                row += "- | - | "
            row += "%s | %.1f / %.1f |" % (fmt_frac(frac), min(load), max(load))
            print(row, flush=True)
            if a.jsonl:
                with open(a.jsonl, "a") as f:
                    f.write(json.dumps({"model": label, "path": path, "threads": t,
                                        "tokens": a.tokens, "rounds": a.rounds,
                                        "prefill": a.prefill,
                                        "looptune": s_lt, "looptune_isa": isa,
                                        "isa_forced": bool(a.isa),
                                        "warm_start": not a.no_warm_start,
                                        "executor": a.executor,
                                        "llamacpp": stat(ll) if ll else None,
                                        "llamacpp_kind": peer_kind,
                                        "llamacpp_variant": peer_label,
                                        "llamacpp_build": peer_build,
                                        "llamacpp_system_info": peer_sysinfo,
                                        "bw_fraction": None if a.prefill else stat(frac),
                                        "baseline": stat(base) if base else None,
                                        "baseline_bw_fraction":
                                            stat(base_frac) if base and not a.prefill
                                            else None,
                                        "load_1min": stat(load)}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
