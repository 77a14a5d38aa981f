#!/usr/bin/env python3
"""Decode speed of llama.cpp (through llama-cpp-python) on one GGUF file.

Loads the model on the CPU (mmap, no mlock), then R times: clears the KV
cache, evaluates a P-token prompt, and generates N tokens
greedily, one llama_decode() call per token. Only the llama_decode() calls of
the N generated tokens are timed (perf_counter around each call); the argmax
that picks the next token and the batch set-up are outside the timed region,
so the figure is pure decode speed. llama.cpp's own counters (t_eval_ms,
n_eval from llama_perf_context) are reported beside it as a cross-check.
One extra, untimed run warms the page cache and the caches first.

The prompt is fed one token per llama_decode() by default (--prompt-mode
serial), so every matrix product has one row. Reason: a native build with
GCC 12 on an AMX machine miscompiles ggml's AMX tile set-up (the stores that
fill the tile configuration are dropped before ldtilecfg), and the first Q8_0
product with more than one row dies with a general-protection fault. One-row
products take ggml's AVX512-VNNI path and are unaffected; the timed decode is
the same either way. --prompt-mode batch feeds the prompt in one call.
--no-extra-bufts loads the weights without llama.cpp's extra buffer types
(AMX / repacked layouts), i.e. on its plain CPU kernels.

    python3 llamacpp_decode.py MODEL.gguf --threads 2 --prompt 16 --gen 128 --runs 7

Prints one JSON object: tok_s {min, median, max} over the runs, the same from
llama.cpp's counters, the per-run figures, threads, model, versions and
llama.cpp's system-info line (which shows OPENMP = 1 for an OpenMP build).
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import numpy as np
import llama_cpp
from llama_cpp import Llama


def summary(xs):
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs)}


def prompt_ids(n_prompt, n_vocab, bos):
    """A fixed prompt: BOS, then ids spread over the vocabulary (the content
    does not change the cost of decoding; a fixed one keeps runs identical)."""
    ids = [bos] if bos >= 0 else []
    i = 0
    while len(ids) < n_prompt:
        ids.append(300 + (i * 7919) % max(n_vocab - 300, 1))
        i += 1
    return ids[:n_prompt]


def decode_one(ctx, tok_arr, n):
    """Runs llama_decode on the first n ids of tok_arr and returns the
    elapsed seconds of that call alone."""
    batch = llama_cpp.llama_batch_get_one(tok_arr, n)
    t0 = time.perf_counter()
    rc = llama_cpp.llama_decode(ctx, batch)
    llama_cpp.llama_synchronize(ctx)
    t1 = time.perf_counter()
    if rc != 0:
        raise RuntimeError("llama_decode returned %d" % rc)
    return t1 - t0


def one_run(llm, prompt, n_gen, serial):
    """One prompt + n_gen greedy tokens. Returns (tok/s by our timer,
    tok/s by llama.cpp's counters, generated ids)."""
    ctx = llm.ctx
    n_vocab = llm.n_vocab()
    mem = llama_cpp.llama_get_memory(ctx)
    llama_cpp.llama_memory_clear(mem, True)

    if serial:
        for tok in prompt:
            decode_one(ctx, (llama_cpp.llama_token * 1)(tok), 1)
    else:
        decode_one(ctx, (llama_cpp.llama_token * len(prompt))(*prompt), len(prompt))
    llama_cpp.llama_perf_context_reset(ctx)

    one = (llama_cpp.llama_token * 1)()
    elapsed = 0.0
    out = []
    for _ in range(n_gen):
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), shape=(n_vocab,))
        tok = int(np.argmax(logits))
        out.append(tok)
        one[0] = tok
        elapsed += decode_one(ctx, one, 1)

    perf = llama_cpp.llama_perf_context(ctx)
    own = n_gen / elapsed
    internal = (perf.n_eval * 1000.0 / perf.t_eval_ms) if perf.t_eval_ms > 0 else float("nan")
    if perf.n_eval != n_gen:
        raise RuntimeError("llama.cpp counted %d decodes, expected %d" % (perf.n_eval, n_gen))
    return own, internal, out


