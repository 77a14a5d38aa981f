"""looptune tokenize against Hugging Face's `tokenizers` (the PyPI package) on hard strings:
Unicode of every script, whitespace runs, digits, CJK, emoji, contractions, special tokens
written in the text (parsed, and with --no-parse-special kept as text), and the pieces printed
by --pieces joined back into the text.

- smollm: llama.cpp has no ggml-vocab file for it, so this test trains a small byte-level BPE
  with `tokenizers` under SmolLM2's pre-tokenizer (its tokenizer.json: Sequence[Digits(
  individual_digits=True), ByteLevel(add_prefix_space=False, use_regex=True)], which llama.cpp
  reads as tokenizer.ggml.pre = smollm: \\p{N}, then GPT-2's regex), writes it as a GGUF with the
  `gguf` package (model gpt2, pre smollm, tokens, token types, merges) and compares; the same
  vocabulary without tokenizer.ggml.pre against llama.cpp's default regexes, each a Split.
- llama-bpe and qwen2: llama.cpp's vocabulary files (fetched as test_tokenizer_llamacpp.py does),
  rebuilt in `tokenizers` from the file's tokens and merges with the models' published
  pre-tokenizer regexes (tokenizer.json of Llama 3 and Qwen2, in their original (?i:...) form).
"""

import json
import os
import random
import subprocess
import sys

from lt_harness import Checks, run_cli, work_dir

try:
    import gguf
    import tokenizers
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
except ImportError as e:  # scripts/deps.sh installs them
    print("skipped: the Hugging Face tokenizer comparison: %s (run scripts/deps.sh)" % e)
    sys.exit(0)

import gguf_ref
import test_tokenizer_llamacpp as llamacpp

# tokenizer.ggml.token_type values
NORMAL, CONTROL = 1, 3

LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
             r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
            r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

HARD = [
    "", " ", "  ", "\t", "\n", "\n\n\n", " \n \n", "\r\n", "   \t\t  x", "a  b   c    d",
    "Hello world", " Hello world", "Hello World!", "HELLO wOrLd", "hello\nworld\n",
    "I'm, you're, he's, they've, we'll, she'd, DON'T, I'M, It'S",  "'s 's' ''s'",
    "1", "12", "123", "1234", "12345678901234567890", "3.14159 and 1,000,000 and -7e10",
    "x1y22z333", " 42 ", "١٢٣ ٤٥٦", "Ⅻ ⅻ ½ ² ³",
    "你好，世界！这是一个测试。", "日本語のテキストとカタカナ ー", "한국어 텍스트입니다",
    "Россия и Україна", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "ไทย ภาษา",
    "Café naïve résumé façade Ångström", "e\u0301 combining \u0308a",
    "🦙🦙 emoji 😀👍🏽🇺🇸 ❤️ 👨‍👩‍👧‍👦", "zero\u200bwidth no\u00a0break\u3000ideo \u2028line",
    "\u0085next line\u180emongolian", "tab\there\u000bvt\u000cff",
    "def foo(x):\n    return x ** 2  # comment\n\n\tpass", "a=b+c*d/e-f%g^h|i&j~k`l",
    "!!!???...---((()))[[]]{{}}<<>>", "$100 + 50% = <hmm>", "@user #tag http://x.y/z?a=1&b=2",
    "    leading", "trailing    ", "\u00e9\u00e9\u00e9 \u00ff\u00fe", "~~~ ``` ''' \"\"\"",
]


