/* Known sample envelopes for the kafka tests: sample_build(s, kind, i) fills
 * one envelope of every payload kind from a formula of i (so a reader can
 * recompute what it should have got), with values that stress the codec:
 * non-ASCII text, 64-bit extremes, negative values, bytes with NULs, enums,
 * repeated and nested messages. sample_equal compares two messages field by
 * field through their descriptors and names the first difference. */
#ifndef LT_TEST_KAFKA_SAMPLES_H
#define LT_TEST_KAFKA_SAMPLES_H

#include <stdio.h>
#include <string.h>

#include "looptune/kafka.h"

#define SAMPLE_KINDS 11

typedef struct {
    Looptune__Envelope env;
    Looptune__Host host;
    Looptune__RunStart run_start;
    Looptune__RunEnd run_end;
    Looptune__KernelWindow window;
    Looptune__CallSample call;
    Looptune__CallSamples calls;
    Looptune__CallSample callv[3], *callp[3];
    Looptune__Control control;
    Looptune__Config config;
    Looptune__ConfigStats stats;
    Looptune__Task task;
    Looptune__Result result;
    Looptune__Trial trial;
    Looptune__KernelParams kp[2], *kpp[2];
    Looptune__Param param[4], *paramp[4];
    Looptune__Counter counter[3], *counterp[3];
    Looptune__HParam hparam[2], *hparamp[2];
    char *isa[3];
    char *avail[2];
    char run_id[32], node[32], text[64];
    uint8_t blob[8];
} sample;

/* The payload case of kind k (0..SAMPLE_KINDS-1). */
static inline Looptune__Envelope__PayloadCase sample_case(int k) {
    static const Looptune__Envelope__PayloadCase cases[SAMPLE_KINDS] = {
        LOOPTUNE__ENVELOPE__PAYLOAD_HOST,          LOOPTUNE__ENVELOPE__PAYLOAD_RUN_START,
        LOOPTUNE__ENVELOPE__PAYLOAD_RUN_END,       LOOPTUNE__ENVELOPE__PAYLOAD_KERNEL_WINDOW,
        LOOPTUNE__ENVELOPE__PAYLOAD_CALL_SAMPLE,   LOOPTUNE__ENVELOPE__PAYLOAD_CONTROL,
        LOOPTUNE__ENVELOPE__PAYLOAD_CONFIG,        LOOPTUNE__ENVELOPE__PAYLOAD_TASK,
        LOOPTUNE__ENVELOPE__PAYLOAD_RESULT,        LOOPTUNE__ENVELOPE__PAYLOAD_TRIAL,
        LOOPTUNE__ENVELOPE__PAYLOAD_CALL_SAMPLES};
    return cases[k];
}

static inline void sample_params(sample *s, int i, size_t n) {
    static const char *const names[4] = {"tile_m", "unroll", "prefetch", "threads"};
    for (size_t k = 0; k < n; k++) {
        looptune__param__init(&s->param[k]);
        s->param[k].name = (char *)names[k];
        s->param[k].value = (int64_t)(k + 1) * (i + 3) * (k == 2 ? -1 : 1); /* one negative */
        s->paramp[k] = &s->param[k];
    }
}

static inline void sample_host(sample *s, int i) {
    static char *isa[3] = {"avx2", "fma", "avx512f"};
    looptune__host__init(&s->host);
    s->host.host_id = "h-3f9a";
    s->host.fingerprint = "Intel(R) Xeon(R) Platinum|avx2 fma avx512f|2|48K/2M/105M";
    s->host.cpu_model = "Intel(R) Xeon(R) Platinum 8481C — «Sapphire» ünïcode";
    s->host.n_isa_flags = 3;
    s->host.isa_flags = isa;
    s->host.cores = 2 + (uint32_t)i;
    s->host.l1d_bytes = 49152;
    s->host.l2_bytes = 2097152;
    s->host.l3_bytes = 110100480ull + (uint64_t)i;
    s->host.triad_gb_s = 12.5 + i;
    s->host.read_gb_s = 17.25;
    s->host.peak_gflops = 1.0 / 3.0;
}

