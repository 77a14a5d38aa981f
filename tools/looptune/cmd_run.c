/* looptune run: text generation with a run summary. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sampler_cli.h"
#include "looptune/model.h"
#include "looptune/program.h"
#include "looptune/runtime.h"
#include "tel_cli.h"
#include "tune_online.h"

static const char *const run_help =
    "usage: looptune run -m MODEL (-p PROMPT | -f FILE | --prompt-ids IDS) [options]\n"
    "\n"
    "Generates text and ends with a summary on stderr: prompt and decode tokens/s,\n"
    "ms per token, the evaluations' own tokens/s (decode without sampling and output),\n"
    "weight bytes read per token and the achieved memory bandwidth.\n"
    "\n"
    "  -m, --model FILE        GGUF (f32, f16, bf16, q8_0) or llama2.c checkpoint (.bin)\n"
    "  -z, --tokenizer FILE    llama2.c tokenizer.bin (overrides a GGUF's vocabulary)\n"
    "  -p, --prompt TEXT       prompt text (BOS added where the model asks for it; special\n"
    "                          tokens such as <|im_start|> written in it are parsed)\n"
    "      --prompt-ids IDS    prompt as token ids, e.g. 1,400,300\n"
    "  -f, --file FILE         the prompt text from FILE (taken as -p takes it, one trailing\n"
    "                          newline dropped, as llama.cpp does)\n"
    "  -n, --n-tokens N        tokens to generate (default 128)\n"
    "  -t, --threads T         threads (default 2 or the CPU count, whichever is smaller)\n"
    "      --ctx N             context length to allocate (default: the model's, at most 4096)\n"
    "      --prefill-batch B   prompt tokens per batch (default: whole prompt, up to 256)\n"
    "      --ignore-eos        keep generating after an end-of-generation token (the\n"
    "                          vocabulary's end of sequence, end of turn, ...)\n"
    "      --print-ids         print generated token ids instead of text\n"
    "      --dump-logits FILE  write float32 logits of every position fed (for testing)\n"
    "      --executor E        looped (default: one persistent loop over the layers, no\n"
    "                          global barriers) or dispatch (per-node split + barrier)\n"
    "      --no-loop-pass      keep the program flat (no LOOP nodes)\n"
    "      --no-fuse-pass      keep norms, gates, rope and cache stores as nodes of their own\n"
    "                          (no matvec prologues or epilogues)\n"
    "      --mmap              read weights from the file mapping (default: copy them to\n"
    "                          huge-page memory in decode order, faster to stream)\n"
    "      --dump-program      print the decode program before and after the kernel-looping pass\n"
    "      --isa ISA           force kernels to portable, avx2 or avx512 (default: best)\n"
    "      --config-store SPEC tuned configurations to start from: a file (default: the\n"
    "                          user's cache, see looptune tune --help) or kafka (the topic\n"
    "                          looptune.configs at --brokers; Kafka options below)\n"
    "      --no-warm-start     run with the kernels' default parameters\n"
    "      --param K.NAME=V    force kernel K's parameter NAME to V on every node (after the\n"
    "                          warm start; repeatable), e.g. --param matvec.act_int8=0;\n"
    "                          threads.decode=N / threads.prefill=N / threads.batch=N: that\n"
    "                          regime's threads (batch: batched decode steps)\n"
    "                          looped.NAME=V: a looped executor parameter\n"
    "  -h, --help              this help\n"
    "\n";
/* ... then the sampler's lines (lt_cli_sampler_help), then: */
static const char *const run_help_tel =
    "\n"
    "Telemetry (per-kernel windows of the decode steps, see looptune top):\n"
    "      --telemetry T       off (default), file:PATH (length-delimited protobuf\n"
    "                          Envelopes) or kafka (topic looptune.telemetry)\n"
    "      --brokers B         Kafka bootstrap servers (default: an embedded in-memory broker)\n";
