"""looptune tokenize as a command, and run on a byte-level BPE model.

- tokenize: --help; the output formats of llama-tokenize (--ids "[a, b]", the pieces
  "%6d -> '%s'", "Total number of tokens: N"); escapes processed as llama.cpp does (-p and -f)
  unless --no-escape; --no-bos; every bad invocation (no model, a missing or non-GGUF model, a
  GGUF without vocabulary, an unreadable text file, two text sources, an unknown flag) exits 1
  with one stderr line naming the problem.
- run: a random-weight model (looptune model-gen) given a byte-level vocabulary of 256 byte
  tokens and 256 merges (written here with the reference GGUF writer): the text run prints is
  exactly the bytes of the prompt's and the generated ids under GPT-2's byte mapping (built here
  as its Python original does), so tokens that end inside a UTF-8 character are printed whole,
  once, in order; the ids of the prompt are the merges' brute-force BPE of it.
"""

import os
import subprocess
import sys

import gguf_ref as G
from lt_harness import Checks, env_path, model_gen, run_cli, work_dir

NORMAL, CONTROL = 1, 3


def byte_map():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xa1, 0xad)) + list(range(0xae, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE = byte_map()
UNBYTE = {c: b for b, c in BYTE.items()}


def mapped(data):
    return "".join(BYTE[b] for b in data)


def vocab_spec(n_vocab):
    """256 byte tokens, merges of frequent pairs of a text up to n_vocab - 1 tokens, then
    <|endoftext|> (control, eos)."""
    tokens = [BYTE[b] for b in range(256)]
    merges = []
    text = ("the cat sat on the mat while the dog ran to the park and then the cat slept "
            "über naïve café 日本語 テキスト 🦙🦙")
    corpus = [mapped(w.encode()) for w in text.replace(" ", "\0 ").split("\0")]
    words = [list(w) for w in corpus if w]
    while len(tokens) < n_vocab - 1:
        counts = {}
        for w in words:
            for a, b in zip(w, w[1:]):
                counts[(a, b)] = counts.get((a, b), 0) + 1
        if not counts:
            break
        (a, b), _ = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append(a + " " + b)
        tokens.append(a + b)
        for w in words:
            i = 0
            while i + 1 < len(w):
                if w[i] == a and w[i + 1] == b:
                    w[i:i + 2] = [a + b]
                i += 1
    while len(tokens) < n_vocab - 1:  # unused fillers, never merged into
        tokens.append("<unused%d>" % len(tokens))
    tokens.append("<|endoftext|>")
    return tokens, merges


def ref_bpe(word, tokens, merges):
    """Brute force: the lowest-ranked adjacent pair merges first, the leftmost on ties."""
    rank = {m: i for i, m in enumerate(merges)}
    sym = list(mapped(word.encode("utf-8")))
    while True:
        best = min(((rank.get(sym[i] + " " + sym[i + 1], 1 << 30), i)
                    for i in range(len(sym) - 1)), default=(1 << 30, -1))
        if best[0] == 1 << 30:
            break
        i = best[1]
        sym[i:i + 2] = [sym[i] + sym[i + 1]]
    index = {t: i for i, t in enumerate(tokens)}
    return [index[s] for s in sym]


def decode(ids, tokens):
    return b"".join(bytes(UNBYTE[c] for c in tokens[i]) if not tokens[i].startswith("<")
                    else tokens[i].encode() for i in ids)


def one_line_error(ck, name, p, needle):
    err = p.stderr.strip()
    ck.check(p.returncode == 1 and len(err.splitlines()) == 1 and needle in err,
             name, "exit %d, stderr %r" % (p.returncode, err[:200]))


def main():
    ck = Checks("tokenize command")
    d = work_dir("tok_cli")
    tokens, merges = vocab_spec(512)
    eot = len(tokens) - 1
    types = [CONTROL if t.startswith("<") else NORMAL for t in tokens]
    vocab_kvs = [("tokenizer.ggml.model", G.T_STRING, "gpt2"),
                 ("tokenizer.ggml.pre", G.T_STRING, "gpt-2"),
                 ("tokenizer.ggml.tokens", G.T_ARRAY, tokens, G.T_STRING),
                 ("tokenizer.ggml.token_type", G.T_ARRAY, types, G.T_I32),
                 ("tokenizer.ggml.merges", G.T_ARRAY, merges, G.T_STRING),
                 ("tokenizer.ggml.bos_token_id", G.T_U32, eot),
                 ("tokenizer.ggml.eos_token_id", G.T_U32, eot)]
    vocab = os.path.join(d, "vocab.gguf")
    G.write_gguf(vocab, [("general.architecture", G.T_STRING, "llama")] + vocab_kvs, [])

    # ---- formats and flags
    p = run_cli(["tokenize", "--help"])
    ck.check(p.returncode == 0 and "usage: looptune tokenize" in p.stdout, "--help")
    word = "the cat"
    want = ref_bpe("the", tokens, merges) + ref_bpe(" cat", tokens, merges)
    p = run_cli(["tokenize", "-m", vocab, "-p", word])
    ck.check(p.returncode == 0 and p.stdout == "[%s]\n" % ", ".join(map(str, want)),
             "--ids format of llama-tokenize", repr(p.stdout))
    p = run_cli(["tokenize", "-m", vocab, "-p", word, "--pieces", "--show-count"])
    lines = "".join("%6d -> '%s'\n" % (i, decode([i], tokens).decode()) for i in want)
    ck.check(p.stdout == lines + "Total number of tokens: %d\n" % len(want),
             "--pieces and --show-count formats", repr(p.stdout))
    p = run_cli(["tokenize", "-m", vocab, "-p", "the<|endoftext|>"])
    ck.check(p.stdout == "[%s]\n" % ", ".join(map(str, ref_bpe("the", tokens, merges) + [eot])),
             "special tokens parsed by default", repr(p.stdout))
    p = run_cli(["tokenize", "-m", vocab, "-p", "a\\nb\\x41\\q"])
    esc = ref_bpe("a", tokens, merges) + ref_bpe("\n", tokens, merges) + \
        ref_bpe("bA", tokens, merges) + ref_bpe("\\", tokens, merges) + ref_bpe("q", tokens, merges)
    ck.check(p.stdout == "[%s]\n" % ", ".join(map(str, esc)), "escapes as llama.cpp's",
             repr(p.stdout))
    f = os.path.join(d, "text.txt")
    with open(f, "wb") as fh:
        fh.write(b"a\\nb\\x41\\q")
    p2 = run_cli(["tokenize", "-m", vocab, "-f", f])
    ck.check(p2.stdout == p.stdout, "-f processes escapes too", repr(p2.stdout))
    p = run_cli(["tokenize", "-m", vocab, "-f", f, "--no-escape"])
    raw = [i for w in ("a", "\\", "nb", "\\", "x", "41", "\\", "q") for i in ref_bpe(w, tokens, merges)]
    ck.check(p.stdout == "[%s]\n" % ", ".join(map(str, raw)), "--no-escape", repr(p.stdout))

    exe = env_path("LT_BIN")
    p = subprocess.run([exe, "tokenize", "-m", vocab, "--stdin"], input=b"the cat",
                       capture_output=True, timeout=60)
    ck.check(p.stdout == ("[%s]\n" % ", ".join(map(str, want))).encode(), "--stdin",
             repr(p.stdout))
    p = run_cli(["tokenize", "-m", vocab, "-p", ""])
    ck.check(p.returncode == 0 and p.stdout == "[]\n", "an empty text gives no ids (no BOS here)",
             repr(p.stdout))

    # ---- bad invocations
    one_line_error(ck, "no model", run_cli(["tokenize", "-p", "x"]), "no model")
    one_line_error(ck, "missing model", run_cli(["tokenize", "-m", os.path.join(d, "nope.gguf"),
                                                 "-p", "x"]), "nope.gguf")
    junk = os.path.join(d, "junk.gguf")
    with open(junk, "wb") as fh:
        fh.write(b"not a gguf at all")
    one_line_error(ck, "not a GGUF", run_cli(["tokenize", "-m", junk, "-p", "x"]), "junk.gguf")
    bare = os.path.join(d, "bare.gguf")
    G.write_gguf(bare, [("general.architecture", G.T_STRING, "llama")], [])
    one_line_error(ck, "no vocabulary", run_cli(["tokenize", "-m", bare, "-p", "x"]),
                   "has no vocabulary")
    one_line_error(ck, "missing text file", run_cli(["tokenize", "-m", vocab, "-f",
                                                     os.path.join(d, "none.txt")]), "none.txt")
    one_line_error(ck, "text file is a folder", run_cli(["tokenize", "-m", vocab, "-f", d]),
                   "cannot read")
    one_line_error(ck, "two text sources", run_cli(["tokenize", "-m", vocab, "-p", "x", "-f", f]),
                   "exactly one of")
    one_line_error(ck, "unknown flag", run_cli(["tokenize", "-m", vocab, "--bogus"]), "--bogus")

    # ---- run on a byte-level model: the printed text is the ids' bytes
    model = os.path.join(d, "model.gguf")
    base = os.path.join(d, "base.gguf")
    ok, why = model_gen(base, "f32", seed=3, preset="stories260K")
    if ck.check(ok, "model-gen", why):
        g = G.GGUFFile(base)
        kvs = [(k, f.type, f.value) + ((f.elem_type,) if f.type == G.T_ARRAY else ())
               for k, f in g.fields.items() if not k.startswith("tokenizer.")]
        tensors = [(t.name, t.ggml_type, t.ne, g.raw(t.name)) for t in g.tensors]
        G.write_gguf(model, kvs + vocab_kvs, tensors)
        prompt = "the naïve cat 🦙"
        pids = [i for w in ("the", " na\u00efve", " cat", " \U0001f999")
                for i in ref_bpe(w, tokens, merges)]
        args = ["run", "-m", model, "-p", prompt, "-n", "48", "--temp", "0", "--ignore-eos"]
        p_ids = run_cli(args + ["--print-ids"])
        gen = [int(x) for x in p_ids.stdout.split()]
        p_txt = subprocess.run([exe] + args, capture_output=True, timeout=120)
        want_txt = decode(pids + gen, tokens) + b"\n"
        partial = sum(1 for i in gen if not tokens[i].startswith("<") and
                      not _utf8_complete(decode([i], tokens)))
        ck.check(p_ids.returncode == 0 and len(gen) == 48, "run --print-ids", p_ids.stderr[-200:])
        ck.check(p_txt.returncode == 0 and p_txt.stdout == want_txt,
                 "run prints the ids' bytes (%d of 48 tokens end inside a character)" % partial,
                 "got %r, want %r" % (p_txt.stdout[:120], want_txt[:120]))
        p = run_cli(["tokenize", "-m", model, "-p", prompt])
        ck.check(p.stdout == "[%s]\n" % ", ".join(map(str, pids)),
                 "the prompt's ids: the brute-force BPE", repr(p.stdout))
    return ck.finish()


def _utf8_complete(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


if __name__ == "__main__":
    sys.exit(main())