/* Fills s->env with sample i of kind k. Pointers refer into s. */
static inline Looptune__Envelope *sample_build(sample *s, int k, int i) {
    memset(s, 0, sizeof *s);
    lt_envelope_init(&s->env);
    s->env.time_ns = 1700000000000000000ull + (uint64_t)i * 1000003ull;
    snprintf(s->run_id, sizeof s->run_id, "run-%04d", i);
    snprintf(s->node, sizeof s->node, "blk%d.attn_q", i % 7);
    s->env.payload_case = sample_case(k);
    switch (s->env.payload_case) {
    case LOOPTUNE__ENVELOPE__PAYLOAD_HOST:
        sample_host(s, i);
        s->env.host = &s->host;
        break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_RUN_START:
        sample_host(s, i);
        sample_params(s, i, 4);
        looptune__run_start__init(&s->run_start);
        s->run_start.run_id = s->run_id;
        s->run_start.host = &s->host;
        s->run_start.model = "stories110M-q8_0.gguf";
        s->run_start.dtype = "q8_0";
        s->run_start.executor = i % 2 ? "looped" : "dispatch";
        s->run_start.threads = 2;
        for (int j = 0; j < 2; j++) {
            looptune__kernel_params__init(&s->kp[j]);
            s->kp[j].node = j ? "blk0.ffn_up" : s->node;
            s->kp[j].kernel = j ? "matmul" : "matvec";
            s->kp[j].shape = "q8_0:768x2048";
            s->kp[j].n_params = (size_t)(2 + j * 2);
            s->kp[j].params = s->paramp;
            s->kpp[j] = &s->kp[j];
        }
        s->run_start.n_kernels = 2;
        s->run_start.kernels = s->kpp;
        s->env.run_start = &s->run_start;
        break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_RUN_END:
        looptune__run_end__init(&s->run_end);
        s->run_end.run_id = s->run_id;
        s->run_end.tokens = 96 + (uint64_t)i;
        s->run_end.decode_s = 2.5e-3 * (i + 1);
        s->run_end.tok_s = 96.0 / (2.5e-3 * (i + 1));
        s->run_end.dropped_records = (uint64_t)i * 3;
        s->run_end.delivery_failures = UINT64_MAX - (uint64_t)i;
        s->env.run_end = &s->run_end;
        break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_KERNEL_WINDOW: {
        static char *avail[2] = {"cycles", "instructions"};
        sample_params(s, i, 3);
        looptune__kernel_window__init(&s->window);
        Looptune__KernelWindow *w = &s->window;
        w->run_id = s->run_id;
        w->window = (uint64_t)i;
        w->t_start_ns = 5000000000ull * (uint64_t)i;
        w->t_end_ns = w->t_start_ns + 1000000000ull;
        w->kernel = "matvec";
        w->node = s->node;
        w->shape = "q8_0:768x768";
        w->n_params = 3;
        w->params = s->paramp;
        w->count = 1000 + (uint64_t)i;
        w->min_ns = 9000 + (uint64_t)i;
        w->median_ns = 10000 + (uint64_t)i;
        w->p90_ns = 12000 + (uint64_t)i;
        w->max_ns = 400000 + (uint64_t)i;
        w->bytes = 626688.0;
        w->flops = 1179648.0;
        w->gb_s = 626688.0 / (10000 + i);
        w->gflops = 1179648.0 / (10000 + i);
        w->wait_share = 0.125;
        for (int j = 0; j < 2; j++) {
            looptune__counter__init(&s->counter[j]);
            s->counter[j].name = avail[j];
            s->counter[j].value = (uint64_t)(j + 1) * 123456789012ull + (uint64_t)i;
            s->counterp[j] = &s->counter[j];
        }
        w->n_counters = 2;
        w->counters = s->counterp;
        w->n_available_counters = 2;
        w->available_counters = avail;
        w->contention = i % 2 == 1;
        /* a trial's windows every 3 in 1..2, the incumbent outside one at 0 */
        w->candidate_id = i % 3 ? "cand-\u00fc" : "";
        w->on_candidate = i % 3 == 1;
        w->pair = 7u * (uint32_t)i;
        w->steps = 32 + (uint64_t)i;
        w->total_ns = (1000 + (uint64_t)i) * (10000 + (uint64_t)i);
        w->critical_ns = 1000 * (uint64_t)i;
        s->env.kernel_window = w;
        break;
    }
    case LOOPTUNE__ENVELOPE__PAYLOAD_CALL_SAMPLE:
        looptune__call_sample__init(&s->call);
        s->call.run_id = s->run_id;
        s->call.token = (uint64_t)i;
        s->call.thread = (uint32_t)(i % 2);
        s->call.node = s->node;
        s->call.kernel = "attention";
        s->call.start_ns = 123456789ull * (uint64_t)(i + 1);
        s->call.end_ns = s->call.start_ns + 4321;
        s->call.wait_ns = 17;
        s->call.bytes = 1e9 + i;
        s->call.flops = -0.0 + i; /* i = 0: zero, left out of JSON */
        s->env.call_sample = &s->call;
        break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_CALL_SAMPLES: /* a batch of i % 3 + 1 calls */
        looptune__call_samples__init(&s->calls);
        for (int j = 0; j <= i % 3; j++) {
            Looptune__CallSample *c = &s->callv[j];
            looptune__call_sample__init(c);
            c->token = (uint64_t)(i * 10 + j);
            c->thread = (uint32_t)j;
            c->node = s->node;
            c->kernel = j ? "matvec" : "rmsnorm";
            c->start_ns = 1000000ull * (uint64_t)(i + 1) + (uint64_t)j;
            c->end_ns = c->start_ns + 999 + (uint64_t)j;
            s->callp[j] = c;
        }
        s->calls.n_samples = (size_t)(i % 3 + 1);
        s->calls.samples = s->callp;
        s->calls.run_id = s->run_id;
        s->env.call_samples = &s->calls;
        break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_CONTROL:
        sample_params(s, i, 2);
        looptune__control__init(&s->control);
        s->control.run_id = s->run_id;
        s->control.node = s->node;
        s->control.kernel = "matvec";
        s->control.shape = "";
        s->control.n_params = 2;
        s->control.params = s->paramp;
        snprintf(s->text, sizeof s->text, "cand-%d \"quoted\"\t\\", i);
        s->control.candidate_id = s->text;
        s->env.control = &s->control;
        break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_CONFIG:
        sample_params(s, i, 4);
        looptune__config__init(&s->config);
        looptune__config_stats__init(&s->stats);
        s->config.kernel = "matmul";
        s->config.shape = "f32:64x768x768";
        s->config.host_class = "xeon-avx512-2c";
        s->config.n_params = 4;
        s->config.params = s->paramp;
        s->stats.samples = 50 + (uint64_t)i;
        s->stats.median_ns = 81234.5;
        s->stats.gb_s = 9.75;
        s->stats.gflops = 120.0 + i;
        s->stats.speedup = 1.0625;
        s->stats.trials = 24 + (uint32_t)i;
        s->stats.converged = i % 2 == 1;
        s->config.stats = &s->stats;
        s->env.config = &s->config;
        break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_TASK:
        looptune__task__init(&s->task);
        s->task.job_id = s->run_id;
        s->task.task_index = (uint64_t)i;
        s->task.kind = "matmul";
        for (int j = 0; j < 8; j++) s->blob[j] = (uint8_t)(j * 37 + i); /* includes 0 for i=0 */
        s->task.spec.len = 8;
        s->task.spec.data = s->blob;
        s->env.task = &s->task;
        break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_RESULT:
        looptune__result__init(&s->result);
        s->result.job_id = s->run_id;
        s->result.task_index = (uint64_t)i;
        s->result.worker = "worker-1";
        s->result.status = i % 2 ? LOOPTUNE__STATUS__STATUS_FAILED : LOOPTUNE__STATUS__STATUS_OK;
        for (int j = 0; j < 5; j++) s->blob[j] = (uint8_t)(255 - j);
        s->result.data.len = 5;
        s->result.data.data = s->blob;
        s->result.seconds = 0.001 * (i + 1);
        s->result.error = i % 2 ? "worker ran out of memory" : "";
        s->env.result = &s->result;
        break;
    case LOOPTUNE__ENVELOPE__PAYLOAD_TRIAL:
        looptune__trial__init(&s->trial);
        s->trial.study_id = "hpo-digits";
        s->trial.trial_id = (uint64_t)i;
        for (int j = 0; j < 2; j++) {
            looptune__hparam__init(&s->hparam[j]);
            s->hparamp[j] = &s->hparam[j];
        }
        s->hparam[0].name = "lr";
        s->hparam[0].value = 1e-3 * (i + 1);
        s->hparam[1].name = "activation";
        s->hparam[1].choice = i % 2 ? "relu" : "gelu";
        s->trial.n_params = 2;
        s->trial.params = s->hparamp;
        s->trial.objective = 0.9 + 0.001 * i;
        s->trial.status = LOOPTUNE__STATUS__STATUS_PRUNED;
        s->env.trial = &s->trial;
        break;
    default: break;
    }
    return &s->env;
}