/* ... then the shared Kafka lines (lt_cli_kafka_help), then: */
static const char *const run_help_end =
    "      --telemetry-window-tokens K  a window closes after K decode steps (default 32)\n"
    "      --telemetry-window-ms T      ... or once it lasted T ms (default 1000)\n"
    "      --telemetry-detail D window (default) or per-call: also every thread's share of\n"
    "                          every node in every step\n"
    "      --telemetry-drain-ms T       how often the rings are drained (default 200)\n"
    "      --counters-every N  read perf counters every N steps (default 8; 0: never)\n"
    "\n"
    "Online tuning (the closed loop; implies --telemetry kafka):\n"
    "      --tune MODE         off (default) or online: take parameter changes and trials from\n"
    "                          the optimizer on topic looptune.control, at token boundaries.\n"
    "                          Without --brokers an optimizer runs in this process on the\n"
    "                          embedded broker; with --brokers run `looptune optimizer`.\n"
    "      --explore-share S   in-process optimizer: share of decode steps that may run\n"
    "                          candidates (default 0.25)\n";

typedef struct {
    const lt_vocab *vocab;
    bool print_ids;
    int64_t count;
    const lt_vocab *eog; /* generation ends at its end-of-generation tokens (NULL: never) */
    lt_cli_tune *tune; /* NULL: no online tuning */
    char held[4];      /* the start of a UTF-8 sequence the next token completes */
    size_t n_held;
} out_state;

/* Bytes a UTF-8 sequence starting with lead takes (1 for anything else). */
static size_t utf8_len(unsigned char lead) {
    if (lead >= 0xf0 && lead <= 0xf4) return 4;
    if (lead >= 0xe0 && lead <= 0xef) return 3;
    return lead >= 0xc2 && lead <= 0xdf ? 2 : 1;
}

/* Writes text, holding back a UTF-8 sequence that is not complete yet (a
 * byte-level token may end inside a character), so nothing else printed to
 * the terminal in between can split it. */
static void print_text(out_state *o, const char *p, size_t n) {
    char buf[sizeof o->held + 256];
    memcpy(buf, o->held, o->n_held);
    if (n > 256) n = 256;
    memcpy(buf + o->n_held, p, n);
    n += o->n_held;
    size_t keep = 0; /* an incomplete sequence at the end */
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = (unsigned char)buf[n - back];
        if ((c & 0xc0) == 0x80) continue; /* a continuation byte: look further back */
        if (utf8_len(c) > back) keep = back;
        break;
    }
    fwrite(buf, 1, n - keep, stdout);
    memcpy(o->held, buf + n - keep, keep);
    o->n_held = keep;
}

/* Writes what is held (a sequence the generation never completed). */
static void print_flush(out_state *o) {
    fwrite(o->held, 1, o->n_held, stdout);
    o->n_held = 0;
}

static int on_token(void *user, int32_t prev, int32_t tok) {
    out_state *o = user;
    lt_cli_tune_token(o->tune); /* the run's boundary has passed: the step's figures */
    const bool end = o->eog && lt_vocab_is_eog(o->eog, tok);
    if (o->print_ids) {
        printf(o->count ? " %d" : "%d", tok);
    } else if (o->vocab && !end) { /* an end of generation is not text (as llama.cpp) */
        char buf[256];
        size_t n = lt_detokenize(o->vocab, prev, tok, buf, sizeof buf);
        print_text(o, buf, n < sizeof buf ? n : sizeof buf - 1);
    }
    fflush(stdout);
    o->count++;
    return end;
}

/* An error while reading the options: say it, free what was parsed, exit 1. */
#define ARG_FAIL(...)                                                          \
    do {                                                                       \
        lt_cli_fail(cmd, __VA_ARGS__);                                         \
        goto done_args;                                                        \
    } while (0)

