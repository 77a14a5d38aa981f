/* Telemetry for `looptune run`: the sink chosen on the command line (off,
 * file:PATH, kafka with --brokers or the embedded broker), the host record,
 * and the run's telemetry, driven from the token callback. */
#ifndef LT_TEL_CLI_H
#define LT_TEL_CLI_H

#include <stdio.h>

#include "cli.h"
#include "looptune/kafka.h"
#include "looptune/telemetry.h"

typedef enum { LT_CLI_TEL_OFF = 0, LT_CLI_TEL_FILE, LT_CLI_TEL_KAFKA } lt_cli_tel_mode;

typedef struct {
    lt_cli_tel_mode mode;
    const char *path;          /* file mode */
    const lt_cli_kafka *kafka; /* kafka mode: the cluster, brokers NULL for the embedded
                                  broker (borrowed; NULL: the embedded broker, no properties) */
    lt_tel_opts tel;           /* windows, drain, counters, detail (program/pool/sink set later) */
    /* Kafka mode: called once the broker is known, before the run's start
     * record is sent (dev is the embedded broker, NULL for --brokers).
     * Non-zero fails the start. */
    int (*before_open)(void *user, const char *brokers, lt_devbroker *dev, const char *run_id);
    void *user;
    /* the runtime's values (may be NULL): its whole-step tunables (the looped
     * executor, the decode thread count) go into the run start, and every
     * window closes with one over whole steps, so the optimizer tunes them */
    struct lt_tuning *tuning;
} lt_cli_tel_opts;

/* "off", "file:PATH" or "kafka" into o->mode (and o->path). */
int lt_cli_tel_parse(const char *s, lt_cli_tel_opts *o);

typedef struct lt_cli_tel lt_cli_tel;

/* Measures (or reads the cached) host record, opens the sink and the
 * telemetry of the decode program. Errors name the problem (lt_errmsg). */
int lt_cli_tel_start(lt_cli_tel **out, const lt_cli_tel_opts *o, lt_program *decode, lt_pool *pool,
                     const char *model, const char *dtype, const char *executor);
/* Call on every sampled token; n_prompt is the prompt length. The first
 * call starts observing (the prefill is not a decode step); each later one
 * ends the decode step that fed the previous token. NULL is a no-op. */
void lt_cli_tel_token(lt_cli_tel *t, int64_t n_prompt);
/* The run's telemetry (NULL if off). */
lt_tel *lt_cli_tel_handle(lt_cli_tel *t);
/* Ends the run's telemetry, prints its summary lines to f, frees t (NULL is
 * a no-op). */
void lt_cli_tel_finish(lt_cli_tel *t, FILE *f);

#endif
