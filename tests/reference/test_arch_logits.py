"""End-to-end logits of the architectures beyond llama2.c's: qwen2 (q, k, v biases, rotary
embedding of halves) and llama files as Llama 3.x, SmolLM2 and Mistral carry them (rope_freqs
frequency factors, a rope base of their own, tied or untied classifier), with grouped-query
attention. Models come from `looptune model-gen` and from the reference's own GGUF writer
(random biases and factors). Every logits row of a greedy run (prompt and generated positions)
is compared with the numpy reference (llama_ref: transformers' definitions), within the
tolerance of lt_harness (1e-4 x max|logit| for f32/f16, 0.04 for q8_0's int8 activations).
The runs also hold across ISAs, threads and prefill batching, the looped and dispatch
executors and the fusion passes give bit-identical logits, model-gen's rope_freqs equal
Meta's llama3 scaling as transformers computes it, and gguf-py (llama.cpp's GGUF library, from
PyPI) finds every key and tensor of the architecture under its own names."""

import os
import sys

import numpy as np

import llama_ref as R
import lt_harness as H

PROMPT = [1, 37, 250, 4, 300, 100, 7]
N = 20
SEQ = 64

# model-gen cases: (name, dtype, shape, model-gen flags). Shapes: dim, hidden, layers, heads,
# kv_heads, vocab. The scaling is Llama 3.2's (factor 32, low 1, high 4) with an original
# context of 16, so positions past 4 already fall into the scaled band.
GEN = [
    ("qwen2_gqa_hd16", "f32", (128, 256, 3, 8, 2, 512), ["--arch", "qwen2"]),
    ("qwen2_mqa_hd32_tied", "f16", (128, 192, 2, 4, 1, 512), ["--arch", "qwen2", "--tied"]),
    ("qwen2_hd64_q8", "q8_0", (256, 512, 2, 4, 2, 512),
     ["--arch", "qwen2", "--rope-base", "1000000"]),
    ("llama3_scaled_tied", "f32", (128, 256, 2, 4, 2, 512),
     ["--rope-scaling", "32,1,4,16", "--rope-base", "500000", "--tied"]),
    ("llama3_scaled_q8", "q8_0", (128, 256, 2, 8, 2, 512),
     ["--rope-scaling", "8,1,4,32", "--rope-base", "500000"]),
    ("smollm_like_base", "bf16", (96, 160, 2, 3, 1, 512), ["--rope-base", "100000", "--tied"]),
    ("llama_gqa_scaled_f16", "f16", (64, 128, 2, 4, 2, 512), ["--rope-scaling",
                                                                      "4,1,2,8"]),
]
# (case, run flags): each must match the reference and the default run.
VARIANTS = [
    ("prefill1", ["--prefill-batch", "1"]),
    ("prefill3_threads1", ["--prefill-batch", "3", "--threads", "1"]),
] + [("isa_" + isa, ["--isa", isa]) for isa in H.machine_isas()]
VARIANT_CASES = {"qwen2_gqa_hd16", "llama3_scaled_tied", "qwen2_hd64_q8"}
# (case, run flags) that must give bit-identical logits to the default run.
IDENTICAL = [
    ("dispatch", ["--executor", "dispatch"]),
    ("no_fuse", ["--no-fuse-pass"]),
    ("threads1", ["--threads", "1"]),
]


def gen_args(shape):
    dim, hidden, layers, heads, kv, vocab = shape
    return dict(dim=dim, hidden=hidden, layers=layers, heads=heads, kv_heads=kv, vocab=vocab,
                seq=SEQ)


def model_gen(path, dtype, shape, flags, seed):
    s = gen_args(shape)
    args = ["model-gen", "--dim", s["dim"], "--hidden", s["hidden"], "--layers", s["layers"],
            "--heads", s["heads"], "--kv-heads", s["kv_heads"], "--vocab", s["vocab"],
            "--seq-len", SEQ, "--dtype", dtype, "--seed", seed, "-o", path] + flags
    p = H.run_cli(args)
    return p.returncode == 0, H.describe_failure(p)


def flag(flags, name, default=None):
    return flags[flags.index(name) + 1] if name in flags else default


