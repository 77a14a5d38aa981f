"""Bad-input test: the looptune CLI must reject damaged model files and bad arguments with a
non-zero exit (not a signal), and exactly one line on stderr that names the problem. Damaged
GGUF files are made by patching a small generated model at field offsets found with the
reference's own GGUF parser; damaged llama2.c files from stories260K.bin; llama and qwen2
files written by the reference with one thing wrong (architecture, tensors, shapes, key types). A seeded fuzz pass
damages the GGUF header region at random: no crash, hang or multi-line error allowed."""

import os
import re
import struct
import sys

import numpy as np

import llama_ref as R
import lt_harness as H

SHAPE = dict(dim=64, hidden=96, layers=2, heads=4, kv_heads=2, vocab=512, seq=64)
GOOD_ARGS = ["--prompt-ids", "1,2,3", "-n", "4", "--temp", "0"]

# Key words a message may use for a file that ends too early (or a count that cannot fit in
# what is left of it).
TRUNC = (r"truncat|past (the )?end|end of file|unexpected end|too short|short read|eof|"
         r"file (of|has) \d+ bytes")


def expect_error(ck, name, args, patterns, must_name=(), env=None):
    """Runs looptune (env: as for H.run_cli); passes if it exits with a status > 0, prints
    exactly one non-empty line on stderr, that line matches every regex in patterns
    (case-insensitive), and contains every string in must_name."""
    p = H.run_cli(args, timeout=60, env=env)
    lines = [ln for ln in (p.stderr or "").splitlines() if ln.strip()]
    problems = []
    if p.returncode == -999:
        problems.append("timed out")
    elif p.returncode < 0:
        problems.append("killed by signal %d" % -p.returncode)
    elif p.returncode == 0:
        problems.append("exit status 0")
    elif p.returncode >= 128:
        problems.append("exit status %d (crash?)" % p.returncode)
    if len(lines) != 1:
        problems.append("%d stderr lines" % len(lines))
    text = "\n".join(lines)
    for pat in patterns:
        if not re.search(pat, text, re.IGNORECASE):
            problems.append("no /%s/" % pat)
    for s in must_name:
        if s not in text:
            problems.append("does not name %r" % s)
    shown = lines[0] if len(lines) == 1 else " | ".join(lines[:3])
    return ck.check(not problems, name, "%s -- stderr: %s" % ("; ".join(problems), shown[:200])
                    if problems else shown[:200])


def patched(base, out_path, edits=(), cut=None):
    """Writes a copy of base (bytes) with edits [(offset, bytes)] applied, cut to `cut` bytes."""
    b = bytearray(base)
    for off, data in edits:
        b[off:off + len(data)] = data
    if cut is not None:
        b = b[:cut]
    with open(out_path, "wb") as f:
        f.write(bytes(b))
    return out_path


def next_field_pos(g, field):
    """File offset just after a metadata field (the next key, or the first tensor info)."""
    later = [f.pos for f in g.fields.values() if f.pos > field.pos]
    return min(later) if later else g.tensors[0].name_pos - 8


_serial = [0]


def next_name(wd, ext):
    """A neutral file name (bad_07.gguf), so the name itself cannot satisfy a key word."""
    _serial[0] += 1
    return os.path.join(wd, "bad_%02d.%s" % (_serial[0], ext))


def run_args(path):
    return ["run", "-m", path] + GOOD_ARGS