def main():
    ap = argparse.ArgumentParser(description="llama.cpp decode speed on a GGUF file")
    ap.add_argument("model", help="GGUF file")
    ap.add_argument("-t", "--threads", type=int, default=1)
    ap.add_argument("-p", "--prompt", type=int, default=16, help="prompt tokens")
    ap.add_argument("-n", "--gen", type=int, default=128, help="generated (timed) tokens")
    ap.add_argument("-r", "--runs", type=int, default=5)
    ap.add_argument("--flash-attn", action="store_true", help="enable flash attention")
    ap.add_argument("--prompt-mode", choices=["serial", "batch"], default="serial",
                    help="prompt one token per call (default) or in one batch")
    ap.add_argument("--no-extra-bufts", action="store_true",
                    help="no AMX / repacked weight buffers: llama.cpp's plain CPU kernels")
    ap.add_argument("--no-warmup", action="store_true")
    a = ap.parse_args()
    if a.threads < 1 or a.prompt < 1 or a.gen < 1 or a.runs < 1:
        ap.error("threads, prompt, gen and runs must be >= 1")
    if not os.path.isfile(a.model):
        ap.error("no such file: %s" % a.model)

    n_ctx = a.prompt + a.gen
    if a.no_extra_bufts:
        # Llama() takes no such argument; it fills its model parameters from
        # llama_cpp.llama_cpp.llama_model_default_params(), so wrap that.
        lib = llama_cpp.llama_cpp
        default_params = lib.llama_model_default_params

        def no_extra():
            p = default_params()
            p.use_extra_bufts = False
            return p
        lib.llama_model_default_params = no_extra
    llm = Llama(
        model_path=a.model,
        n_ctx=n_ctx,
        n_batch=max(a.prompt, 1),
        n_ubatch=max(a.prompt, 1),
        n_threads=a.threads,
        n_threads_batch=a.threads,
        n_gpu_layers=0,
        use_mmap=True,
        use_mlock=False,
        flash_attn=a.flash_attn,
        logits_all=False,
        verbose=bool(os.environ.get("LLAMACPP_VERBOSE")),
    )
    if llm.n_ctx() < n_ctx:
        sys.exit("context of %d tokens is smaller than prompt + gen = %d" % (llm.n_ctx(), n_ctx))
    prompt = prompt_ids(a.prompt, llm.n_vocab(), llm.token_bos())

    if not a.no_warmup:
        one_run(llm, prompt, min(a.gen, 16), a.prompt_mode == "serial")
    own, internal, gens = [], [], []
    for _ in range(a.runs):
        o, i, toks = one_run(llm, prompt, a.gen, a.prompt_mode == "serial")
        own.append(o)
        internal.append(i)
        gens.append(toks)
    # Greedy decoding of the same prompt must give the same tokens every run.
    deterministic = all(g == gens[0] for g in gens)

    meta = llm.metadata
    result = {
        "tok_s": summary(own),
        "tok_s_llama_counters": summary(internal),
        "runs_tok_s": own,
        "threads": a.threads,
        "model": os.path.basename(a.model),
        "model_bytes": os.path.getsize(a.model),
        "file_type": meta.get("general.file_type"),
        "prompt_tokens": a.prompt,
        "gen_tokens": a.gen,
        "runs": a.runs,
        "n_ctx": llm.n_ctx(),
        "flash_attn": a.flash_attn,
        "prompt_mode": a.prompt_mode,
        "extra_bufts": not a.no_extra_bufts,
        "greedy_deterministic": deterministic,
        "llama_cpp_python": llama_cpp.__version__,
        "system_info": llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
        "loadavg": os.getloadavg(),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
