/* looptune run / chat: the sampler's flags (see sampler_cli.h). */
#include "sampler_cli.h"

#include <stdint.h>
#include <stdio.h>

#include "cli.h"

void lt_cli_sampler_init(lt_cli_sampler *s) {
    *s = (lt_cli_sampler){.o = lt_sampler_defaults()};
}

int lt_cli_sampler_option(const char *cmd, int c, const char *arg, lt_cli_sampler *s) {
    int64_t v;
    switch (c) {
    case LT_CLI_O_TEMP:
        if (!lt_cli_parse_f32(arg, 0.0f, 100.0f, &s->o.temp))
            return lt_cli_fail(cmd, "bad --temp '%s': expected a number in [0, 100]", arg);
        return LT_CLI_OPT_HANDLED;
    case LT_CLI_O_TOP_P:
        if (!lt_cli_parse_f32(arg, 0.0f, 1.0f, &s->o.top_p) || s->o.top_p == 0.0f)
            return lt_cli_fail(cmd, "bad --top-p '%s': expected a number in (0, 1]", arg);
        return LT_CLI_OPT_HANDLED;
    case LT_CLI_O_TOP_K:
        if (!lt_cli_parse_i64(arg, 0, INT32_MAX, &v))
            return lt_cli_fail(cmd, "bad --top-k '%s': expected a number of tokens >= 0", arg);
        s->o.top_k = (int32_t)v;
        return LT_CLI_OPT_HANDLED;
    case LT_CLI_O_MIN_P:
        if (!lt_cli_parse_f32(arg, 0.0f, 1.0f, &s->o.min_p))
            return lt_cli_fail(cmd, "bad --min-p '%s': expected a number in [0, 1]", arg);
        return LT_CLI_OPT_HANDLED;
    case LT_CLI_O_REPEAT_PENALTY:
        if (!lt_cli_parse_f32(arg, 0.0f, 100.0f, &s->o.repeat_penalty) ||
            s->o.repeat_penalty == 0.0f)
            return lt_cli_fail(cmd, "bad --repeat-penalty '%s': expected a number in (0, 100]",
                               arg);
        return LT_CLI_OPT_HANDLED;
    case LT_CLI_O_REPEAT_LAST_N:
        if (!lt_cli_parse_i64(arg, -1, INT32_MAX, &v))
            return lt_cli_fail(cmd, "bad --repeat-last-n '%s': expected a number of tokens >= 0 "
                                    "or -1 (the context)", arg);
        s->last_n_is_ctx = v == -1;
        s->o.repeat_last_n = v == -1 ? 0 : (int32_t)v;
        return LT_CLI_OPT_HANDLED;
    case LT_CLI_O_SEED:
        if (!lt_cli_parse_i64(arg, 0, INT64_MAX, &v))
            return lt_cli_fail(cmd, "bad --seed '%s': expected a number >= 0", arg);
        s->o.seed = (uint64_t)v;
        s->seed_given = true;
        return LT_CLI_OPT_HANDLED;
    default: return LT_CLI_OPT_NOT_MINE;
    }
}

int lt_cli_sampler_make(const char *cmd, lt_cli_sampler *s, int64_t vocab_size, int64_t ctx_len,
                        lt_sampler **out) {
    if (s->last_n_is_ctx) s->o.repeat_last_n = (int32_t)ctx_len;
    if (!s->seed_given) s->o.seed = lt_now_ns() & 0x7fffffffffffffffull;
    int rc = lt_sampler_init_opts(out, vocab_size, &s->o);
    return rc ? lt_cli_fail_status(cmd, rc, "bad sampler settings") : 0;
}

void lt_cli_sampler_help(void) {
    const lt_sampler_opts d = lt_sampler_defaults();
    printf("Sampling (llama.cpp's meanings and order: repetition penalty, top-k, top-p,\n"
           "min-p, then the temperature):\n"
           "      --temp X            temperature, 0 = greedy (default %g)\n"
           "      --top-p P           nucleus: the most probable tokens up to P, in (0,1]\n"
           "                          (default %g; 1 = off)\n"
           "      --top-k N           only the N most probable tokens (default %d = off)\n"
           "      --min-p P           only tokens at least P times as probable as the most\n"
           "                          probable, in [0,1] (default %g = off)\n"
           "      --repeat-penalty R  divide the logits of recent tokens by R (multiply\n"
           "                          negative ones) (default %g = off)\n"
           "      --repeat-last-n N   the tokens (prompt and generated) the penalty looks\n"
           "                          back over, 0 = none, -1 = the context (default %d)\n"
           "      --seed S            sampler seed (default: from the clock)\n",
           (double)d.temp, (double)d.top_p, d.top_k, (double)d.min_p, (double)d.repeat_penalty,
           d.repeat_last_n);
}