def gguf_cases(ck, wd, good):
    base = open(good, "rb").read()
    g = R.GGUFFile(good)
    t_by = g.by_name
    q = t_by["blk.0.attn_q.weight"]
    k = t_by["blk.0.attn_k.weight"]
    down = t_by["blk.1.ffn_down.weight"]
    up = t_by["blk.1.ffn_up.weight"]
    last = max(g.tensors, key=lambda t: t.data_pos)

    def case(name, patterns, must_name=(), edits=(), cut=None):
        path = patched(base, next_name(wd, "gguf"), edits, cut)
        expect_error(ck, "gguf " + name, run_args(path), patterns,
                     (os.path.basename(path),) + tuple(must_name))

    # truncated at several points: in the magic, the header, the metadata, the tensor infos,
    # the padding before the data, and inside the data
    arch = g.fields["general.architecture"]
    biggest = max(g.fields.values(), key=lambda f: len(str(f.value)))
    cuts = [("in_magic", 3), ("in_header", 13), ("in_first_key", arch.value_pos + 5),
            ("in_metadata_" + biggest.key, (biggest.value_pos + next_field_pos(g, biggest)) // 2),
            ("in_tensor_infos", t_by["blk.1.attn_v.weight"].name_pos + 3),
            ("after_tensor_infos", max(t.offset_pos for t in g.tensors) + 8),
            ("in_data", down.data_pos + down.nbytes // 2),
            ("last_byte_of_data", last.data_pos + last.nbytes - 1)]
    for label, at in cuts:
        case("truncated_" + label, [TRUNC], cut=at)
    case("truncated_empty", [TRUNC + r"|empty|magic|format|header"], cut=0)

    case("bad_magic", [r"magic|format|header"], edits=[(0, b"GGUX")])
    case("bad_version", [r"version"], edits=[(4, struct.pack("<I", 99))])
    case("offset_past_end", [r"past (the )?end|beyond|out of (range|bounds)|end of file"],
         (down.name,),
         edits=[(down.offset_pos, struct.pack("<Q", -(-len(base) // g.alignment) *
                                              g.alignment))])
    case("offset_huge", [r"past (the )?end|beyond|out of (range|bounds)|end of file|overflow"],
         (down.name,), edits=[(down.offset_pos, struct.pack("<Q", (1 << 64) - g.alignment))])
    case("offset_unaligned", [r"align"], (down.name,),
         edits=[(down.offset_pos, struct.pack("<Q", down.offset + 1))])
    dims = r"dim|shape|size|overflow|large|past (the )?end|range|mismatch|expected"
    case("absurd_dimension", [dims], (q.name,), edits=[(q.ne_pos[1], struct.pack("<Q", 1 << 40))])
    case("overflowing_dimension", [dims], (q.name,),
         edits=[(q.ne_pos[0], struct.pack("<Q", 1 << 62)), (q.ne_pos[1], struct.pack("<Q", 8))])
    case("zero_dimension", [dims + r"|zero"], (q.name,),
         edits=[(q.ne_pos[1], struct.pack("<Q", 0))])
    case("absurd_n_dims", [r"dim"], (q.name,), edits=[(q.n_dims_pos, struct.pack("<I", 77))])
    case("unknown_tensor_type", [r"type"], (k.name,),
         edits=[(k.type_pos, struct.pack("<I", 99))])
    case("unsupported_tensor_type_q8_1", [r"type"], (k.name,),
         edits=[(k.type_pos, struct.pack("<I", 9))])
    garbage = up.name.replace("ffn_up", "ffn_xx").encode()
    assert len(garbage) == len(up.name)
    path = patched(base, next_name(wd, "gguf"), [(up.name_pos, garbage)])
    # the message may name the tensor that is missing or the one it does not expect
    expect_error(ck, "gguf missing_tensor", run_args(path),
                 [r"missing|not found|unknown|unexpected|absent|no tensor",
                  re.escape(up.name) + "|" + re.escape(garbage.decode())],
                 (os.path.basename(path),))
    case("string_length_huge", [TRUNC + r"|length|string|large"],
         edits=[(arch.pos, struct.pack("<Q", 1 << 60))])
    tokens = g.fields.get("tokenizer.ggml.tokens")
    if tokens is not None:
        case("array_count_huge", [TRUNC + r"|count|array|large|length"],
             edits=[(tokens.value_pos + 4, struct.pack("<Q", 1 << 61))])
    case("unknown_kv_type", [r"type"], edits=[(arch.value_pos - 4, struct.pack("<I", 42))])
    blocks = g.fields["llama.block_count"]
    width = {R.T_U32: "<I", R.T_I32: "<i", R.T_U64: "<Q", R.T_I64: "<q"}.get(blocks.type)
    if width:
        case("block_count_too_big", [r"blk\.2\.|block_count|layers|missing|not found"],
             edits=[(blocks.value_pos, struct.pack(width, 3))])
        case("block_count_absurd", [r"blk\.|block_count|layers|missing|not found|large|range"],
             edits=[(blocks.value_pos, struct.pack(width, 1 << 30))])
    emb = g.fields["llama.embedding_length"]
    width = {R.T_U32: "<I", R.T_I32: "<i", R.T_U64: "<Q", R.T_I64: "<q"}.get(emb.type)
    if width:
        case("embedding_length_mismatch", [r"shape|dim|mismatch|embedding_length|expected"],
             edits=[(emb.value_pos, struct.pack(width, 96))])


def arch_cases(ck, wd):
    """Files the reference writes from a small llama model with q, k, v biases and rope_freqs
    (llama.cpp reads both in llama files), each changed in one place: an unknown
    architecture, a missing required tensor, a bias of the wrong shape, rope_freqs of the
    wrong length or with a factor of 0, a tensor no model uses (rope_freqs in a qwen2 file
    too), a key of the wrong type, llama keys in a qwen2 file. The unchanged file runs."""
    rng = np.random.default_rng(9)
    m = R.random_model(rng, 64, 96, 2, 4, 2, 512, 64, arch="qwen2",
                       rope_freqs=rng.uniform(1.0, 8.0, 8))
    m.cfg.arch = "llama"
    kvs0, tensors0 = R.model_gguf_parts(m)

    def write(kvs, tensors):
        path = next_name(wd, "gguf")
        R.write_gguf(path, kvs, tensors)
        return path

    def kv_set(kvs, key, vtype, value):
        return [(key, vtype, value) if kv[0] == key else kv for kv in kvs]

    def tensor_set(tensors, name, arr=None, drop=False):
        out = []
        for t in tensors:
            if t[0] != name:
                out.append(t)
            elif not drop:
                out.append((name, R.GGML_F32, tuple(reversed(arr.shape)),
                            R.quantize(R.GGML_F32, arr)))
        return out

    def extra(tensors, name, n):
        arr = np.ones(n)
        return tensors + [(name, R.GGML_F32, (n,), R.quantize(R.GGML_F32, arr))]

    good = write(kvs0, tensors0)
    p = H.run_cli(run_args(good))
    ck.check(p.returncode == 0, "arch: the unchanged llama file runs", H.describe_failure(p))
    as_qwen2 = [(k.replace("llama.", "qwen2."), t, "qwen2" if k == "general.architecture" else v)
                for k, t, v in kvs0]
    cases = [
        ("unknown_arch", kv_set(kvs0, "general.architecture", R.T_STRING, "mamba"), tensors0,
         [r"architecture", r"not supported|llama and qwen2|unsupported"], ["mamba"]),
        ("missing_tensor", kvs0, tensor_set(tensors0, "blk.1.attn_v.weight", drop=True),
         [r"missing"], ["blk.1.attn_v.weight"]),
        ("missing_norm", kvs0, tensor_set(tensors0, "output_norm.weight", drop=True),
         [r"missing"], ["output_norm.weight"]),
        ("bias_shape", kvs0, tensor_set(tensors0, "blk.0.attn_k.bias", np.zeros(64)),
         [r"shape"], ["blk.0.attn_k.bias", "32"]),
        ("rope_freqs_length", kvs0, tensor_set(tensors0, "rope_freqs.weight", np.ones(16)),
         [r"shape"], ["rope_freqs.weight", "16", "8"]),
        ("rope_freqs_zero", kvs0,
         tensor_set(tensors0, "rope_freqs.weight", np.array([1.0, 2, 0, 4, 5, 6, 7, 8])),
         [r"positive|> ?0"], ["rope_freqs.weight"]),
        ("unused_tensor", kvs0, extra(tensors0, "blk.0.attn_output.bias", 64),
         [r"not one .* uses|unused|unexpected|unknown"], ["blk.0.attn_output.bias"]),
        ("rope_freqs_in_qwen2", as_qwen2, tensors0,
         [r"not one .* uses|unused|unexpected|unknown"], ["rope_freqs.weight", "qwen2"]),
        ("key_type", kv_set(kvs0, "llama.rope.freq_base", R.T_STRING, "1e6"), tensors0,
         [r"type"], ["llama.rope.freq_base"]),
        ("llama_keys_in_qwen2", kv_set(kvs0, "general.architecture", R.T_STRING, "qwen2"),
         tensors0, [r"missing"], ["qwen2."]),
        ("partial_rotary", kv_set(kvs0, "llama.rope.dimension_count", R.T_U32, 8), tensors0,
         [r"partial|rotary"], ["llama.rope.dimension_count"]),
    ]
    for name, kvs, tensors, patterns, must in cases:
        path = write(kvs, tensors)
        expect_error(ck, "arch " + name, run_args(path), patterns,
                     (os.path.basename(path),) + tuple(must))


def fuzz_cases(ck, wd, good, trials=150):
    """Random damage to the header, metadata and tensor infos (seeded, so reproducible): the
    CLI may accept the file or reject it, but never crash, hang, or print more than one line
    when it fails."""
    base = open(good, "rb").read()
    g = R.GGUFFile(good)
    rng = np.random.default_rng(2024)
    bad = []
    for i in range(trials):
        b = bytearray(base)
        kind = i % 3
        if kind == 0:    # one random byte
            b[rng.integers(0, g.data_start)] = rng.integers(0, 256)
        elif kind == 1:  # a random 8-byte value (lengths, counts, dims, offsets)
            at = int(rng.integers(0, g.data_start - 8))
            b[at:at + 8] = struct.pack("<Q", int(rng.integers(0, 1 << 63)) >> int(
                rng.integers(0, 63)))
        else:            # a random cut
            b = b[:int(rng.integers(0, len(b)))]
        path = os.path.join(wd, "fuzz.gguf")
        with open(path, "wb") as f:
            f.write(bytes(b))
        p = H.run_cli(run_args(path), timeout=60)
        lines = [ln for ln in (p.stderr or "").splitlines() if ln.strip()]
        if p.returncode < 0 or p.returncode >= 128 or (p.returncode != 0 and len(lines) != 1):
            bad.append("trial %d: %s" % (i, H.describe_failure(p)))
            with open(os.path.join(wd, "fuzz_fail_%d.gguf" % i), "wb") as f:
                f.write(bytes(b))
    ck.check(not bad, "gguf fuzz: %d damaged files, no crash or multi-line error" % trials,
             "; ".join(bad[:3]))


def llama2c_cases(ck, wd, src):
    base = open(src, "rb").read()
    n = len(base)
    for label, at in [("in_header", 20), ("in_embedding", 1000), ("in_layers", n // 2),
                      ("last_float", n - 4)]:
        path = patched(base, next_name(wd, "bin"), cut=at)
        expect_error(ck, "llama2c truncated_" + label, run_args(path),
                     [TRUNC + r"|size|bytes|expected|header"], (os.path.basename(path),))
    absurd = [("dim_huge", 0, 1 << 30), ("dim_negative", 0, -64), ("layers_zero", 2, 0),
              ("layers_huge", 2, 1 << 30), ("heads_zero", 3, 0), ("heads_not_dividing", 3, 7),
              ("kv_heads_above_heads", 4, 16), ("vocab_zero", 5, 0), ("seq_len_negative", 6, -5),
              ("hidden_huge", 1, 0x7FFFFFFF)]
    for label, field, value in absurd:
        path = patched(base, next_name(wd, "bin"), [(4 * field, struct.pack("<i", value))])
        expect_error(ck, "llama2c " + label, run_args(path),
                     [r"dim|hidden|layer|head|vocab|seq|header|size|invalid|range|expected"],
                     (os.path.basename(path),))


def isa_cases(ck, run):
    """An ISA the CPU cannot run is an error naming what it runs: on this machine (every ISA
    above what /proc/cpuinfo shows) and on the smaller machines LT_ISA_MAX makes of it; the
    ones it can run, run. A bad LT_ISA_MAX is an error too."""
    order = ["portable", "avx2", "avx512"]
    real = H.machine_isas()
    for cap in [None] + real[:-1]:
        has = real if cap is None else real[:real.index(cap) + 1]
        env = {"LT_ISA_MAX": cap}
        where = "this CPU" if cap is None else "LT_ISA_MAX=" + cap
        for isa in order:
            # run's summary says "isa NAME"; bench --json has "isa":"NAME"
            for cmd, said in ((run, "isa " + isa),
                              (["bench", "-m", run[2], "-n", "2", "-r", "1", "--json"],
                               '"isa":"%s"' % isa)):
                args = cmd + (GOOD_ARGS if cmd is run else []) + ["--isa", isa]
                name = "cli %s --isa %s on %s" % (cmd[0], isa, where)
                if isa in has:
                    p = H.run_cli(args, timeout=120, env=env)
                    ck.check(p.returncode == 0 and said in p.stderr + p.stdout,
                             name + " runs it", (p.stderr or "").strip()[-200:])
                else:
                    expect_error(ck, name + " is refused", args,
                                 [r"not available", r"runs " + ", ".join(has) + r"\b"],
                                 (isa,), env=env)
    expect_error(ck, "cli LT_ISA_MAX=sse9", run + GOOD_ARGS, [r"LT_ISA_MAX", r"sse9"],
                 env={"LT_ISA_MAX": "sse9"})


def cli_cases(ck, good):
    run = ["run", "-m", good]
    expect_error(ck, "cli empty prompt", run + ["-p", "", "-n", "4", "--temp", "0"],
                 [r"prompt"])
    expect_error(ck, "cli -n beyond context", run + ["--prompt-ids", "1,2,3", "-n", "1000",
                                                     "--temp", "0"], [r"context"])
    expect_error(ck, "cli prompt longer than context",
                 run + ["--prompt-ids", ",".join(["5"] * 70), "-n", "1", "--temp", "0"],
                 [r"context"])
    expect_error(ck, "cli unknown flag", run + GOOD_ARGS + ["--frobnicate"],
                 [r"unknown option|unrecognized option|unknown flag", r"frobnicate"])
    expect_error(ck, "cli missing -m", ["run"] + GOOD_ARGS, [r"-m\b|model"])
    missing = os.path.join(H.work_dir("bad_input"), "absent_42.gguf")
    expect_error(ck, "cli nonexistent file", run_args(missing),
                 [r"no such file|not found|cannot open|can't open|does not exist|open"],
                 ("absent_42.gguf",))
    expect_error(ck, "cli --prompt-ids 1,x", run + ["--prompt-ids", "1,x", "-n", "4"],
                 [r"prompt-ids|token id|invalid"])
    expect_error(ck, "cli --prompt-ids empty item", run + ["--prompt-ids", "1,,2", "-n", "4"],
                 [r"prompt-ids|token id|invalid|empty"])
    expect_error(ck, "cli token id = vocab", run + ["--prompt-ids", "1,512", "-n", "4"],
                 [r"512", r"vocab|range"])
    expect_error(ck, "cli token id negative", run + ["--prompt-ids", "1,-5", "-n", "4"],
                 [r"prompt-ids|range|negative|invalid|vocab"])
    expect_error(ck, "cli -n not a number", run + ["--prompt-ids", "1,2", "-n", "abc"],
                 [r"-n\b|number|invalid|tokens"])
    expect_error(ck, "cli --isa unknown", run + GOOD_ARGS + ["--isa", "sse9"],
                 [r"isa|sse9"])
    isa_cases(ck, run)
    gen = ["model-gen", "--dim", "64", "--hidden", "96", "--layers", "1", "--heads", "4",
           "--vocab", "512", "-o", os.path.join(H.work_dir("bad_input"), "gen_never.gguf")]
    expect_error(ck, "cli model-gen --arch gpt2", gen + ["--arch", "gpt2"], [r"--arch", r"gpt2"])
    for value in ("32,1,4", "32,1,4,8192,9", "x,1,4,8192", "32,4,1,8192", "0.5,1,4,8192"):
        expect_error(ck, "cli model-gen --rope-scaling " + value,
                     gen + ["--rope-scaling", value], [r"--rope-scaling"], (value,))
    expect_error(ck, "cli model-gen --arch qwen2 --rope-scaling",
                 gen + ["--arch", "qwen2", "--rope-scaling", "8,1,4,64"],
                 [r"rope_freqs|rope scaling", r"qwen2"])
    expect_error(ck, "cli model-gen --preset unknown", gen[:1] + ["--preset", "qwen3", "-o",
                                                                  gen[-1]], [r"preset", r"qwen3"])
    expect_error(ck, "cli unknown command", ["frobnicate"], [r"command|frobnicate"])
    # online tuning and the optimizer service
    expect_error(ck, "cli --tune bogus", run + GOOD_ARGS + ["--tune", "bogus"], [r"--tune", r"bogus"])
    expect_error(ck, "cli --tune online with file telemetry",
                 run + GOOD_ARGS + ["--tune", "online", "--telemetry", "file:/dev/null"],
                 [r"--tune online", r"telemetry kafka"])
    expect_error(ck, "cli --explore-share 0.9", run + GOOD_ARGS + ["--tune", "online",
                                                                   "--explore-share", "0.9"],
                 [r"explore-share", r"0\.9"])
    expect_error(ck, "cli optimizer without broker", ["optimizer"], [r"broker"])
    for flag, value, pat in [("--explore-share", "2", r"explore-share"),
                             ("--min-throughput", "1.5", r"min-throughput"),
                             ("--trial-pairs", "1", r"trial-pairs"),
                             ("--phase-tokens", "0", r"phase-tokens"),
                             ("--strategy", "magic", r"strateg|magic"),
                             ("--duration", "-3", r"duration"),
                             ("-X", "no.such.property=1", r"no\.such\.property")]:
        expect_error(ck, "cli optimizer %s %s" % (flag, value),
                     ["optimizer", "--brokers", "127.0.0.1:1", flag, value], [pat])
    expect_error(ck, "cli optimizer stray argument", ["optimizer", "--brokers", "127.0.0.1:1", "x"],
                 [r"unexpected argument"])
    expect_error(ck, "cli model-gen unknown dtype",
                 ["model-gen", "--preset", "stories260K", "--dtype", "q3_x", "-o",
                  os.path.join(H.work_dir("bad_input"), "never.gguf")], [r"dtype|q3_x"])


def main():
    ck = H.Checks("test_bad_input")
    wd = H.work_dir("bad_input")
    good = os.path.join(wd, "good.gguf")
    ok, msg = H.model_gen(good, "f32", seed=5, shape=SHAPE)
    if ck.check(ok, "model-gen small model", msg):
        p = H.run_cli(run_args(good))
        ck.check(p.returncode == 0, "the unpatched model runs", H.describe_failure(p))
        gguf_cases(ck, wd, good)
        arch_cases(ck, wd)
        fuzz_cases(ck, wd, good)
        cli_cases(ck, good)
    src = os.path.join(H.env_path("LT_DATA_DIR"), "stories260K.bin")
    if ck.check(os.path.exists(src), "stories260K.bin present", src):
        p = H.run_cli(run_args(src))
        ck.check(p.returncode == 0, "the unpatched llama2.c model runs", H.describe_failure(p))
        llama2c_cases(ck, wd, src)
    return ck.finish()


if __name__ == "__main__":
    sys.exit(main())
