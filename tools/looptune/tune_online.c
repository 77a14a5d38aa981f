/* `looptune run --tune online`: the summary of the closed loop around a run
 * (lt_run, the runtime's: listener, trials, the in-process optimizer). It
 * keeps every decode step's duration and kind to report throughput while
 * tuning, says why no trial started when none did, and measures the
 * initial against the tuned parameters at the end. */
#include "tune_online.h"

#include <stdlib.h>
#include <string.h>

#include "looptune/model.h"
#include "looptune/optimizer.h"

struct lt_cli_tune {
    lt_llama *llama; /* for the closing measurement */
    lt_run *run;
    FILE *opt_log; /* the in-process optimizer's decisions, shown at the end */
    char *opt_log_buf;
    size_t opt_log_len;
    uint64_t t_last;
    int64_t n, cap;
    double *ms;       /* [cap] step durations */
    uint8_t *explore; /* [cap] the step ran outside a trial (0), in an incumbent (1) or a
                         candidate (2) phase of one */
    int64_t first_change; /* step index of the first kept change, -1 none */
    int64_t last_change;  /* ... and of the last one */
    uint64_t t_first_step, t_last_change;
    int64_t applied_seen;
};

int lt_cli_tune_init(lt_cli_tune **out, lt_llama *l, int64_t n_tokens) {
    lt_cli_tune *t = calloc(1, sizeof *t);
    if (!t) return lt_error(LT_ENOMEM, "out of memory");
    t->llama = l;
    t->cap = n_tokens + 2;
    t->ms = calloc((size_t)t->cap, sizeof *t->ms);
    t->explore = calloc((size_t)t->cap, sizeof *t->explore);
    t->first_change = -1;
    /* its lines would interleave with the generated text: kept for the end */
    t->opt_log = open_memstream(&t->opt_log_buf, &t->opt_log_len);
    if (!t->ms || !t->explore || !t->opt_log) {
        lt_cli_tune_finish(t, NULL, NULL, NULL);
        return lt_error(LT_ENOMEM, "out of memory");
    }
    *out = t;
    return LT_OK;
}

FILE *lt_cli_tune_log(lt_cli_tune *t) { return t->opt_log; }

void lt_cli_tune_attach(lt_cli_tune *t, lt_run *run) {
    if (t) t->run = run;
}

void lt_cli_tune_token(lt_cli_tune *t) {
    if (!t || !t->run) return;
    lt_run_state rs;
    lt_run_info(t->run, &rs);
    if (!rs.online) return;
    uint64_t now = lt_now_ns();
    if (t->t_last && t->n < t->cap) {
        t->ms[t->n] = (double)(now - t->t_last) / 1e6;
        t->explore[t->n] = (uint8_t)rs.last_step_kind;
        t->n++;
    }
    lt_online_stats st;
    lt_online_stats_get(rs.online, &st);
    if (!t->t_first_step) t->t_first_step = now;
    if (st.applied > t->applied_seen) {
        t->applied_seen = st.applied;
        if (t->first_change < 0) t->first_change = t->n;
        t->last_change = t->n;
        t->t_last_change = now;
    }
    t->t_last = lt_now_ns(); /* the next step starts after our own work */
}

/* Decode tokens/s of the initial and the tuned parameters, measured the way
 * `bench --compare-executors` does: alternating rounds (A B, B A, ...) over
 * the same positions, so neither the context length nor a slow spell of the
 * machine favours one. Medians over the rounds. */
enum { MEASURE_ROUNDS = 6, MEASURE_TOKENS = 32 };

static void measure(lt_cli_tune *t, lt_online *online, double *tps_initial, double *tps_tuned) {
    double v[2][MEASURE_ROUNDS];
    int32_t tok = 1;
    for (int r = 0; r < MEASURE_ROUNDS; r++)
        for (int k = 0; k < 2; k++) {
            bool initial = (k == 0) == (r % 2 == 0);
            lt_online_use_initial(online, initial);
            uint64_t t0 = lt_now_ns();
            for (int j = 0; j < MEASURE_TOKENS; j++)
                if (lt_llama_eval(t->llama, &tok, 1, j)) return;
            v[initial ? 0 : 1][r] = MEASURE_TOKENS * 1e9 / (double)(lt_now_ns() - t0);
        }
    lt_online_use_initial(online, false);
    *tps_initial = lt_median(v[0], MEASURE_ROUNDS);
    *tps_tuned = lt_median(v[1], MEASURE_ROUNDS);
}

/* A first trial waits for this many telemetry windows of the run (the
 * optimizer's rule: two whole ones of every node, the first may be partial). */
enum { FIRST_TRIAL_WINDOWS = 3 };