static inline size_t sample_elem_size(ProtobufCType t) {
    switch (t) {
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(void *);
    default: return 4;
    }
}

static inline bool sample_equal_msg(const ProtobufCMessage *a, const ProtobufCMessage *b,
                                    char *why, size_t n, const char *path);

/* Compares one value of field f at pa and pb. */
static inline bool sample_equal_value(const ProtobufCFieldDescriptor *f, const char *pa,
                                      const char *pb, char *why, size_t n, const char *path) {
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *x = *(char *const *)pa, *y = *(char *const *)pb;
        if (strcmp(x ? x : "", y ? y : "")) {
            snprintf(why, n, "%s: \"%s\" != \"%s\"", path, x ? x : "", y ? y : "");
            return false;
        }
        return true;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *x = (const void *)pa, *y = (const void *)pb;
        if (x->len != y->len || (x->len && memcmp(x->data, y->data, x->len))) {
            snprintf(why, n, "%s: bytes differ (%zu vs %zu bytes)", path, x->len, y->len);
            return false;
        }
        return true;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *x = *(ProtobufCMessage *const *)pa;
        const ProtobufCMessage *y = *(ProtobufCMessage *const *)pb;
        if (!x || !y) {
            if (x == y) return true;
            snprintf(why, n, "%s: present on one side only", path);
            return false;
        }
        return sample_equal_msg(x, y, why, n, path);
    }
    default:
        /* numbers bit for bit: doubles must survive exactly */
        if (memcmp(pa, pb, sample_elem_size(f->type))) {
            snprintf(why, n, "%s: values differ", path);
            return false;
        }
        return true;
    }
}