def specials_corpus(specials):
    out = []
    a = specials[0]
    out += [a, a + a, " " + a + " ", "x" + a + "y", a[:-1], "<" + a + ">", a + "\n" + a]
    for s in specials[1:]:
        out += [s + "user\nHi there!" + a, "\n" + s + "  " + s, s[:len(s) // 2] + s]
    return out


def random_corpus(seed, n, specials):
    rng = random.Random(seed)
    frags = [h for h in HARD if h] + specials + [" ", "  ", "\n", "'", "1", "22", "x"]
    return ["".join(rng.choice(frags) for _ in range(rng.randint(1, 6))) for _ in range(n)]


def bytelevel_tokenizer(vocab, merges, pre, specials, ignore_merges=False):
    """A `tokenizers` byte-level BPE from a vocabulary (text -> id) and merges (pairs)."""
    tok = Tokenizer(models.BPE(vocab, merges, ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    return tok


def split_pre(regex):
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def smollm_pre():
    return pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])


def parse_ids(line):
    body = line.strip()[1:-1]
    return [int(x) for x in body.split(",")] if body.strip() else []


def run_texts(ck, gguf_path, texts, tag, extra):
    """looptune's ids for each text (one run, a -f file per text), or None after a FAIL."""
    d = work_dir("tok_hf/" + tag)
    args = ["tokenize", "-m", gguf_path, "--no-bos", "--no-escape"] + list(extra)
    for i, t in enumerate(texts):
        path = os.path.join(d, "%04d.txt" % i)
        with open(path, "wb") as f:
            f.write(t.encode("utf-8"))
        args += ["-f", path]
    p = run_cli(args, timeout=300)
    if not ck.check(p.returncode == 0, tag + ": tokenize runs", p.stderr.strip()[:300]):
        return None
    return [parse_ids(line) for line in p.stdout.split("\n")[:len(texts)]]


def compare(ck, name, gguf_path, tok, texts):
    """Ids with special tokens parsed and kept as text, and --pieces joined back into the text."""
    for parse in (True, False):
        tok.encode_special_tokens = not parse
        want = [tok.encode(t, add_special_tokens=False).ids for t in texts]
        got = run_texts(ck, gguf_path, texts, "%s-%d" % (name, parse),
                        [] if parse else ["--no-parse-special"])
        if got is None:
            continue
        bad = [i for i in range(len(texts)) if got[i] != want[i]]
        detail = ""
        if bad:
            i = bad[0]
            detail = "%d of %d differ; first %r: tokenizers %s, looptune %s" % (
                len(bad), len(texts), texts[i][:60], want[i], got[i])
        ck.check(not bad, "%s: %d texts, special tokens %s: the ids of tokenizers" % (
            name, len(texts), "parsed" if parse else "as text"), detail)
    tok.encode_special_tokens = False
    # --pieces: every token's bytes, in order, give the text back
    sample = [t for t in texts if t]
    d = work_dir("tok_hf/%s-pieces" % name)
    args = [os.environ["LT_BIN"], "tokenize", "-m", gguf_path, "--no-bos", "--no-escape",
            "--pieces"]
    for i, t in enumerate(sample):
        path = os.path.join(d, "%04d.txt" % i)
        with open(path, "wb") as f:
            f.write(t.encode("utf-8"))
        args += ["-f", path]
    p = subprocess.run(args, capture_output=True, timeout=300)
    raw, pos, ok, first = p.stdout, 0, 0, ""
    for t in sample:  # lines "%6d -> 'PIECE'\n", PIECE raw bytes: read them by the known ids
        joined = b""
        for id_ in tok.encode(t, add_special_tokens=False).ids:
            head = b"%6d -> '" % id_
            if not raw.startswith(head, pos):
                break
            pos += len(head)
            end = raw.find(b"'\n", pos)
            while end >= 0 and not (end + 2 == len(raw) or
                                    raw[end + 2:end + 12].lstrip(b" ")[:1].isdigit()):
                end = raw.find(b"'\n", end + 1)  # a piece holding "'\n" itself
            if end < 0:
                break
            joined += raw[pos:end]
            pos = end + 2
        good = joined == t.encode("utf-8")
        ok += good
        if not good and not first:
            first = "%r -> %r" % (t[:40], joined[:80])
        if not good:
            break
    ck.check(p.returncode == 0 and ok == len(sample),
             "%s: --pieces of %d texts join back into the text" % (name, len(sample)), first)


def smollm(ck):
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    rng = random.Random(7)
    train = [h for h in HARD if h] * 20 + random_corpus(11, 400, [])
    words = ["the", " the", "token", "izer", " merge", "ing", " and", "123", " Hello", " world"]
    train += [" ".join(rng.choice(words) for _ in range(12)) for _ in range(300)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = smollm_pre()
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(train, trainers.BpeTrainer(
        vocab_size=1200, min_frequency=2, special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    vocab = tok.get_vocab()
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    ck.check([vocab[t] for t in tokens] == list(range(len(tokens))), "smollm: ids are dense")
    merges = json.loads(tok.to_str())["model"]["merges"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in merges]
    ck.note("smollm: trained %d tokens, %d merges with tokenizers %s" % (
        len(tokens), len(merges), tokenizers.__version__))
    texts = HARD + specials_corpus(specials) + random_corpus(3, 300, specials)
    compare(ck, "smollm", write_trained(tokens, merges, specials, vocab, "smollm"), tok, texts)
    # No tokenizer.ggml.pre: llama.cpp's default regexes, each a Split of its own in tokenizers.
    regexes = (r"[\p{P}\$\+<=>\^~\|]+",
               r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
               r"\p{N}+", r"[0-9][0-9][0-9]")
    default = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(r), behavior="isolated", invert=False) for r in regexes] +
        [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.pre_tokenizer = default
    compare(ck, "default", write_trained(tokens, merges, specials, vocab, None), tok, texts)


def write_trained(tokens, merges, specials, vocab, pre):
    """The trained vocabulary as a GGUF (gguf package); pre None: no tokenizer.ggml.pre."""
    path = os.path.join(work_dir("tok_hf"), "trained-%s.gguf" % (pre or "none"))
    w = gguf.GGUFWriter(path, "llama")
    w.add_tokenizer_model("gpt2")
    if pre:
        w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types([CONTROL if t in specials else NORMAL for t in tokens])
    w.add_token_merges(merges)
    w.add_bos_token_id(vocab["<|im_start|>"])
    w.add_eos_token_id(vocab["<|im_end|>"])
    w.add_add_bos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def read_gguf_vocab(path):
    """Tokens, merges and token types, read by the reference's own GGUF reader."""
    g = gguf_ref.GGUFFile(path)
    return (g.get("tokenizer.ggml.tokens"), g.get("tokenizer.ggml.merges"),
            [int(t) for t in g.get("tokenizer.ggml.token_type")])


def real_vocab(ck, vocab_dir, name, regex, ignore_merges):
    path = os.path.join(vocab_dir, "ggml-vocab-%s.gguf" % name)
    tokens, merges, types = read_gguf_vocab(path)
    specials = [t for t, ty in zip(tokens, types) if ty == CONTROL]
    tok = bytelevel_tokenizer({t: i for i, t in enumerate(tokens)},
                              [tuple(m.split(" ", 1)) for m in merges], split_pre(regex),
                              specials, ignore_merges)
    chat = [s for s in specials if s in ("<|im_start|>", "<|im_end|>", "<|endoftext|>",
                                          "<|begin_of_text|>", "<|eot_id|>",
                                          "<|start_header_id|>", "<|end_header_id|>")]
    ck.note("%s: %d tokens, %d merges, %d control tokens" % (
        name, len(tokens), len(merges), len(specials)))
    texts = HARD + specials_corpus(chat) + random_corpus(5, 200, chat)
    compare(ck, name, path, tok, texts)


def main():
    ck = Checks("tokenizer vs tokenizers")
    smollm(ck)
    vocab_dir, why = llamacpp.fetch_vocabs()
    if vocab_dir is None:
        print("skipped: llama-bpe and qwen2 from llama.cpp's vocabulary files: %s" % why)
    else:
        real_vocab(ck, vocab_dir, "llama-bpe", LLAMA3_RE, True)
        real_vocab(ck, vocab_dir, "qwen2", QWEN2_RE, False)
    return ck.finish()


if __name__ == "__main__":
    sys.exit(main())
