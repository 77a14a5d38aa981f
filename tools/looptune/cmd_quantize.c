/* looptune quantize: a GGUF model rewritten with its weights in a
 * quantisation type or a llama.cpp mix (lt_quantize_file), with a line per
 * tensor on stderr. */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "looptune/model.h"

static const char *const quantize_help =
    "usage: looptune quantize IN.gguf OUT.gguf --type T [--threads N] [-q]\n"
    "\n"
    "Writes OUT.gguf: IN's metadata and tensors with every weight matrix in type T\n"
    "(norms and other 1-d tensors as they are), general.file_type set as llama.cpp\n"
    "sets it. IN holds f32, f16, bf16 or q8_0 weights.\n"
    "\n"
    "  --type T     a type: q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k, q4_k, q5_k, q6_k,\n"
    "               f16, bf16, f32 (f32 also dequantises any type); or a mix with\n"
    "               llama.cpp's type per tensor: q3_k_m, q4_k_m, q5_k_m\n"
    "  --threads N  threads converting rows (default: one per logical CPU; the file\n"
    "               is the same for any count)\n"
    "  -q, --quiet  no progress lines\n"
    "  -h, --help   this help\n";

static void progress(void *ctx, int64_t i, int64_t n, const lt_gguf_tensor *t, lt_dtype to) {
    (void)ctx;
    fprintf(stderr, "[%lld/%lld] %-32s %-5s -> %-5s %lld x %lld\n", (long long)(i + 1),
            (long long)n, t->name, lt_dtype_name(t->dtype), lt_dtype_name(to), (long long)t->ne[0],
            (long long)(t->ne[1] * t->ne[2] * t->ne[3]));
}

int lt_cmd_quantize(int argc, char **argv) {
    const char *cmd = "quantize";
    const char *type = NULL;
    bool quiet = false;
    int64_t threads = 0;
    static const struct option opts[] = {{"type", required_argument, 0, 't'},
                                         {"threads", required_argument, 0, 'j'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":t:qh", opts, NULL)) != -1) {
        switch (c) {
        case 't': type = optarg; break;
        case 'q': quiet = true; break;
        case 'j':
            if (!lt_cli_parse_i64(optarg, 1, 256, &threads))
                return lt_cli_fail(cmd, "bad --threads '%s': expected 1..256", optarg);
            break;
        case 'h': fputs(quantize_help, stdout); return 0;
        default: return lt_cli_bad_option(cmd, c, argv[optind - 1]);
        }
    }
    if (argc - optind != 2) return lt_cli_fail(cmd, "expected IN.gguf OUT.gguf (see --help)");
    if (!type) return lt_cli_fail(cmd, "--type is required (see --help)");
    lt_quantize_opts o = {.threads = (int)threads, .progress = quiet ? NULL : progress};
    if (lt_quant_target_parse(type, &o.target)) return lt_cli_fail(cmd, "%s", lt_errmsg());
    const char *in = argv[optind], *out = argv[optind + 1];
    int st = lt_quantize_file(in, out, &o);
    if (st) return lt_cli_fail(cmd, "%s", lt_errmsg()[0] ? lt_errmsg() : lt_strerror(st));
    if (!quiet)
        fprintf(stderr, "looptune quantize: wrote %s (%s, file type %u)\n", out,
                lt_quant_target_name(&o.target), lt_quant_target_file_type(&o.target));
    return 0;
}
