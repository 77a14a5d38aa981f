/* Telemetry records (plain C structs of the telemetry layer) as
 * looptune.Envelope messages. Nothing is copied: the protobuf-c structs
 * borrow the record's strings and live in caller-provided storage, so the
 * drain thread encodes a record without allocating (except to grow the run
 * start's node list once). */
#include <stdlib.h>
#include <string.h>

#include "looptune/telemetry_sinks.h"

/* protobuf-c's string fields are char *; records hold const char *. The
 * encoder only reads them. */
static char *str(const char *s) { return (char *)(s ? s : ""); }

static void fill_params(Looptune__Param *p, Looptune__Param **ptrs, const lt_tel_node_desc *n) {
    for (int i = 0; i < n->n_params; i++) {
        looptune__param__init(&p[i]);
        p[i].name = str(n->params[i].name);
        p[i].value = n->params[i].value;
        ptrs[i] = &p[i];
    }
}

static void fill_host(Looptune__Host *h, char **isa, const lt_tel_host *src) {
    looptune__host__init(h);
    h->host_id = str(src->host_id);
    h->fingerprint = str(src->fingerprint);
    h->cpu_model = str(src->cpu_model);
    for (int i = 0; i < src->n_isa_flags && i < LT_TEL_MAX_ISA_FLAGS; i++) isa[i] = str(src->isa_flags[i]);
    h->n_isa_flags = (size_t)(src->n_isa_flags < LT_TEL_MAX_ISA_FLAGS ? src->n_isa_flags
                                                                     : LT_TEL_MAX_ISA_FLAGS);
    h->isa_flags = h->n_isa_flags ? isa : NULL;
    h->cores = (uint32_t)src->cores;
    h->l1d_bytes = src->l1d_bytes;
    h->l2_bytes = src->l2_bytes;
    h->l3_bytes = src->l3_bytes;
    h->triad_gb_s = src->triad_gb_s;
    h->read_gb_s = src->read_gb_s;
    h->peak_gflops = src->peak_gflops;
}

static int grow_kernels(lt_tel_pb *pb, int n) {
    if (n <= pb->cap_kernels) return LT_OK;
    Looptune__KernelParams *k = realloc(pb->kernels, (size_t)n * sizeof *k);
    if (k) pb->kernels = k;
    Looptune__KernelParams **kp = realloc(pb->kernel_ptrs, (size_t)n * sizeof *kp);
    if (kp) pb->kernel_ptrs = kp;
    Looptune__Param *p = realloc(pb->kparams, (size_t)n * LT_MAX_PARAMS * sizeof *p);
    if (p) pb->kparams = p;
    Looptune__Param **pp = realloc(pb->kparam_ptrs, (size_t)n * LT_MAX_PARAMS * sizeof *pp);
    if (pp) pb->kparam_ptrs = pp;
    if (!k || !kp || !p || !pp) return lt_error(LT_ENOMEM, "telemetry: out of memory for %d nodes", n);
    pb->cap_kernels = n;
    return LT_OK;
}

