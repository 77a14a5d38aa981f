/* looptune serve: a stream-inference worker. Requests from the requests
 * topic, completions streamed to the completions topic exactly once, many
 * sequences decoded at once (src/serve). */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "looptune/serve.h"
#include "tel_cli.h"

static const char *const serve_help =
    "usage: looptune serve -m MODEL [-m MODEL2 ...] [options]\n"
    "\n"
    "Joins the serve group on the requests topic (<prefix>requests) and generates the\n"
    "completions of the requests it is given, many at once (continuous batching: a\n"
    "request takes a free KV slot at a token boundary, its prompt is prefilled in\n"
    "chunks between decode steps, each with its own sampler and seed). Tokens stream\n"
    "to <prefix>completions in small groups; each group, the final records of the\n"
    "requests that ended and their offsets go in one Kafka transaction, so readers\n"
    "with isolation.level=read_committed that keep each (request id, token index)\n"
    "once see every token once, also when a worker dies mid-stream (the request is\n"
    "served again elsewhere with the same seed). A Cancel record stops a request\n"
    "within a token; a request past its deadline ends with reason deadline.\n"
    "SIGINT or SIGTERM commits what has ended and leaves the group.\n"
    "With --http it also serves OpenAI's HTTP API (as `looptune gateway` does) in\n"
    "the same process: without --brokers, gateway, worker and the embedded broker\n"
    "in one command.\n"
    "\n"
    "  -m, --model [NAME=]FILE a model to serve, repeatable; requests name it by NAME\n"
    "                          (default: the file name without its extension); a\n"
    "                          request naming no model gets the first\n"
    "      --brokers B         Kafka bootstrap servers (default: an embedded in-memory\n"
    "                          broker, at-least-once, gone when the process ends)\n";
static const char *const serve_help_end =
    "      --group G           consumer group (default: the prefix + serve, looptune.serve)\n"
    "      --instance-id ID    static group membership and a stable transactional id: a\n"
    "                          restarted worker of the same ID takes its partitions back\n"
    "                          at once and aborts what its predecessor left open\n"
    "      --max-batch N       sequences decoded at once per model: KV slots (default 4)\n"
    "      --ctx N             context per sequence (default: the model's, at most 4096)\n"
    "      --kv-memory MB      bound on each model's KV caches (layers x slots x ctx x\n"
    "                          kv_dim x 2 x 4 bytes): with --max-batch and --ctx, an error\n"
    "                          if over; with one of them (or neither: --max-batch 4) the\n"
    "                          other is the largest that fits\n"
    "      --threads T         decode threads (default 1)\n"
    "      --prefill-chunk N   prompt tokens per step at most (default 64)\n"
    "      --queue N           requests taken beyond the slots, waiting for one (default:\n"
    "                          --max-batch); with both full no more are fetched\n"
    "      --flush-ms MS       least time between two commits (default 20)\n"
    "      --partitions N      partitions of the topics it creates (default 6)\n"
    "      --session-timeout-ms MS  group session timeout (default 6000)\n"
    "      --transaction-timeout-ms MS  how long a dead worker's open transaction holds\n"
    "                          back read_committed readers (default 15000)\n"
    "      --mmap              read weights from the file mapping (default: copied)\n"
    "      --test-step-delay-ms MS  tests: sleep after every decode step\n"
    "      --test-commit-delay-ms MS  tests: sleep between producing a commit's records\n"
    "                          and committing them (a kill then falls inside it)\n"
    "      --http HOST:PORT    also serve OpenAI's HTTP API there (127.0.0.1:8080, say;\n"
    "                          port 0: any free one, printed), for the models served\n";
static const char *const serve_help_tune =
    "\n"
    "Telemetry and online tuning of the batched decode steps (every model's, a run each;\n"
    "the steps of --max-batch rows are measured, as `looptune run` measures its decode\n"
    "steps):\n"
    "      --telemetry T       off (default), file:PATH or kafka (topic looptune.telemetry;\n"
    "                          without --brokers on an embedded broker of its own)\n"
    "      --telemetry-window-tokens K, --telemetry-window-ms T, --telemetry-detail D,\n"
    "      --telemetry-drain-ms T, --counters-every N   as for looptune run\n"
    "      --tune MODE         off (default) or online: take parameter changes and trials\n"
    "                          of the batch regime (keys ending in :batch) from the\n"
    "                          optimizer on topic looptune.control, between steps (run\n"
    "                          `looptune optimizer --brokers B`; without --brokers one runs\n"
    "                          in this process; implies --telemetry kafka)\n"
    "      --config-store SPEC start from the tuned configurations of SPEC (a file, or\n"
    "                          kafka: the topic looptune.configs at --brokers)\n"
    "      --no-warm-start     ignore the config store\n";