int lt_cmd_run(int argc, char **argv) {
    const char *cmd = "run";
    const char *model_path = NULL, *tok_path = NULL, *prompt = NULL, *prompt_ids = NULL;
    const char *dump_logits = NULL;
    const char *prompt_file = NULL;
    int64_t n_new = 128, threads = 0, ctx = 0, prefill_batch = 0;
    lt_cli_sampler smp;
    lt_cli_sampler_init(&smp);
    char *file_text = NULL;
    bool print_ids = false, dump_program = false, ignore_eos = false, no_loop_pass = false,
         no_fuse_pass = false;
    bool use_mmap = false;
    lt_executor executor = LT_EXEC_LOOPED;
    lt_cli_tel_opts tel_opts = {.mode = LT_CLI_TEL_OFF};
    lt_cli_kafka kafka;
    enum { O_IDS = 256, O_CTX, O_PB, O_EOS, O_PIDS, O_DL, O_DP, O_ISA,
           O_EXEC, O_NLP, O_NFP, O_MMAP, O_STORE, O_NOWARM, O_PARAM };
    lt_cli_param params[LT_CLI_MAX_PARAMS];
    int n_params = 0;
    const char *store_path = NULL;
    bool no_warm = false;
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},     {"tokenizer", required_argument, 0, 'z'},
        {"prompt", required_argument, 0, 'p'},    {"prompt-ids", required_argument, 0, O_IDS},
        {"n-tokens", required_argument, 0, 'n'},  {"threads", required_argument, 0, 't'},
        {"file", required_argument, 0, 'f'},      LT_CLI_SAMPLER_OPTIONS,
        {"ctx", required_argument, 0, O_CTX},
        {"prefill-batch", required_argument, 0, O_PB}, {"ignore-eos", no_argument, 0, O_EOS},
        {"print-ids", no_argument, 0, O_PIDS},    {"dump-logits", required_argument, 0, O_DL},
        {"dump-program", no_argument, 0, O_DP},   {"isa", required_argument, 0, O_ISA},
        {"executor", required_argument, 0, O_EXEC}, {"no-loop-pass", no_argument, 0, O_NLP},
        {"no-fuse-pass", no_argument, 0, O_NFP},
        {"mmap", no_argument, 0, O_MMAP},
        {"config-store", required_argument, 0, O_STORE},
        {"no-warm-start", no_argument, 0, O_NOWARM}, {"param", required_argument, 0, O_PARAM},
        LT_CLI_TEL_OPTIONS, LT_CLI_KAFKA_OPTIONS,
        {"help", no_argument, 0, 'h'},            {0, 0, 0, 0}};
    if (lt_cli_kafka_init(cmd, &kafka)) return 1;
    int exit_code = 1;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":m:z:p:f:n:t:h" LT_CLI_KAFKA_SHORT, opts, NULL)) != -1) {
        int k = lt_cli_kafka_option(cmd, c, optarg, &kafka);
        if (k == LT_CLI_OPT_ERROR) goto done_args;
        if (k == LT_CLI_OPT_HANDLED) continue;
        k = lt_cli_sampler_option(cmd, c, optarg, &smp);
        if (k == LT_CLI_OPT_ERROR) goto done_args;
        if (k == LT_CLI_OPT_HANDLED) continue;
        k = lt_cli_tel_option(cmd, c, optarg, &tel_opts);
        if (k == LT_CLI_OPT_ERROR) goto done_args;
        if (k == LT_CLI_OPT_HANDLED) continue;
        switch (c) {
        case 'm': model_path = optarg; break;
        case 'z': tok_path = optarg; break;
        case 'p': prompt = optarg; break;
        case 'f': prompt_file = optarg; break;
        case O_IDS: prompt_ids = optarg; break;
        case 'n':
            if (!lt_cli_parse_i64(optarg, 0, INT32_MAX, &n_new))
                ARG_FAIL("bad -n '%s': expected a number of tokens >= 0", optarg);
            break;
        case 't':
            if (!lt_cli_parse_i64(optarg, 1, 64, &threads))
                ARG_FAIL("bad --threads '%s': expected 1..64", optarg);
            break;
        case O_CTX:
            if (!lt_cli_parse_i64(optarg, 1, INT32_MAX, &ctx))
                ARG_FAIL("bad --ctx '%s': expected a positive number", optarg);
            break;
        case O_PB:
            if (!lt_cli_parse_i64(optarg, 1, INT32_MAX, &prefill_batch))
                ARG_FAIL("bad --prefill-batch '%s': expected a positive number", optarg);
            break;
        case O_EOS: ignore_eos = true; break;
        case O_PIDS: print_ids = true; break;
        case O_DL: dump_logits = optarg; break;
        case O_DP: dump_program = true; break;
        case O_NLP: no_loop_pass = true; break;
        case O_NFP: no_fuse_pass = true; break;
        case O_MMAP: use_mmap = true; break;
        case O_STORE: store_path = optarg; break;
        case O_NOWARM: no_warm = true; break;
        case O_PARAM:
            if (n_params == LT_CLI_MAX_PARAMS) ARG_FAIL("more than %d --param", LT_CLI_MAX_PARAMS);
            if (lt_cli_param_parse(cmd, optarg, &params[n_params])) goto done_args;
            n_params++;
            break;
        case O_EXEC:
            if (lt_executor_parse(optarg, &executor)) ARG_FAIL("%s", lt_errmsg());
            break;
        case O_ISA:
            if (lt_isa_select(optarg)) ARG_FAIL("--isa: %s", lt_errmsg());
            break;
        case 'h':
            fputs(run_help, stdout);
            lt_cli_sampler_help();
            lt_cli_kafka_help(run_help_tel, 26, true, run_help_end);
            exit_code = 0;
            goto done_args;
        default: lt_cli_bad_option(cmd, c, argv[optind - 1]); goto done_args;
        }
    }
    if (optind < argc) ARG_FAIL("unexpected argument '%s' (see looptune run --help)", argv[optind]);
    if (!model_path) ARG_FAIL("no model: give -m MODEL (see looptune run --help)");
    if ((prompt != NULL) + (prompt_file != NULL) + (prompt_ids != NULL) > 1)
        ARG_FAIL("give one of -p, -f and --prompt-ids, not several");
    if (!prompt && !prompt_file && !prompt_ids)
        ARG_FAIL("no prompt: give -p TEXT, -f FILE or --prompt-ids IDS");
    if (prompt && !*prompt) ARG_FAIL("empty prompt: -p needs some text");
    if (prompt_file) {
        if (lt_cli_read_text(cmd, prompt_file, &file_text)) goto done_args;
        if (!*file_text) ARG_FAIL("empty prompt: %s holds no text", prompt_file);
        prompt = file_text;
    }

    if (lt_cli_tel_check(cmd, &tel_opts)) goto done_args;
    if (tel_opts.mode != LT_CLI_TEL_KAFKA && !lt_cli_store_is_kafka(store_path) &&
        lt_cli_kafka_refuse(cmd, &kafka, "--telemetry kafka or --config-store kafka"))
        goto done_args;

    int rc;
    lt_model *m = NULL;
    lt_pool *pool = NULL;
    lt_llama *l = NULL;
    lt_sampler *s = NULL;
    int32_t *ids = NULL;
    int64_t n_ids = 0;
    FILE *dump = NULL;
    lt_run *run = NULL;
    lt_cli_tune *tune = NULL;
    lt_store *store = NULL;

    lt_cli_load_stats ls;
    if ((rc = lt_cli_load_model(cmd, model_path, tok_path, use_mmap, &m, &ls))) goto done;
    if (lt_model_page_note(m))
        fprintf(stderr, "looptune %s: note: %s\n", cmd, lt_model_page_note(m));
    if (prompt_ids) {
        if (!lt_cli_parse_ids(prompt_ids, &ids, &n_ids)) {
            lt_cli_fail(cmd, "bad --prompt-ids '%s': expected comma-separated token ids", prompt_ids);
            goto done;
        }
        for (int64_t i = 0; i < n_ids; i++)
            if (ids[i] >= m->cfg.vocab_size) {
                lt_cli_fail(cmd, "bad --prompt-ids: token id %d outside the vocabulary (0..%lld)",
                            ids[i], (long long)m->cfg.vocab_size - 1);
                goto done;
            }
    } else {
        if (!m->vocab) {
            lt_cli_fail(cmd, "%s has no tokenizer: give -z TOKENIZER or --prompt-ids", model_path);
            goto done;
        }
        /* as llama.cpp: the model's BOS/EOS, special tokens in the text parsed */
        size_t len = strlen(prompt), cap = 2 * len + 3;
        lt_tokenize_opts to = {.add_special = true, .parse_special = true};
        ids = malloc(cap * sizeof *ids);
        if (!ids ||
            (rc = lt_tokenize_text(m->vocab, prompt, len, &to, ids, (int64_t)cap, &n_ids))) {
            lt_cli_fail_status(cmd, ids ? rc : LT_ENOMEM, "cannot tokenize the prompt");
            goto done;
        }
    }
    int64_t model_ctx = m->cfg.seq_len;
    if (ctx > model_ctx) {
        lt_cli_fail(cmd, "--ctx %lld exceeds the model's context length %lld", (long long)ctx,
                    (long long)model_ctx);
        goto done;
    }
    int64_t ctx_len = ctx ? ctx : lt_llama_default_ctx(&m->cfg);
    if (n_ids + n_new - 1 > ctx_len) {
        lt_cli_fail(cmd, "prompt (%lld tokens) + -n %lld exceeds the context length %lld",
                    (long long)n_ids, (long long)n_new, (long long)ctx_len);
        goto done;
    }
    if (!threads) threads = lt_cpu()->logical_cpus < 2 ? 1 : 2;
    if ((rc = lt_pool_init(&pool, (int)threads))) {
        lt_cli_fail_status(cmd, rc, "cannot start threads");
        goto done;
    }
    lt_llama_opts lo = {.ctx_len = ctx_len, .all_logits = dump_logits != NULL,
                        .executor = (int)executor, .no_loop_pass = no_loop_pass,
                        .no_fuse_pass = no_fuse_pass,
                        .dump_program = dump_program ? stdout : NULL};
    if ((rc = lt_llama_init(&l, m, pool, &lo))) {
        lt_cli_fail_status(cmd, rc, "cannot build the program");
        goto done;
    }
    /* --param pins first: pins lie over anything the warm start sets */
    bool say_warm;
    if (lt_cli_param_apply(cmd, l, params, n_params) ||
        lt_cli_store_open(cmd, store_path, &kafka, no_warm, &store, &say_warm))
        goto done;
    if (lt_cli_sampler_make(cmd, &smp, m->cfg.vocab_size, ctx_len, &s)) goto done;
    if (dump_logits && !(dump = fopen(dump_logits, "wb"))) {
        lt_cli_fail(cmd, "cannot create %s", dump_logits);
        goto done;
    }
    if (tel_opts.tune_online && (rc = lt_cli_tune_init(&tune, l, n_new))) {
        lt_cli_fail_status(cmd, rc, "cannot start online tuning");
        goto done;
    }
    lt_run_opts ro = {.store = store, .model_name = model_path, .tune_online = tel_opts.tune_online,
                      .explore_share = tel_opts.explore_share,
                      .optimizer_log = tune ? lt_cli_tune_log(tune) : NULL};
    lt_cli_tel_run_opts(&tel_opts, &kafka, &ro);
    if ((rc = lt_run_open(&run, l, pool, &ro))) {
        lt_cli_fail_status(cmd, rc, tune ? "cannot start online tuning" : "cannot start telemetry");
        goto done;
    }
    lt_run_state rs;
    lt_run_info(run, &rs);
    lt_cli_warm_report(store, say_warm, rs.warm_applied, rs.warm_refused);
    lt_store_close(store);
    store = NULL;
    if (rs.embedded)
        fprintf(stderr, "looptune run: --telemetry kafka without --brokers: records go to the "
                        "embedded in-memory broker at %s, gone when this run ends\n", rs.brokers);
    if (tune && rs.optimizer)
        fprintf(stderr, "looptune run: online tuning with an in-process optimizer on the "
                        "embedded broker\n");
    lt_cli_tune_attach(tune, run);
    out_state os = {.vocab = m->vocab, .print_ids = print_ids, .tune = tune,
                    .eog = ignore_eos ? NULL : m->vocab};
    if (!print_ids && m->vocab) {
        /* echo the prompt as the model sees it */
        out_state echo = {.vocab = m->vocab};
        bool bos = n_ids > 0 && ids[0] == lt_vocab_bos(m->vocab) && lt_vocab_add_bos(m->vocab);
        for (int64_t i = bos ? 1 : 0; i < n_ids; i++) on_token(&echo, i ? ids[i - 1] : -1, ids[i]);
        memcpy(os.held, echo.held, echo.n_held); /* the prompt may end inside a character */
        os.n_held = echo.n_held;
    }
    lt_gen_opts go = {.n_new = n_new, .prefill_batch = prefill_batch, .dump_logits = dump,
                      .stop_token = -1}; /* on_token ends at an end of generation */
    lt_gen_stats st;
    rc = lt_run_generate(run, s, ids, n_ids, &go, on_token, &os, &st);
    print_flush(&os);
    if (rc) {
        printf("\n");
        lt_cli_fail_status(cmd, rc, "generation failed");
        goto done;
    }
    printf("\n");
    fflush(stdout);
    if (dump && fclose(dump) != 0) {
        dump = NULL;
        lt_cli_fail(cmd, "cannot write %s", dump_logits);
        goto done;
    }
    dump = NULL;

    /* summary */
    double wbytes = (double)lt_model_weight_bytes_per_token(m);
    int64_t n_dec = st.n_generated > 1 ? st.n_generated - 1 : 0; /* evals after the prefill */
    double dec_tps = n_dec && st.decode_s > 0 ? (double)n_dec / st.decode_s : 0;
    double eval_tps = n_dec && st.eval_s > 0 ? (double)n_dec / st.eval_s : 0;
    double pre_tps = st.prefill_s > 0 ? (double)st.n_prompt / st.prefill_s : 0;
    char th[64];
    int dth = lt_llama_threads(l, LT_REGIME_DECODE);
    int pth = lt_llama_threads(l, LT_REGIME_PREFILL);
    if (dth == threads && pth == threads) snprintf(th, sizeof th, "%lld", (long long)threads);
    else snprintf(th, sizeof th, "%lld (decode %d, prefill %d)", (long long)threads, dth, pth);
    fprintf(stderr,
            "\nlooptune: %s, %lld layers, dim %lld, %s weights, %s threads, isa %s, %s executor\n"
            "  load    %.1f ms (file %.1f ms, weights %.1f MB copied in %.1f ms)\n"
            "  prompt  %lld tokens in %.1f ms (%.1f tokens/s)\n"
            "  decode  %lld tokens in %.1f ms (%.1f tokens/s, %.3f ms/token)\n"
            "  eval    %.1f ms of it evaluating (%.1f tokens/s without sampling and output)\n"
            "  weights %.1f MB read per token, %.1f GB/s achieved\n",
            m->format, (long long)m->cfg.n_layers, (long long)m->cfg.dim, lt_dtype_name(m->wtype),
            th, lt_isa_name(lt_isa_active()), lt_executor_name(executor),
            1e3 * (ls.open_s + ls.weights_s), 1e3 * ls.open_s, (double)ls.bytes / 1e6,
            1e3 * ls.weights_s, (long long)st.n_prompt,
            st.prefill_s * 1e3, pre_tps, (long long)n_dec, st.decode_s * 1e3, dec_tps,
            dec_tps ? 1e3 / dec_tps : 0.0, st.eval_s * 1e3, eval_tps, wbytes / 1e6,
            wbytes * dec_tps / 1e9);
    lt_tel_stats tst;
    lt_run_info(run, &rs);
    lt_run_state rs_end = rs; /* its strings outlive the close: copied below */
    char run_id[64], where[512];
    snprintf(run_id, sizeof run_id, "%s", rs.run_id);
    snprintf(where, sizeof where, "%s", rs.telemetry_where ? rs.telemetry_where : "");
    rs_end.run_id = run_id;
    rs_end.telemetry_where = rs.telemetry_where ? where : NULL;
    lt_cli_tune_finish(tune, run, stderr, &tst); /* closes the run */
    tune = NULL;
    run = NULL;
    lt_cli_tel_report(&rs_end, &tst, stderr);
    exit_code = 0;
done:
    lt_cli_tune_finish(tune, run, NULL, NULL); /* before the programs it observes go */
    lt_store_close(store);
    if (dump) fclose(dump);
    free(ids);
    lt_sampler_free(s);
    lt_llama_free(l);
    lt_pool_free(pool);
    lt_model_close(m);
done_args:
    free(file_text);
    lt_cli_kafka_free(&kafka);
    return exit_code;
}