int lt_tel_record_to_envelope(const lt_tel_record *r, lt_tel_pb *pb, Looptune__Envelope **out) {
    Looptune__Envelope *env = &pb->env;
    lt_envelope_init(env);
    switch (r->kind) {
    case LT_TEL_HOST:
        fill_host(&pb->host, pb->isa_flags, r->u.host);
        env->payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_HOST;
        env->host = &pb->host;
        break;
    case LT_TEL_RUN_START: {
        const lt_tel_run_start *s = &r->u.run_start;
        Looptune__RunStart *m = &pb->run_start;
        looptune__run_start__init(m);
        const int n = s->n_nodes + s->n_step_entries;
        int rc = grow_kernels(pb, n);
        if (rc) return rc;
        m->run_id = str(s->run_id);
        if (s->host) {
            fill_host(&pb->host, pb->isa_flags, s->host);
            m->host = &pb->host;
        }
        m->model = str(s->model);
        m->dtype = str(s->dtype);
        m->executor = str(s->executor);
        m->threads = (uint32_t)s->threads;
        m->host_class = str(s->host_class);
        /* the nodes, then the whole-step tunables: node "", shape and
         * config_shape their key */
        for (int i = 0; i < n; i++) {
            Looptune__KernelParams *k = &pb->kernels[i];
            looptune__kernel_params__init(k);
            const bool node = i < s->n_nodes;
            const lt_tel_node_desc *d = node ? &s->nodes[i] : &s->step_entries[i - s->n_nodes];
            k->node = str(node ? d->label : NULL);
            k->kernel = str(d->kernel);
            k->shape = str(d->shape);
            k->config_shape = str(d->shape); /* the one key; kept for older readers */
            fill_params(&pb->kparams[i * LT_MAX_PARAMS], &pb->kparam_ptrs[i * LT_MAX_PARAMS], d);
            k->n_params = (size_t)d->n_params;
            k->params = d->n_params ? &pb->kparam_ptrs[i * LT_MAX_PARAMS] : NULL;
            pb->kernel_ptrs[i] = k;
        }
        m->n_kernels = (size_t)n;
        m->kernels = n ? pb->kernel_ptrs : NULL;
        env->payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_RUN_START;
        env->run_start = m;
        break;
    }
    case LT_TEL_RUN_END: {
        const lt_tel_run_end *e = &r->u.run_end;
        Looptune__RunEnd *m = &pb->run_end;
        looptune__run_end__init(m);
        m->run_id = str(e->run_id);
        m->tokens = e->tokens;
        m->decode_s = e->decode_s;
        m->tok_s = e->tok_s;
        m->dropped_records = e->dropped_records;
        m->delivery_failures = e->delivery_failures;
        env->payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_RUN_END;
        env->run_end = m;
        break;
    }
    case LT_TEL_KERNEL_WINDOW: {
        const lt_tel_kernel_window *w = &r->u.window;
        Looptune__KernelWindow *m = &pb->window;
        looptune__kernel_window__init(m);
        m->run_id = str(w->run_id);
        m->window = w->window;
        m->t_start_ns = w->t_start_ns;
        m->t_end_ns = w->t_end_ns;
        m->kernel = str(w->node->kernel);
        m->node = str(w->node->label);
        m->shape = str(w->node->shape);
        fill_params(pb->params, pb->param_ptrs, w->node);
        m->n_params = (size_t)w->node->n_params;
        m->params = m->n_params ? pb->param_ptrs : NULL;
        m->count = w->count;
        m->min_ns = w->min_ns;
        m->median_ns = w->median_ns;
        m->p90_ns = w->p90_ns;
        m->max_ns = w->max_ns;
        m->bytes = w->bytes;
        m->flops = w->flops;
        m->gb_s = w->gb_s;
        m->gflops = w->gflops;
        m->wait_share = w->wait_share;
        size_t nc = 0, na = 0;
        for (int c = 0; c < LT_CTR_COUNT; c++) {
            if (!(w->available & (1u << c))) continue;
            pb->available[na++] = str(lt_tel_counter_name((lt_tel_counter)c));
            if (!w->counters_read) continue;
            looptune__counter__init(&pb->counters[nc]);
            pb->counters[nc].name = str(lt_tel_counter_name((lt_tel_counter)c));
            pb->counters[nc].value = w->counters[c];
            pb->counter_ptrs[nc] = &pb->counters[nc];
            nc++;
        }
        m->n_counters = nc;
        m->counters = nc ? pb->counter_ptrs : NULL;
        m->n_available_counters = na;
        m->available_counters = na ? pb->available : NULL;
        m->contention = w->contention;
        m->candidate_id = str(w->candidate_id);
        m->on_candidate = w->on_candidate;
        m->pair = w->pair;
        m->steps = w->steps;
        m->total_ns = w->total_ns;
        m->critical_ns = w->critical_ns;
        env->payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_KERNEL_WINDOW;
        env->kernel_window = m;
        break;
    }
    case LT_TEL_CALL_SAMPLE: {
        const lt_tel_call_sample *c = &r->u.call;
        Looptune__CallSample *m = &pb->call;
        looptune__call_sample__init(m);
        m->run_id = str(c->run_id);
        m->token = c->token;
        m->thread = c->thread;
        m->node = str(c->node->label);
        m->kernel = str(c->node->kernel);
        m->start_ns = c->start_ns;
        m->end_ns = c->end_ns;
        m->wait_ns = c->wait_ns;
        m->bytes = c->bytes;
        m->flops = c->flops;
        env->payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_CALL_SAMPLE;
        env->call_sample = m;
        break;
    }
    default: return lt_error(LT_EINVAL, "telemetry: unknown record kind %d", (int)r->kind);
    }
    *out = env;
    return LT_OK;
}

void lt_tel_pb_free(lt_tel_pb *pb) {
    free(pb->kernels);
    free(pb->kernel_ptrs);
    free(pb->kparams);
    free(pb->kparam_ptrs);
    memset(pb, 0, sizeof *pb);
}