def check_file(ck, name, g, model, shape, flags):
    """What model-gen wrote: the arch, the biases (qwen2), the classifier, rope_freqs."""
    arch = flag(flags, "--arch", "llama")
    ck.check(g.get("general.architecture") == arch and model.cfg.arch == arch,
             name + " architecture " + arch)
    dim, _, layers, heads, kv, _ = shape
    hd = dim // heads
    want_bias = arch == "qwen2"
    names = set(g.by_name)
    biases = {"blk.%d.attn_%s.bias" % (i, w) for i in range(layers) for w in "qkv"}
    ck.check((biases <= names) if want_bias else not (biases & names), name + " biases",
             "present: %s" % sorted(biases & names)[:3])
    if want_bias:
        shapes_ok = all(g.by_name["blk.%d.attn_%s.bias" % (i, w)].ne[0] ==
                        (dim if w == "q" else kv * hd) for i in range(layers) for w in "qkv")
        ck.check(shapes_ok, name + " bias shapes")
        ck.check(np.std(model.layers[0]["bq"]) > 0.1, name + " biases are not negligible")
    tied = "--tied" in flags
    ck.check(("output.weight" in names) != tied, name + (" tied" if tied else " untied"))
    scaling = flag(flags, "--rope-scaling")
    base = float(flag(flags, "--rope-base", "10000"))
    ck.check(abs(model.cfg.rope_base - base) <= 1e-6 * base, name + " rope base %g" % base)
    if scaling:
        factor, low, high, ctx = (float(v) for v in scaling.split(","))
        inv = 1.0 / base ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
        want = inv / R.llama3_inv_freq(base, hd, factor, low, high, ctx)
        got = model.rope_freqs
        ok = got is not None and got.shape == want.shape and np.allclose(got, want, rtol=2e-6)
        ck.check(ok, name + " rope_freqs = transformers' llama3 scaling",
                 "got %s want %s" % (None if got is None else got[:6], want[:6]))
        ck.check(got is not None and got.min() < got.max(), name + " factors vary (1 to %g)" %
                 factor)
    else:
        ck.check(model.rope_freqs is None, name + " no rope_freqs")


def check_with_gguf_py(ck, name, path):
    """The file as gguf-py (the GGUF library of llama.cpp, a PyPI package) reads it: every key
    the architecture needs under gguf-py's own key names, every tensor one of gguf-py's tensor
    names for the architecture (weight or bias)."""
    try:
        import gguf
    except ImportError:
        ck.note("%s: gguf (PyPI) is not installed: gguf-py cross-check skipped" % name)
        return
    r = gguf.GGUFReader(path)
    arch_field = r.fields["general.architecture"]
    arch = bytes(arch_field.parts[arch_field.data[0]]).decode()
    by_name = {v: k for k, v in gguf.MODEL_ARCH_NAMES.items()}
    ck.check(arch in by_name, name + " gguf-py knows the architecture " + arch)
    if arch not in by_name:
        return
    K = gguf.Keys
    need = [K.LLM.CONTEXT_LENGTH, K.LLM.EMBEDDING_LENGTH, K.LLM.BLOCK_COUNT,
            K.LLM.FEED_FORWARD_LENGTH, K.Attention.HEAD_COUNT, K.Attention.HEAD_COUNT_KV,
            K.Attention.LAYERNORM_RMS_EPS, K.Rope.FREQ_BASE, K.Rope.DIMENSION_COUNT]
    missing = [k.format(arch=arch) for k in need if k.format(arch=arch) not in r.fields]
    ck.check(not missing, name + " gguf-py finds every key",
             "missing %s" % missing if missing else "")
    layers = int(r.fields[K.LLM.BLOCK_COUNT.format(arch=arch)].parts[-1][0])
    allowed = set()
    for t in gguf.MODEL_TENSORS[by_name[arch]]:
        base = gguf.TENSOR_NAMES[t]
        for bid in range(layers):
            allowed |= {base.format(bid=bid) + ".weight", base.format(bid=bid) + ".bias"}
    unknown = [t.name for t in r.tensors if t.name not in allowed]
    ck.check(not unknown, name + " every tensor has a gguf-py name of " + arch,
             "unknown: %s" % unknown[:3] if unknown else "")