static const char *const serve_help_tail = "  -h, --help              this help\n";

#define MAX_MODELS 8
#define DEFAULT_MAX_BATCH 4 /* the worker's */
#define MB (INT64_C(1) << 20)

/* Bytes of one slot's KV caches per token of context: layers x kv_dim x 2 (K and V) x 4. */
static int64_t kv_per_token(const lt_llama_config *c) {
    return c->n_layers * (c->n_kv_heads * (c->dim / c->n_heads)) * 2 * (int64_t)sizeof(float);
}

/* --kv-memory: every model's KV caches (slots x ctx x kv_per_token) within kv_mb MB. With
 * --max-batch and --ctx both given, a model over the bound is an error; with one of them, the
 * other is derived, the largest that fits every model (a context at most the model's
 * default); with neither, the context is derived for the default --max-batch. */
static int kv_fit(const char *cmd, int64_t kv_mb, const lt_serve_model *models, size_t n,
                  lt_serve_opts *so) {
    const int64_t bound = kv_mb * MB;
    if (so->max_batch > 0 && so->ctx > 0) {
        for (size_t i = 0; i < n; i++) {
            const lt_llama_config *c = &models[i].model->cfg;
            const int64_t need = so->max_batch * so->ctx * kv_per_token(c);
            if (need > bound)
                return lt_cli_fail(cmd, "--kv-memory %lld MB cannot hold the KV caches of model "
                                   "%s: %lld layers x %lld slots x %lld ctx x %lld kv_dim x 2 x 4 "
                                   "bytes = %.1f MB", (long long)kv_mb, models[i].name,
                                   (long long)c->n_layers, (long long)so->max_batch,
                                   (long long)so->ctx, (long long)(kv_per_token(c) / 8 / c->n_layers),
                                   (double)need / (double)MB);
        }
        return 0;
    }
    if (so->ctx > 0) { /* the slots from the context */
        int64_t slots = 256;
        for (size_t i = 0; i < n; i++) {
            const int64_t fit = bound / (so->ctx * kv_per_token(&models[i].model->cfg));
            if (fit < 1)
                return lt_cli_fail(cmd, "--kv-memory %lld MB cannot hold one slot of --ctx %lld "
                                   "of model %s (%.1f MB)", (long long)kv_mb, (long long)so->ctx,
                                   models[i].name,
                                   (double)(so->ctx * kv_per_token(&models[i].model->cfg)) /
                                       (double)MB);
            if (fit < slots) slots = fit;
        }
        so->max_batch = slots;
        lt_log(LT_LOG_INFO, "serve: --kv-memory %lld MB: --max-batch %lld --ctx %lld",
               (long long)kv_mb, (long long)slots, (long long)so->ctx);
        return 0;
    }
    const int64_t slots = so->max_batch > 0 ? so->max_batch : DEFAULT_MAX_BATCH;
    int64_t ctx = INT32_MAX;
    for (size_t i = 0; i < n; i++) {
        const lt_llama_config *c = &models[i].model->cfg;
        int64_t fit = bound / (slots * kv_per_token(c)), def = lt_llama_default_ctx(c);
        if (def > c->seq_len) def = c->seq_len;
        if (fit < 1)
            return lt_cli_fail(cmd, "--kv-memory %lld MB cannot hold %lld slots of one token of "
                               "model %s", (long long)kv_mb, (long long)slots, models[i].name);
        if (fit > def) fit = def;
        if (fit < ctx) ctx = fit;
    }
    so->ctx = ctx;
    lt_log(LT_LOG_INFO, "serve: --kv-memory %lld MB: --max-batch %lld --ctx %lld",
           (long long)kv_mb, (long long)slots, (long long)ctx);
    return 0;
}

/* The name of a model given as FILE: its file name without the extension. */
static void default_name(const char *path, char *out, size_t n) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(out, n, "%s", base);
    char *dot = strrchr(out, '.');
    if (dot && dot != out) *dot = 0;
}

