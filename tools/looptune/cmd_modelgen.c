/* looptune model-gen: writes a random-weight llama or qwen2 GGUF of a
 * preset or an explicit shape. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "looptune/model.h"

static const char *const modelgen_help =
    "usage: looptune model-gen (--preset NAME | --dim D --hidden H --layers L --heads NH\n"
    "                          [--kv-heads NKV] --vocab V [--seq-len S]) [options] -o FILE\n"
    "\n"
    "Writes a random-weight llama or qwen2 model as GGUF (llama.cpp loads it too),\n"
    "deterministic for a seed.\n"
    "\n"
    "  --preset NAME     stories260K, stories15M (dim 288, 6 layers), stories110M (dim 768,\n"
    "                    12 layers), 1B (dim 2048, 16 layers, 32 heads, 8 KV heads), and the\n"
    "                    published shapes of smollm2-135M, qwen2-0.5B, llama3.2-1B (tied,\n"
    "                    their rope theta; llama3.2-1B with its rope scaling)\n"
    "  --arch A          llama (default) or qwen2 (q, k, v biases, NEOX rope)\n"
    "  --tied, --untied  classifier tied to token_embd (no output.weight) or its own\n"
    "                    (default: untied; a preset's own)\n"
    "  --rope-scaling F,LO,HI,CTX  Llama 3 scaling: factor, low_freq_factor,\n"
    "                    high_freq_factor, original context; writes rope_freqs.weight\n"
    "  --dim, --hidden, --layers, --heads, --kv-heads, --vocab, --seq-len   explicit shape\n"
    "  --dtype T         f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1 (widths % 32 == 0),\n"
    "                    q2_k, q3_k, q4_k, q5_k, q6_k (widths % 256 == 0), or a mix with\n"
    "                    llama.cpp's type per tensor: q3_k_m, q4_k_m, q5_k_m (default f32)\n"
    "  --seed S          random seed (default 1)\n"
    "  --vocab-file F    embed this llama2.c tokenizer.bin (e.g. the Llama 2 vocabulary);\n"
    "                    default: a synthetic vocabulary under which any text tokenizes\n"
    "  --rope-base X     rope theta (default 10000, or the preset's)\n"
    "  -o, --output F    output file\n"
    "  -h, --help        this help\n";

int lt_cmd_modelgen(int argc, char **argv) {
    const char *cmd = "model-gen";
    const char *preset = NULL, *out = NULL;
    lt_modelgen_opts o = {.dtype = LT_F32, .seed = 1};
    lt_llama_config shape = {0};
    float rope_base = 0.0f; /* 0: not given */
    const char *arch = NULL, *scaling = NULL;
    int tied = -1; /* -1: not given */
    bool explicit_shape = false;
    enum { O_PRESET = 256, O_DIM, O_HID, O_LAY, O_HEADS, O_KV, O_VOCAB, O_SEQ, O_DTYPE, O_SEED,
           O_VF, O_ROPE, O_ARCH, O_TIED, O_UNTIED, O_SCALING };
    static const struct option opts[] = {
        {"preset", required_argument, 0, O_PRESET}, {"dim", required_argument, 0, O_DIM},
        {"hidden", required_argument, 0, O_HID},    {"layers", required_argument, 0, O_LAY},
        {"heads", required_argument, 0, O_HEADS},   {"kv-heads", required_argument, 0, O_KV},
        {"vocab", required_argument, 0, O_VOCAB},   {"seq-len", required_argument, 0, O_SEQ},
        {"dtype", required_argument, 0, O_DTYPE},   {"seed", required_argument, 0, O_SEED},
        {"vocab-file", required_argument, 0, O_VF}, {"rope-base", required_argument, 0, O_ROPE},
        {"arch", required_argument, 0, O_ARCH},     {"tied", no_argument, 0, O_TIED},
        {"untied", no_argument, 0, O_UNTIED},
        {"rope-scaling", required_argument, 0, O_SCALING},
        {"output", required_argument, 0, 'o'},      {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    static const struct {
        int code;
        const char *name;
        int64_t lo, hi;
        size_t field;
    } dims[] = {
        {O_DIM, "--dim", 2, 65536, offsetof(lt_llama_config, dim)},
        {O_HID, "--hidden", 1, 262144, offsetof(lt_llama_config, hidden_dim)},
        {O_LAY, "--layers", 1, 1024, offsetof(lt_llama_config, n_layers)},
        {O_HEADS, "--heads", 1, 1024, offsetof(lt_llama_config, n_heads)},
        {O_KV, "--kv-heads", 1, 1024, offsetof(lt_llama_config, n_kv_heads)},
        {O_VOCAB, "--vocab", 1, 1 << 20, offsetof(lt_llama_config, vocab_size)},
        {O_SEQ, "--seq-len", 1, 1 << 20, offsetof(lt_llama_config, seq_len)},
    };
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
        bool handled = false;
        for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
            if (c != dims[i].code) continue;
            int64_t *field = (int64_t *)((char *)&shape + dims[i].field);
            if (!lt_cli_parse_i64(optarg, dims[i].lo, dims[i].hi, field))
                return lt_cli_fail(cmd, "bad %s '%s': expected %lld..%lld", dims[i].name, optarg,
                                   (long long)dims[i].lo, (long long)dims[i].hi);
            explicit_shape = handled = true;
        }
        if (handled) continue;
        switch (c) {
        case O_PRESET: preset = optarg; break;
        case O_DTYPE: {
            lt_quant_target tg;
            if (lt_quant_target_parse(optarg, &tg)) return lt_cli_fail(cmd, "%s", lt_errmsg());
            o.dtype = tg.type;
            o.mix = tg.mix;
            break;
        }
        case O_SEED: {
            int64_t s;
            if (!lt_cli_parse_i64(optarg, 0, INT64_MAX, &s))
                return lt_cli_fail(cmd, "bad --seed '%s': expected a number >= 0", optarg);
            o.seed = (uint64_t)s;
            break;
        }
        case O_VF: o.vocab_path = optarg; break;
        case O_ROPE:
            if (!lt_cli_parse_f32(optarg, 1.0f, 1e9f, &rope_base))
                return lt_cli_fail(cmd, "bad --rope-base '%s'", optarg);
            break;
        case O_ARCH: arch = optarg; break;
        case O_TIED: tied = 1; break;
        case O_UNTIED: tied = 0; break;
        case O_SCALING: scaling = optarg; break;
        case 'o': out = optarg; break;
        case 'h': fputs(modelgen_help, stdout); return 0;
        default: return lt_cli_bad_option(cmd, c, argv[optind - 1]);
        }
    }
    if (optind < argc) return lt_cli_fail(cmd, "unexpected argument '%s'", argv[optind]);
    if (!out) return lt_cli_fail(cmd, "no output file: give -o FILE");
    if (preset && explicit_shape) return lt_cli_fail(cmd, "give either --preset or an explicit shape");
    if (preset) {
        if (lt_modelgen_preset_opts(preset, &o)) return lt_cli_fail(cmd, "%s", lt_errmsg());
    } else {
        if (!shape.dim || !shape.hidden_dim || !shape.n_layers || !shape.n_heads || !shape.vocab_size)
            return lt_cli_fail(cmd, "explicit shape needs --dim, --hidden, --layers, --heads and --vocab");
        if (!shape.n_kv_heads) shape.n_kv_heads = shape.n_heads;
        if (!shape.seq_len) shape.seq_len = 256;
        shape.rms_eps = 1e-5f;
        shape.rope_base = 10000.0f;
        o.cfg = shape;
    }
    if (rope_base != 0.0f) o.cfg.rope_base = rope_base;
    if (arch && lt_arch_parse(arch, strlen(arch), &o.cfg.arch))
        return lt_cli_fail(cmd, "bad --arch '%s': expected llama or qwen2", arch);
    if (tied >= 0) o.tied = tied == 1;
    if (scaling) {
        lt_rope_scaling *r = &o.rope_scaling;
        char tail;
        long long ctx;
        if (sscanf(scaling, "%f,%f,%f,%lld%c", &r->factor, &r->low_freq_factor,
                   &r->high_freq_factor, &ctx, &tail) != 4)
            return lt_cli_fail(cmd, "bad --rope-scaling '%s': expected FACTOR,LOW,HIGH,CTX "
                               "(e.g. 32,1,4,8192)", scaling);
        r->original_context = ctx;
        if (lt_rope_scaling_factors(r, 10000.0f, 2, (float[1]){0}))
            return lt_cli_fail(cmd, "bad --rope-scaling '%s': %s", scaling, lt_errmsg());
    }
    int rc = lt_modelgen_write(&o, out);
    if (rc) return lt_cli_fail_status(cmd, rc, out);
    fprintf(stderr, "looptune model-gen: wrote %s (%s, dim %lld, %lld layers, %lld/%lld heads, ffn %lld, vocab %lld, %s)\n",
            out, lt_arch_name(o.cfg.arch), (long long)o.cfg.dim, (long long)o.cfg.n_layers, (long long)o.cfg.n_heads,
            (long long)o.cfg.n_kv_heads, (long long)o.cfg.hidden_dim, (long long)o.cfg.vocab_size,
            lt_quant_target_name(&(lt_quant_target){.type = o.dtype, .mix = o.mix}));
    return 0;
}