def bits(a):
    return a.astype(np.float32).view(np.uint32)


def run_model(ck, name, path, model, dtype, variants):
    vocab = model.cfg.vocab_size
    base = H.run_greedy(path, PROMPT, N, vocab, name)
    ref = H.check_run(ck, name, model, PROMPT, N, base, dtype)
    worst = [] if ref is None else [H.compare_logits(ref, base.logits, dtype)[1]]
    if ref is None:
        return worst
    for vname, extra in variants:
        vn = "%s %s" % (name, vname)
        res = H.run_greedy(path, PROMPT, N, vocab, vn.replace(" ", "_"), extra)
        if H.check_run(ck, vn, model, PROMPT, N, res, dtype) is not None:
            worst.append(H.compare_logits(R.logits_for(model, PROMPT + res.ids[:-1]),
                                          res.logits, dtype)[1])
    for vname, extra in IDENTICAL:
        vn = "%s %s" % (name, vname)
        res = H.run_greedy(path, PROMPT, N, vocab, vn.replace(" ", "_"), extra)
        ck.check(res.ok and res.ids == base.ids and res.logits.shape == base.logits.shape and
                 np.array_equal(bits(res.logits), bits(base.logits)),
                 vn + ": bit-identical logits at every position", res.message)
    return worst


def gen_case(ck, name, dtype, shape, flags, seed):
    path = os.path.join(H.work_dir("arch"), name + ".gguf")
    ok, msg = model_gen(path, dtype, shape, flags, seed)
    if not ck.check(ok, name + " model-gen", msg):
        return []
    try:
        g = R.GGUFFile(path)
        model = R.load_gguf(g)
    except R.FormatError as e:
        ck.check(False, name + " model-gen output is a valid GGUF", str(e))
        return []
    check_file(ck, name, g, model, shape, flags)
    check_with_gguf_py(ck, name, path)
    return run_model(ck, name, path, model, dtype,
                     VARIANTS if name in VARIANT_CASES else [])


def foreign_case(ck, name, arch, dtype, tied, with_freqs, seed):
    """A file from the reference's writer: random biases (qwen2), random positive factors."""
    rng = np.random.default_rng(seed)
    freqs = rng.uniform(0.5, 40.0, 8) if with_freqs else None
    m = R.random_model(rng, 64, 128, 2, 4, 2, 512, SEQ, base=300000.0, arch=arch,
                       rope_freqs=freqs)
    emb = m.tok_emb * 0.3
    m = R.Model(m.cfg, emb, m.layers, m.out_norm, emb if tied else m.w_out * 0.3,
                m.rope_freqs)
    path = os.path.join(H.work_dir("arch"), name + ".gguf")
    R.model_to_gguf(m, path, R.GGML_TYPE_BY_NAME[dtype], tie_output=tied)
    model = R.load_gguf(path)
    ck.check(model.cfg.arch == arch and (model.rope_freqs is not None) == with_freqs,
             name + " file carries its arch and factors")
    return run_model(ck, name, path, model, dtype, [])


def main():
    ck = H.Checks("test_arch_logits")
    worst = {}
    seed = 40
    for name, dtype, shape, flags in GEN:
        seed += 1
        for r in gen_case(ck, name, dtype, shape, flags, seed):
            worst[dtype] = max(worst.get(dtype, 0.0), r)
    for name, arch, dtype, tied, with_freqs in [
            ("foreign_qwen2_untied", "qwen2", "f32", False, False),
            ("foreign_qwen2_tied_f16", "qwen2", "f16", True, False),
            ("foreign_llama_freqs", "llama", "f32", False, True)]:
        seed += 1
        for r in foreign_case(ck, name, arch, dtype, tied, with_freqs, seed):
            worst[dtype] = max(worst.get(dtype, 0.0), r)
    for key, r in sorted(worst.items()):
        ck.note("worst error/bound for %s: %.3g (bound %g * max|logit| + %g)" %
                (key, r, H.REL_TOL[key], H.ABS_TOL))
    return ck.finish()


if __name__ == "__main__":
    sys.exit(main())
