#!/usr/bin/env python3
"""The llama and qwen2 architectures against llama.cpp's own reading of the same files: random
models from `looptune model-gen` (qwen2 with biases and its rotation of halves, Llama 3-style
rope_freqs, tied classifier, a rope base of their own, grouped-query attention) run greedily by
looptune; llama.cpp (through llama-cpp-python) evaluates the same token sequence with logits
for every position, and the numpy reference (tests/reference/llama_ref.py) too. Prints, per
model, the worst row of max_j |a_j - b_j| / max_j |ref_j| for looptune vs llama.cpp, looptune vs
the reference and llama.cpp vs the reference.

    PYTHONPATH=tests/reference:/path/to/llama-cpp-python LLAMA_CPP_LIB_PATH=/path/to/lib \\
        python3 bench/peers/arch_vs_llamacpp.py --looptune build/looptune --work /tmp/archpeer

Measured with llama-cpp-python 0.3.36's llama.cpp (native build, f32 KV cache), looptune at
its defaults (2 threads, AVX-512), worst row over 31 positions:

    model                      dtype lt-llama.cpp   lt-ref llama.cpp-ref
    qwen2_gqa                    f32     5.95e-07 5.59e-07      2.85e-07
    qwen2_tied_f16               f16     0.000242  2.8e-07      0.000242
    qwen2_hd64_base1e6           f32     8.47e-07 8.94e-07      3.07e-07
    llama3_scaled_tied           f32     3.08e-07 2.88e-07      1.19e-07
    llama3_scaled_q8            q8_0       0.0144   0.0154        0.0142
    llama_base1e5_tied_bf16     bf16      0.00206  3.5e-07       0.00206

On f32 weights the three agree to within 1e-6 of max|logit|; llama.cpp's f16 and bf16 rows
differ by its own rounding of activations to those types, and q8_0 by both engines' int8
activations. llama.cpp refuses rope_freqs.weight in a qwen2 file (its qwen2 graph does not read
it), and so do looptune and its model-gen.
"""
import argparse
import os
import subprocess
import sys

import numpy as np

import llama_ref as R

# (name, dtype, dim, hidden, layers, heads, kv_heads, model-gen flags)
CASES = [
    ("qwen2_gqa", "f32", 128, 256, 3, 8, 2, ["--arch", "qwen2"]),
    ("qwen2_tied_f16", "f16", 128, 192, 2, 4, 1, ["--arch", "qwen2", "--tied"]),
    ("qwen2_hd64_base1e6", "f32", 256, 512, 2, 4, 2, ["--arch", "qwen2", "--rope-base",
                                                       "1000000"]),
    ("llama3_scaled_tied", "f32", 128, 256, 2, 4, 2,
     ["--rope-scaling", "32,1,4,16", "--rope-base", "500000", "--tied"]),
    ("llama3_scaled_q8", "q8_0", 128, 256, 2, 8, 2, ["--rope-scaling", "8,1,4,32",
                                                     "--rope-base", "500000"]),
    ("llama_base1e5_tied_bf16", "bf16", 96, 160, 2, 3, 1, ["--rope-base", "100000", "--tied"]),
]
PROMPT = [1, 37, 250, 4, 300, 100, 7]
N = 24


def sh(args):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(map(str, args)), p.stderr[-2000:]))
    return p


def looptune_run(bin_, path, work, name, vocab):
    dump = os.path.join(work, name + ".f32")
    p = sh([bin_, "run", "-m", path, "--prompt-ids", ",".join(map(str, PROMPT)), "-n", N,
            "--temp", "0", "--ignore-eos", "--print-ids", "--dump-logits", dump])
    ids = [int(t) for ln in p.stdout.splitlines() if ln.strip() and
           all(t.lstrip("-").isdigit() for t in ln.split()) for t in ln.split()]
    return ids, np.fromfile(dump, "<f4").reshape(-1, vocab).astype(np.float64)


def llamacpp_rows(path, tokens):
    from llama_cpp import Llama
    # f32 KV cache (type 0), so llama.cpp keys and values are not rounded to f16
    m = Llama(path, n_ctx=64, n_batch=64, logits_all=True, verbose=False, n_threads=2,
              type_k=0, type_v=0)
    m.eval(tokens)
    return np.array(m.scores[:len(tokens)], dtype=np.float64)


def worst(a, b, ref):
    return float(np.max(np.max(np.abs(a - b), axis=1) / np.max(np.abs(ref), axis=1)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--looptune", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    print("%-26s %8s %12s %12s %12s" % ("model", "dtype", "lt-llama.cpp", "lt-ref",
                                          "llama.cpp-ref"))
    for seed, (name, dtype, dim, hid, layers, heads, kv, flags) in enumerate(CASES, 1):
        path = os.path.join(a.work, name + ".gguf")
        sh([a.looptune, "model-gen", "--dim", dim, "--hidden", hid, "--layers", layers,
            "--heads", heads, "--kv-heads", kv, "--vocab", 512, "--seq-len", 64, "--dtype",
            dtype, "--seed", seed, "-o", path] + flags)
        model = R.load_gguf(path)
        ids, lt = looptune_run(a.looptune, path, a.work, name, 512)
        fed = PROMPT + ids[:-1]
        lc = llamacpp_rows(path, fed)
        ref = R.logits_for(model, fed)
        print("%-26s %8s %12.3g %12.3g %12.3g" % (name, dtype, worst(lt, lc, ref),
                                                  worst(lt, ref, ref), worst(lc, ref, ref)))


if __name__ == "__main__":
    main()