int lt_cmd_serve(int argc, char **argv) {
    const char *cmd = "serve";
    enum { O_GROUP = 256, O_INSTANCE, O_THREADS, O_MAXB, O_CTX, O_CHUNK, O_QUEUE, O_FLUSH,
           O_PARTS, O_SESSION, O_TXN, O_MMAP, O_DELAY, O_CDELAY, O_KVMEM, O_STORE, O_NOWARM };
    static const struct option opts[] = {
        LT_CLI_KAFKA_OPTIONS,
        LT_CLI_HTTP_OPTIONS,
        LT_CLI_TEL_OPTIONS,
        {"config-store", required_argument, 0, O_STORE},
        {"no-warm-start", no_argument, 0, O_NOWARM},
        {"model", required_argument, 0, 'm'},
        {"group", required_argument, 0, O_GROUP},
        {"instance-id", required_argument, 0, O_INSTANCE},
        {"threads", required_argument, 0, O_THREADS},
        {"max-batch", required_argument, 0, O_MAXB},
        {"ctx", required_argument, 0, O_CTX},
        {"kv-memory", required_argument, 0, O_KVMEM},
        {"prefill-chunk", required_argument, 0, O_CHUNK},
        {"queue", required_argument, 0, O_QUEUE},
        {"flush-ms", required_argument, 0, O_FLUSH},
        {"partitions", required_argument, 0, O_PARTS},
        {"session-timeout-ms", required_argument, 0, O_SESSION},
        {"transaction-timeout-ms", required_argument, 0, O_TXN},
        {"mmap", no_argument, 0, O_MMAP},
        {"test-step-delay-ms", required_argument, 0, O_DELAY},
        {"test-commit-delay-ms", required_argument, 0, O_CDELAY},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    lt_cli_kafka kafka;
    if (lt_cli_kafka_init(cmd, &kafka)) return 1;
    int exit_code = 1;
    lt_serve_opts so = {.threads = 1};
    int64_t kv_mb = 0; /* --kv-memory; 0: no bound */
    char names[MAX_MODELS][128];
    const char *paths[MAX_MODELS];
    lt_serve_model models[MAX_MODELS];
    memset(models, 0, sizeof models);
    size_t n_models = 0;
    bool use_mmap = false;
    lt_devbroker *dev = NULL;
    lt_cli_http http;
    lt_cli_http_init(&http, NULL);
    lt_gateway *gw = NULL;
    const char *model_names[MAX_MODELS];
    lt_cli_tel_opts tel_opts = {.mode = LT_CLI_TEL_OFF};
    const char *store_path = NULL;
    bool no_warm = false, say_warm = false;
    lt_store *store = NULL;
    lt_run_opts tune_opts;
    int64_t v;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":m:h" LT_CLI_KAFKA_SHORT, opts, NULL)) != -1) {
        int k = lt_cli_kafka_option(cmd, c, optarg, &kafka);
        if (k == LT_CLI_OPT_ERROR) goto done;
        if (k == LT_CLI_OPT_HANDLED) continue;
        k = lt_cli_http_option(cmd, c, optarg, &http);
        if (k == LT_CLI_OPT_ERROR) goto done;
        if (k == LT_CLI_OPT_HANDLED) continue;
        k = lt_cli_tel_option(cmd, c, optarg, &tel_opts);
        if (k == LT_CLI_OPT_ERROR) goto done;
        if (k == LT_CLI_OPT_HANDLED) continue;
        switch (c) {
        case O_STORE: store_path = optarg; break;
        case O_NOWARM: no_warm = true; break;
        case 'm': {
            if (n_models == MAX_MODELS) FAIL("at most %d models (-m)", MAX_MODELS);
            const char *eq = strchr(optarg, '=');
            if (eq) {
                if (eq == optarg || (size_t)(eq - optarg) >= sizeof names[0] || !eq[1])
                    FAIL("bad -m '%s': expected FILE or NAME=FILE", optarg);
                snprintf(names[n_models], sizeof names[0], "%.*s", (int)(eq - optarg), optarg);
                paths[n_models] = eq + 1;
            } else {
                if (!*optarg) FAIL("bad -m '': expected a model file");
                default_name(optarg, names[n_models], sizeof names[0]);
                paths[n_models] = optarg;
            }
            for (size_t i = 0; i < n_models; i++)
                if (!strcmp(names[i], names[n_models]))
                    FAIL("two models named '%s': give one NAME=FILE", names[i]);
            n_models++;
            break;
        }
        case O_GROUP:
            if (!*optarg) FAIL("bad --group '': expected a group id");
            so.group = optarg;
            break;
        case O_INSTANCE:
            if (!*optarg || strlen(optarg) > 100)
                FAIL("bad --instance-id '%s': expected 1..100 characters", optarg);
            so.instance_id = optarg;
            break;
        case O_THREADS:
            if (!lt_cli_parse_i64(optarg, 1, 256, &v)) FAIL("bad --threads '%s': expected 1..256", optarg);
            so.threads = (int)v;
            break;
        case O_MAXB:
            if (!lt_cli_parse_i64(optarg, 1, 256, &v))
                FAIL("bad --max-batch '%s': expected 1..256 sequences", optarg);
            so.max_batch = v;
            break;
        case O_CTX:
            if (!lt_cli_parse_i64(optarg, 1, INT32_MAX, &v))
                FAIL("bad --ctx '%s': expected a positive number of tokens", optarg);
            so.ctx = v;
            break;
        case O_KVMEM:
            if (!lt_cli_parse_i64(optarg, 1, INT64_C(1) << 30, &v))
                FAIL("bad --kv-memory '%s': expected a positive number of MB", optarg);
            kv_mb = v;
            break;
        case O_CHUNK:
            if (!lt_cli_parse_i64(optarg, 1, 4096, &v))
                FAIL("bad --prefill-chunk '%s': expected 1..4096 tokens", optarg);
            so.prefill_chunk = v;
            break;
        case O_QUEUE:
            if (!lt_cli_parse_i64(optarg, 1, 100000, &v))
                FAIL("bad --queue '%s': expected 1..100000 requests", optarg);
            so.queue = v;
            break;
        case O_FLUSH:
            if (!lt_cli_parse_i64(optarg, 1, 60000, &v)) FAIL("bad --flush-ms '%s': expected 1..60000", optarg);
            so.flush_ms = (int)v;
            break;
        case O_PARTS:
            if (!lt_cli_parse_i64(optarg, 1, 10000, &v))
                FAIL("bad --partitions '%s': expected 1..10000", optarg);
            so.partitions = (int32_t)v;
            break;
        case O_SESSION:
            if (!lt_cli_parse_i64(optarg, 1000, 3600000, &v))
                FAIL("bad --session-timeout-ms '%s': expected 1000..3600000", optarg);
            so.session_timeout_ms = (int)v;
            break;
        case O_TXN:
            if (!lt_cli_parse_i64(optarg, 1000, 900000, &v))
                FAIL("bad --transaction-timeout-ms '%s': expected 1000..900000", optarg);
            so.transaction_timeout_ms = (int)v;
            break;
        case O_MMAP: use_mmap = true; break;
        case O_DELAY:
            if (!lt_cli_parse_i64(optarg, 0, 60000, &v))
                FAIL("bad --test-step-delay-ms '%s': expected 0..60000", optarg);
            so.test_step_delay_ms = (int)v;
            break;
        case O_CDELAY:
            if (!lt_cli_parse_i64(optarg, 0, 600000, &v))
                FAIL("bad --test-commit-delay-ms '%s': expected 0..600000", optarg);
            so.test_commit_delay_ms = (int)v;
            break;
        case 'h':
            lt_cli_kafka_help(serve_help, 26, true, serve_help_end);
            fputs(lt_cli_http_help, stdout);
            fputs(serve_help_tune, stdout);
            fputs(serve_help_tail, stdout);
            exit_code = 0;
            goto done;
        default: lt_cli_bad_option(cmd, c, argv[optind - 1]); goto done;
        }
    }
    if (optind < argc) FAIL("unexpected argument '%s' (see looptune serve --help)", argv[optind]);
    if (!n_models) FAIL("no model: give -m MODEL (see looptune serve --help)");
    if (!http.given && (http.go.api_key || http.go.max_inflight || http.go.max_connections ||
                        http.go.default_max_tokens || http.go.timeout_s))
        FAIL("--api-key, --api-key-file, --max-inflight, --max-connections, --max-tokens and "
             "--timeout are the HTTP API's: give --http HOST:PORT too");
    if (lt_cli_kafka_check(cmd, &kafka)) goto done;
    if (lt_cli_tel_check(cmd, &tel_opts)) goto done;
    if ((tel_opts.mode != LT_CLI_TEL_OFF || store_path) &&
        lt_cli_store_open(cmd, store_path, &kafka, no_warm, &store, &say_warm))
        goto done;
    for (size_t i = 0; i < n_models; i++) {
        lt_cli_load_stats ls;
        if (lt_cli_load_model(cmd, paths[i], NULL, use_mmap, &models[i].model, &ls)) goto done;
        models[i].name = names[i];
        if (so.ctx > models[i].model->cfg.seq_len)
            FAIL("--ctx %lld exceeds the context length %lld of model %s", (long long)so.ctx,
                 (long long)models[i].model->cfg.seq_len, names[i]);
    }
    if (kv_mb && kv_fit(cmd, kv_mb, models, n_models, &so)) goto done;
    so.conn = kafka.conn;
    so.prefix = kafka.topic_prefix;
    if (!lt_cli_kafka_has_brokers(&kafka)) {
        if (lt_devbroker_open(&dev, 1, 0)) FAIL("cannot start the embedded broker: %s", lt_errmsg());
        so.conn.brokers = lt_devbroker_bootstrap(dev);
        so.conn.in_process = true;
        so.devbroker = dev;
        so.at_least_once = true; /* the embedded broker's transactions are not to rely on */
        fprintf(stderr, "looptune serve: no --brokers: serving on the embedded in-memory broker at "
                        "%s (at-least-once; gone when this process ends)\n", so.conn.brokers);
    }
    /* the batched steps' run: warm start, telemetry, online tuning (run's options) */
    if (tel_opts.mode != LT_CLI_TEL_OFF || store_path) {
        memset(&tune_opts, 0, sizeof tune_opts);
        tune_opts.store = store;
        tune_opts.tune_online = tel_opts.tune_online;
        tune_opts.explore_share = tel_opts.explore_share;
        /* the worker's cluster; without --brokers the run's own embedded broker, with an
         * optimizer in this process, as `run --tune online` has */
        lt_cli_tel_run_opts(&tel_opts, &kafka, &tune_opts);
        so.tune = &tune_opts;
    }
    so.models = models;
    so.n_models = n_models;
    so.stop = &lt_cli_stop;
    if (http.given) {
        for (size_t i = 0; i < n_models; i++) model_names[i] = names[i];
        http.go.models = model_names;
        http.go.n_models = n_models;
        http.go.partitions = so.partitions;
        http.go.devbroker = dev;
        if (lt_cli_http_start(cmd, &http, &so.conn, so.prefix, &gw)) goto done;
    }
    lt_cli_catch_stop_signals();
    lt_serve_stats st;
    int rc = lt_serve_run(&so, &st);
    char err[512];
    snprintf(err, sizeof err, "%s", rc ? lt_errmsg() : "");
    const double nc = st.stage.committed ? (double)st.stage.committed : 1;
    const double avg = st.commit_ms_sum / nc;
    fprintf(stderr, "serve: %lld requests, %lld completed (stop %lld, length %lld, cancelled "
            "%lld, deadline %lld, error %lld), %lld dropped (partition moved), %lld records "
            "rejected; %lld tokens in %lld steps (%.2f s); %lld commits (%.1f ms each on average: begin "
            "%.1f, produce %.1f, offsets %.1f, end %.1f), %lld transactions aborted, %lld producer restarts; fetching paused %lld times, at most "
            "%lld requests held\n",
            (long long)st.requests, (long long)st.completed,
            (long long)st.by_reason[LT_FINISH_STOP], (long long)st.by_reason[LT_FINISH_LENGTH],
            (long long)st.by_reason[LT_FINISH_CANCELLED],
            (long long)st.by_reason[LT_FINISH_DEADLINE], (long long)st.by_reason[LT_FINISH_ERROR],
            (long long)st.dropped, (long long)st.rejected, (long long)st.tokens,
            (long long)st.steps, st.step_s, (long long)st.stage.committed, avg, st.stage.ms_begin / nc,
            st.stage.ms_produce / nc, st.stage.ms_offsets / nc, st.stage.ms_end / nc,
            (long long)st.stage.aborted,
            (long long)st.stage.producer_restarts, (long long)st.pauses,
            (long long)st.held_max);
    if (so.tune) lt_cli_warm_report(store, say_warm, st.warm_applied, st.warm_refused);
    if (st.tel.windows || st.observed_steps)
        fprintf(stderr, "serve: telemetry of the batched steps: %lld steps observed, %lld "
                "windows, %lld records emitted, %lld dropped\n", (long long)st.observed_steps,
                (long long)st.tel.windows, (long long)st.tel.sink.emitted,
                (long long)(st.tel.ring_dropped + st.tel.sink.dropped));
    if (rc) FAIL("%s", err);
    exit_code = 0;
done:
    lt_store_close(store);
    lt_gateway_close(gw); /* before the worker's models and the broker it talks to */
    lt_cli_http_free(&http);
    for (size_t i = 0; i < n_models; i++) lt_model_close(models[i].model);
    lt_devbroker_close(dev);
    lt_cli_kafka_free(&kafka);
    return exit_code;
}
