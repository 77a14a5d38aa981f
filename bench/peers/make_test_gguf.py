#!/usr/bin/env python3
"""Test aid: writes a random-weight Llama GGUF with PyPI's `gguf` package.

It exists so that llamacpp_decode.py can be exercised without looptune's own
`model-gen`. The file uses the same layout looptune's generator targets:
general.architecture=llama, the llama.* hyper-parameters, an SPM-style
vocabulary (tokenizer.ggml.model=llama with tokens/scores/token_type: <unk>,
<s>, </s>, 256 <0xXX> byte tokens, then synthetic pieces), and llama.cpp's
tensor names (token_embd, blk.N.attn_q, ..., output_norm, optional output) in
f32, f16, bf16 or q8_0. Norm weights are always f32. Decode speed depends only
on shapes and dtypes, so random weights are fine for timing.

    python3 make_test_gguf.py --preset stories15M --dtype q8_0 -o /tmp/s15m-q8_0.gguf
"""
import argparse
import sys

import numpy as np
import gguf

# (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab, seq_len, tied)
PRESETS = {
    # The shapes of looptune's model-gen presets, which always write an
    # untied output.weight; tied=True omits it (llama.cpp then reuses
    # token_embd), a case worth loading too.
    "stories260K": (64, 172, 5, 8, 4, 512, 512, False),
    "stories15M": (288, 768, 6, 6, 6, 32000, 256, False),
    "stories110M": (768, 2048, 12, 12, 12, 32000, 1024, False),
    "1B": (2048, 5632, 16, 32, 8, 32000, 2048, False),
}

QTYPES = {
    "f32": gguf.GGMLQuantizationType.F32,
    "f16": gguf.GGMLQuantizationType.F16,
    "bf16": gguf.GGMLQuantizationType.BF16,
    "q8_0": gguf.GGMLQuantizationType.Q8_0,
}
# general.file_type values (llama_ftype) for the dtypes above.
FTYPES = {"f32": 0, "f16": 1, "q8_0": 7, "bf16": 32}


def vocab(n):
    """An SPM-like vocabulary of n unique pieces, laid out as Llama 2's."""
    toks = [b"<unk>", b"<s>", b"</s>"]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    toks += [b"<0x%02X>" % i for i in range(256)]
    types += [gguf.TokenType.BYTE] * 256
    letters = "abcdefghijklmnopqrstuvwxyz"
    i = 0
    while len(toks) < n:
        word, k = "", i
        while True:
            word = letters[k % 26] + word
            k = k // 26 - 1
            if k < 0:
                break
        toks.append(("\u2581" + word).encode() if i % 2 == 0 else word.encode())
        types.append(gguf.TokenType.NORMAL)
        i += 1
    toks, types = toks[:n], types[:n]
    scores = [0.0] * len(toks)
    for j in range(259, len(toks)):
        scores[j] = -float(j - 259)
    return toks, scores, [int(t) for t in types]


def weight(rng, qtype, rows, cols):
    w = (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float32)
    if qtype == gguf.GGMLQuantizationType.F32:
        return w, None
    if qtype == gguf.GGMLQuantizationType.F16:
        return w.astype(np.float16), None
    return gguf.quants.quantize(w, qtype), qtype


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", choices=PRESETS, default="stories15M")
    ap.add_argument("--dtype", choices=QTYPES, default="f32")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tied", action="store_true", help="omit output.weight")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()

    dim, hidden, n_layers, n_heads, n_kv, n_vocab, seq_len, tied = PRESETS[a.preset]
    tied = tied or a.tied
    head_dim = dim // n_heads
    if a.dtype == "q8_0" and (dim % 32 or hidden % 32):
        ap.error("q8_0 needs dim and hidden_dim divisible by 32 (%s: %d, %d)"
                 % (a.preset, dim, hidden))
    qt = QTYPES[a.dtype]
    rng = np.random.default_rng(a.seed)

    w = gguf.GGUFWriter(a.output, "llama")
    w.add_name("random-" + a.preset)
    w.add_file_type(FTYPES[a.dtype])
    w.add_context_length(seq_len)
    w.add_embedding_length(dim)
    w.add_block_count(n_layers)
    w.add_feed_forward_length(hidden)
    w.add_head_count(n_heads)
    w.add_head_count_kv(n_kv)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_vocab_size(n_vocab)
    toks, scores, types = vocab(n_vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    def put(name, rows, cols):
        data, raw = weight(rng, qt, rows, cols)
        w.add_tensor(name, data, raw_dtype=raw)

    ones = np.ones(dim, dtype=np.float32)
    # numpy shape is (out, in): the reverse of GGML's ne.
    put("token_embd.weight", n_vocab, dim)
    for i in range(n_layers):
        p = "blk.%d." % i
        w.add_tensor(p + "attn_norm.weight", ones)
        put(p + "attn_q.weight", n_heads * head_dim, dim)
        put(p + "attn_k.weight", n_kv * head_dim, dim)
        put(p + "attn_v.weight", n_kv * head_dim, dim)
        put(p + "attn_output.weight", dim, n_heads * head_dim)
        w.add_tensor(p + "ffn_norm.weight", ones)
        put(p + "ffn_gate.weight", hidden, dim)
        put(p + "ffn_down.weight", dim, hidden)
        put(p + "ffn_up.weight", hidden, dim)
    w.add_tensor("output_norm.weight", ones)
    if not tied:
        put("output.weight", n_vocab, dim)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