static inline bool sample_equal_msg(const ProtobufCMessage *a, const ProtobufCMessage *b,
                                    char *why, size_t n, const char *path) {
    if (a->descriptor != b->descriptor) {
        snprintf(why, n, "%s: different message types", path);
        return false;
    }
    const ProtobufCMessageDescriptor *d = a->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        char sub[256];
        int sl = snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", f->name);
        if (sl < 0 || (size_t)sl >= sizeof sub) sub[sizeof sub - 1] = 0; /* long path: cut */
        const char *ba = (const char *)a, *bb = (const char *)b;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t na = *(const size_t *)(ba + f->quantifier_offset);
            size_t nb = *(const size_t *)(bb + f->quantifier_offset);
            if (na != nb) {
                snprintf(why, n, "%s: %zu vs %zu elements", sub, na, nb);
                return false;
            }
            const char *xa = *(char *const *)(ba + f->offset);
            const char *xb = *(char *const *)(bb + f->offset);
            size_t sz = sample_elem_size(f->type);
            for (size_t k = 0; k < na; k++) {
                char el[256];
                int el_len = snprintf(el, sizeof el, "%s[%zu]", sub, k);
                if (el_len < 0 || (size_t)el_len >= sizeof el) el[sizeof el - 1] = 0;
                if (!sample_equal_value(f, xa + k * sz, xb + k * sz, why, n, el)) return false;
            }
            continue;
        }
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            uint32_t ca = *(const uint32_t *)(ba + f->quantifier_offset);
            uint32_t cb = *(const uint32_t *)(bb + f->quantifier_offset);
            if (ca != cb) {
                snprintf(why, n, "%s: oneof case %u vs %u", sub, ca, cb);
                return false;
            }
            if (ca != f->id) continue;
        }
        if (!sample_equal_value(f, ba + f->offset, bb + f->offset, why, n, sub)) return false;
    }
    return true;
}

/* True if a and b hold the same values; else why names the first difference. */
static inline bool sample_equal(const Looptune__Envelope *a, const Looptune__Envelope *b,
                                char *why, size_t n) {
    why[0] = 0;
    return sample_equal_msg(&a->base, &b->base, why, n, "");
}

#endif
