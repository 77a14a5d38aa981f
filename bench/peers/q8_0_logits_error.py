#!/usr/bin/env python3
"""Logits error of q8_0 decoding against the float64 numpy reference, for llama.cpp and for
looptune's activation modes side by side: the measurement behind the int8-activation bound of
tests/reference (lt_harness.REL_TOL_Q8_0_INT8).

For each q8_0 model (the random shapes and the stories15M preset of test_logits, same seeds),
every token is fed one at a time, so every row comes from one-token (matrix-vector) products:
- llama.cpp through llama-cpp-python, with its default weight buffers (Q8_0 repacked; one-row
  products on its AVX512-VNNI kernel) and with --no-extra-bufts (plain ggml q8_0 x q8_0 dots);
  both quantise activations to q8_0 (int8, f16 scale per 32);
- looptune `run --prefill-batch 1` with --param matvec.act_int8=1, then act_int8=0 act_int16=1,
  then both 0 (f32 activations).
A row's error is max_j |got_j - ref_j| / max_j |ref_j|, ref from the same tokens (each engine's
own greedy tokens, fed to the reference). Prints one line per (model, engine): worst and median
row error, then the worst per engine over all models.

    PYTHONPATH=tests/reference /opt/peers/venv-noomp/bin/python \\
        bench/peers/q8_0_logits_error.py --looptune build/looptune --work /tmp/q8err \\
        [--vocab-file tests/data/llama2-tokenizer.bin]
"""
import argparse
import os
import subprocess
import sys

import numpy as np

import llama_ref as R

# test_logits.py's shapes and q8_0 seeds (seed 11 + 1 per (shape, dtype), q8_0 last of four)
SHAPES = [
    ("mha_hd16", 64, 96, 2, 4, 4, 15),
    ("gqa_hd16", 128, 256, 3, 8, 2, 19),
    ("gqa_hd8", 64, 128, 2, 8, 4, 23),
    ("mqa_hd32", 128, 192, 2, 4, 1, 27),
]
PROMPT = [1, 37, 250, 4, 511, 100]
PROMPT_15M = [1, 9038, 2501, 263, 931]
N = 20


def sh(args):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(map(str, args)), p.stderr[-2000:]))
    return p


def models(bin_, work, vocab_file):
    out = []
    for name, dim, hidden, layers, heads, kv, seed in SHAPES:
        path = os.path.join(work, name + "_q8_0.gguf")
        if not os.path.exists(path):
            sh([bin_, "model-gen", "--dim", dim, "--hidden", hidden, "--layers", layers,
                "--heads", heads, "--kv-heads", kv, "--vocab", 512, "--seq-len", 64,
                "--dtype", "q8_0", "--seed", seed, "-o", path])
        out.append((name, path, PROMPT))
    path = os.path.join(work, "stories15M_q8_0.gguf")
    if not os.path.exists(path):
        extra = ["--vocab-file", vocab_file] if vocab_file else []
        sh([bin_, "model-gen", "--preset", "stories15M", "--dtype", "q8_0", "--seed", 3] +
           extra + ["-o", path])
    out.append(("stories15M", path, PROMPT_15M))
    return out


def row_errors(ref, got):
    return np.max(np.abs(got - ref), axis=1) / np.max(np.abs(ref), axis=1)


def looptune_rows(bin_, path, prompt, vocab, work, tag, params):
    dump = os.path.join(work, tag + ".f32")
    p = sh([bin_, "run", "-m", path, "--prompt-ids", ",".join(map(str, prompt)), "-n", N,
            "--temp", 0, "--ignore-eos", "--print-ids", "--prefill-batch", 1, "--no-warm-start",
            "--threads", 1, "--dump-logits", dump] + sum((["--param", x] for x in params), []))
    ids = [int(t) for t in p.stdout.split()]
    rows = np.fromfile(dump, dtype="<f4").reshape(-1, vocab).astype(np.float64)
    return list(prompt) + ids[:-1], rows


def llamacpp_rows(path, fed, extra_bufts):
    import llama_cpp
    from llama_cpp import Llama
    lib = llama_cpp.llama_cpp
    saved = lib.llama_model_default_params
    if not extra_bufts:
        def no_extra():
            p = saved()
            p.use_extra_bufts = False
            return p
        lib.llama_model_default_params = no_extra
    try:
        llm = Llama(model_path=path, n_ctx=len(fed) + 1, n_batch=1, n_ubatch=1, n_threads=1,
                    n_threads_batch=1, n_gpu_layers=0, logits_all=False, verbose=False)
    finally:
        lib.llama_model_default_params = saved
    ctx, nv = llm.ctx, llm.n_vocab()
    one = (llama_cpp.llama_token * 1)()
    rows = []
    for tok in fed:
        one[0] = tok
        if llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(one, 1)) != 0:
            sys.exit("llama_decode failed")
        rows.append(np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1),
                                          shape=(nv,)).astype(np.float64).copy())
    del llm
    return np.stack(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--looptune", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--vocab-file", default=None)
    ap.add_argument("--no-llamacpp", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    modes = [("looptune int8", ["matvec.act_int8=1"]),
             ("looptune int16", ["matvec.act_int8=0", "matvec.act_int16=1"]),
             ("looptune f32", ["matvec.act_int8=0", "matvec.act_int16=0"])]
    worst = {}
    for name, path, prompt in models(a.looptune, a.work, a.vocab_file):
        model = R.load_gguf(path)
        vocab = model.cfg.vocab_size
        results = []
        for label, params in modes:
            fed, rows = looptune_rows(a.looptune, path, prompt, vocab, a.work,
                                      name + "_" + label.split()[1], params)
            results.append((label, row_errors(R.logits_for(model, fed), rows)))
        if not a.no_llamacpp:
            # the reference's own greedy tokens, fed to llama.cpp
            ids, _ = R.greedy(model, prompt, N)
            fed = list(prompt) + ids[:-1]
            ref = R.logits_for(model, fed)
            for label, extra in (("llama.cpp default", True), ("llama.cpp no-extra-bufts", False)):
                results.append((label, row_errors(ref, llamacpp_rows(path, fed, extra))))
        for label, e in results:
            print("%-12s %-26s worst %.3g  median %.3g  (%d rows)" %
                  (name, label, e.max(), np.median(e), len(e)), flush=True)
            worst[label] = max(worst.get(label, 0.0), float(e.max()))
    print("worst over all models:")
    for label, w in worst.items():
        print("  %-26s %.3g x max|logit|" % (label, w))


if __name__ == "__main__":
    main()