/* Why a run started no trial: a short tag for the summary line and a
 * sentence with the figures. windows: those the run closed while decoding.
 * Call after the in-process optimizer's thread has stopped. */
static void no_trial_reason(const lt_cli_tune *t, const lt_run_state *rs,
                            const lt_online_stats *st, int64_t windows, char *tag, size_t ntag,
                            char *why, size_t nwhy) {
    double ms = t->t_last > t->t_first_step ? (double)(t->t_last - t->t_first_step) / 1e6 : 0;
    if (windows < FIRST_TRIAL_WINDOWS) {
        snprintf(tag, ntag, "too few telemetry windows");
        snprintf(why, nwhy, "its %lld decode steps closed %lld telemetry window%s and a first "
                 "trial waits for %d: decode more tokens (-n) or close windows sooner "
                 "(--telemetry-window-tokens)", (long long)t->n, (long long)windows,
                 windows == 1 ? "" : "s", FIRST_TRIAL_WINDOWS);
        return;
    }
    if (rs->optimizer) {
        lt_optimizer_run_info in;
        const char *hint = "decode more tokens (-n)";
        if (lt_optimizer_run_info_get(rs->optimizer, rs->run_id, &in) != LT_OK) {
            snprintf(tag, ntag, "run too short");
            snprintf(why, nwhy, "the decode ended after %.0f ms, before the optimizer had the "
                     "run's start: %s", ms, hint);
            return;
        }
        if (in.trials > 0) {
            snprintf(tag, ntag, "run too short");
            snprintf(why, nwhy, "the optimizer sent a trial once the decode had ended (after "
                     "%.0f ms, %lld telemetry windows): %s", ms, (long long)windows, hint);
            return;
        }
        if (in.windows < FIRST_TRIAL_WINDOWS) {
            snprintf(tag, ntag, "run too short");
            snprintf(why, nwhy, "the decode lasted %.0f ms (%lld steps, %lld telemetry windows) "
                     "and ended before %d of its windows had reached the optimizer (%lld had), "
                     "which a first trial waits for: %s", ms, (long long)t->n,
                     (long long)windows, FIRST_TRIAL_WINDOWS, (long long)in.windows, hint);
            return;
        }
        switch (in.wait) {
        case LT_OPT_WAIT_THROUGHPUT: snprintf(tag, ntag, "throughput bound"); hint = NULL; break;
        case LT_OPT_WAIT_STALE: snprintf(tag, ntag, "telemetry stopped"); hint = NULL; break;
        case LT_OPT_WAIT_DONE: snprintf(tag, ntag, "nothing left to explore"); hint = NULL; break;
        case LT_OPT_WAIT_OTHER: snprintf(tag, ntag, "optimizer waiting"); hint = NULL; break;
        default: snprintf(tag, ntag, "run too short"); break;
        }
        snprintf(why, nwhy, "the decode lasted %.0f ms (%lld steps, %lld telemetry windows); "
                 "the optimizer, with %lld of the windows (%lld steps), started none: %s%s%s",
                 ms, (long long)t->n, (long long)windows, (long long)in.windows,
                 (long long)in.steps, in.waiting[0] ? in.waiting : "it had not looked yet",
                 hint ? ": " : "", hint ? hint : "");
        return;
    }
    int64_t for_us = st->received - st->ignored;
    if (for_us == 0) {
        snprintf(tag, ntag, "no optimizer reachable");
        snprintf(why, nwhy, "no control for this run arrived on %s at %s in its %.0f ms of "
                 "decode: is `looptune optimizer --brokers %s` running? (a first trial also "
                 "needs %d telemetry windows and a few seconds of decode)", rs->control_topic,
                 rs->brokers, ms, rs->brokers, FIRST_TRIAL_WINDOWS);
        return;
    }
    snprintf(tag, ntag, "no trial offered");
    snprintf(why, nwhy, "%lld control%s for this run arrived (%lld applied, %lld rejected), none "
             "a trial", (long long)for_us, for_us == 1 ? "" : "s", (long long)st->applied,
             (long long)st->rejected);
}

