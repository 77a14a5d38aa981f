/* The sampler's flags, shared by run and chat: one parser, one validation,
 * one help text whose defaults come from lt_sampler_defaults. */
#ifndef LT_SAMPLER_CLI_H
#define LT_SAMPLER_CLI_H

#include <getopt.h>
#include <stdbool.h>

#include "looptune/model.h"

/* The getopt results of the sampler options, above any command's own codes
 * and below the Kafka ones (cli.h). */
enum { LT_CLI_O_TEMP = 0x4a00, LT_CLI_O_TOP_P, LT_CLI_O_TOP_K, LT_CLI_O_MIN_P,
       LT_CLI_O_REPEAT_PENALTY, LT_CLI_O_REPEAT_LAST_N, LT_CLI_O_SEED };
#define LT_CLI_SAMPLER_OPTIONS                                                 \
    {"temp", required_argument, 0, LT_CLI_O_TEMP},                             \
    {"top-p", required_argument, 0, LT_CLI_O_TOP_P},                           \
    {"top-k", required_argument, 0, LT_CLI_O_TOP_K},                           \
    {"min-p", required_argument, 0, LT_CLI_O_MIN_P},                           \
    {"repeat-penalty", required_argument, 0, LT_CLI_O_REPEAT_PENALTY},         \
    {"repeat-last-n", required_argument, 0, LT_CLI_O_REPEAT_LAST_N},           \
    {"seed", required_argument, 0, LT_CLI_O_SEED}

typedef struct {
    lt_sampler_opts o;   /* starts as lt_sampler_defaults() */
    bool seed_given;     /* else the seed comes from the clock */
    bool last_n_is_ctx;  /* --repeat-last-n -1: the whole context */
} lt_cli_sampler;

void lt_cli_sampler_init(lt_cli_sampler *s);
/* Takes one getopt result if it is a sampler option: LT_CLI_OPT_HANDLED,
 * LT_CLI_OPT_ERROR after printing a one-line error, or LT_CLI_OPT_NOT_MINE. */
int lt_cli_sampler_option(const char *cmd, int c, const char *arg, lt_cli_sampler *s);
/* The sampler for a runtime of context ctx_len (resolves --repeat-last-n -1
 * and the clock seed). Returns 0, or 1 after printing the error. */
int lt_cli_sampler_make(const char *cmd, lt_cli_sampler *s, int64_t vocab_size, int64_t ctx_len,
                        lt_sampler **out);
/* The options' help lines (description column 26) on stdout. */
void lt_cli_sampler_help(void);

#endif