void lt_cli_tune_finish(lt_cli_tune *t, lt_run *run, FILE *f, lt_tel_stats *tel_stats) {
    if (!t) {
        lt_run_close_stats(run, tel_stats);
        return;
    }
    lt_online_stats st = {0};
    lt_run_state rs = {0};
    if (run) lt_run_info(run, &rs);
    int64_t windows = rs.tel ? lt_tel_windows_closed(rs.tel) : 0; /* while decoding */
    if (run) lt_run_end(run); /* the closing measurement is not a decode step */
    if (rs.online) lt_online_stats_get(rs.online, &st);
    if (f && rs.online) {
        char tag[64] = "", why[1024] = "";
        if (!st.trials) no_trial_reason(t, &rs, &st, windows, tag, sizeof tag, why, sizeof why);
        fprintf(f, "  online tuning: %lld trials%s%s%s, %lld changes applied, %lld controls "
                   "rejected; %lld of %lld decode steps (%.1f%%) ran candidates\n",
                (long long)st.trials, tag[0] ? " (" : "", tag, tag[0] ? ")" : "",
                (long long)st.applied, (long long)st.rejected, (long long)st.candidate_tokens,
                (long long)t->n, t->n ? 100.0 * (double)st.candidate_tokens / (double)t->n : 0.0);
        if (why[0]) fprintf(f, "  no trial started: %s\n", why);
        /* throughput while exploring. The context grows through a run and
         * every step gets slower with it, so each step is compared with the
         * steps outside trials around it (within LOCAL steps on either side):
         * per kind of step, the median of its speed against their median;
         * and over the stretch after a warm-up, the time the steps would have
         * taken at the mean of the steps outside trials around them against
         * the time they took (means: a step time's distribution has a long
         * tail on a shared machine, outside trials as much as inside) */
        enum { LOCAL = 256 };
        int64_t lo = t->n / 8, hi = t->n;
        double *v = malloc((size_t)(hi > lo ? hi - lo : 1) * sizeof *v);
        double *r[3] = {NULL, NULL, NULL};
        int64_t nr[3] = {0, 0, 0};
        double sum_base = 0, sum_took = 0;
        for (int k = 0; k < 3; k++) r[k] = malloc((size_t)(hi > lo ? hi - lo : 1) * sizeof *r[k]);
        for (int64_t i = lo; v && r[0] && r[1] && r[2] && i < hi; i++) {
            int64_t nv = 0;
            double mean = 0;
            /* a long trial has no step outside trials near its middle: look
             * further until there are some */
            for (int64_t w = LOCAL; !nv && w < 4 * (hi - lo + 1); w *= 2) {
                int64_t a = i - w < lo ? lo : i - w, b = i + w >= hi ? hi - 1 : i + w;
                mean = 0;
                for (int64_t j = a; j <= b; j++)
                    if (!t->explore[j]) mean += v[nv++] = t->ms[j];
            }
            if (!nv || !(t->ms[i] > 0)) continue;
            mean /= (double)nv;
            int k = t->explore[i];
            if (k >= 0 && k < 3) r[k][nr[k]++] = lt_median(v, (int)nv) / t->ms[i];
            sum_base += mean;
            sum_took += t->ms[i];
        }
        double med[3] = {0, 0, 0};
        for (int k = 0; k < 3; k++)
            if (r[k] && nr[k]) med[k] = lt_median(r[k], (int)nr[k]);
        free(v);
        for (int k = 0; k < 3; k++) free(r[k]);
        if (st.trials && med[1] > 0 && med[2] > 0 && sum_took > 0)
            fprintf(f, "  while tuning (steps %lld..%lld): incumbent phases at %.1f%%, candidate "
                       "phases at %.1f%% of the speed of the steps outside trials around them "
                       "(medians); throughput %.1f%% of the incumbent's\n",
                    (long long)lo, (long long)hi - 1, 100.0 * med[1], 100.0 * med[2],
                    100.0 * sum_base / sum_took);
        if (st.applied)
            fprintf(f, "  changes applied from step %lld to step %lld (the last %.2f s into the "
                       "decode)\n", (long long)t->first_change, (long long)t->last_change,
                    (double)(t->t_last_change - t->t_first_step) / 1e9);
        bool changed = lt_online_report(rs.online, f) > 0;
        if (!changed) {
            fprintf(f, "  no parameter changed\n");
        } else {
            double a = 0, b = 0;
            measure(t, rs.online, &a, &b);
            if (a > 0 && b > 0)
                fprintf(f, "  decode with the initial parameters %.1f tokens/s, with the tuned ones "
                           "%.1f tokens/s (%.3fx; interleaved, %d rounds of positions 0..%d)\n",
                        a, b, b / a, MEASURE_ROUNDS, MEASURE_TOKENS - 1);
        }
    }
    if (f && rs.optimizer) lt_optimizer_report(rs.optimizer, t->opt_log);
    lt_run_close_stats(run, tel_stats); /* before the log its optimizer writes to */
    if (t->opt_log) {
        fclose(t->opt_log);
        if (f && t->opt_log_len) fprintf(f, "  in-process optimizer:\n%s", t->opt_log_buf);
        free(t->opt_log_buf);
    }
    free(t->ms);
    free(t->explore);
    free(t);
}
