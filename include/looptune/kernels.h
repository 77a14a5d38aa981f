/* looptune kernels: each kernel family is a descriptor (name, tunable
 * parameter space, analytic cost, constraint check, one run function per ISA)
 * in a registry. The tuner changes parameters, never kernel code. */
#ifndef LOOPTUNE_KERNELS_H
#define LOOPTUNE_KERNELS_H

#include "looptune/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    LT_K_MATVEC = 0, /* decode projections: y = W x (one token) */
    LT_K_MATMUL,     /* prefill projections: Y = X W^T (many tokens) */
    LT_K_RMSNORM,
    LT_K_ROPE,
    LT_K_KV_STORE,
    LT_K_ATTENTION,
    LT_K_SOFTMAX,
    LT_K_SWIGLU,
    LT_K_ADD,
    LT_K_EMBED,
    LT_KERNEL_COUNT
} lt_kernel_id;

#define LT_MAX_OPERANDS 8
#define LT_MAX_PARAMS 8
#define LT_MAX_PARAM_VALUES 16

/* Values of a kernel's tunable parameters, indexed like lt_kernel.params. */
typedef struct {
    int32_t v[LT_MAX_PARAMS];
} lt_params;

/* Runtime values that change from one step of the program to the next.
 * A step processes n_tokens tokens of one sequence at positions
 * pos..pos+n-1, or (token_pos set) tokens of several sequences at once,
 * token t at position token_pos[t] of sequence slot token_slot[t] (a
 * batched decode step). A sequence slot is a plane of the KV caches: the
 * caches are [kv_dim][ctx][slots], token t's keys and values go to row
 * lt_step_pos(t) of plane lt_step_slot(t), and its attention reads rows
 * 0 .. lt_step_pos(t) of that plane.
 *
 * seq identifies one execution of a program: the executors (lt_exec_*) set
 * it from a process-wide counter, so no two executions share a value. A
 * kernel may cache per thread what it derives from its inputs (e.g. matvec's
 * quantised activations) keyed by (its lt_call, seq): within one execution
 * a node runs once, so its inputs cannot change under the same key. 0 means
 * "not an executor step" (direct callers): nothing is reused. */
typedef struct {
    int64_t pos;           /* position of the step's first token */
    int64_t n_tokens;      /* tokens in this step (>= 1) */
    const int32_t *tokens; /* [n_tokens] token ids (read by EMBED) */
    uint64_t seq;          /* execution number set by the executor; 0 = none */
    int32_t slot;              /* the sequence slot of every token (token_slot NULL) */
    const int64_t *token_pos;  /* [n_tokens] each token's position, or NULL */
    const int32_t *token_slot; /* [n_tokens] each token's slot (with token_pos), or NULL */
} lt_step;

/* Token t's position and sequence slot in step s. */
static inline int64_t lt_step_pos(const lt_step *s, int64_t t) {
    return s->token_pos ? s->token_pos[t] : s->pos + t;
}
static inline int32_t lt_step_slot(const lt_step *s, int64_t t) {
    return s->token_slot ? s->token_slot[t] : s->slot;
}

/* MATVEC ia[1]: what the kernel computes from x before the product. */
typedef enum { LT_MV_PRE_NONE = 0, LT_MV_PRE_RMSNORM = 1, LT_MV_PRE_SWIGLU = 2 } lt_mv_prologue;
/* MATVEC ia[2]: what the kernel does with its rows of y after the product
 * (bits; rope first, then the store). */
enum {
    LT_MV_POST_ROPE = 1,  /* rotate y as ROPE does: head_dim ia[3], base fa[1] */
    LT_MV_POST_STORE = 2, /* copy y into row step->pos of the cache op4 */
    LT_MV_POST_BIAS = 4,  /* first y += op5, as ADD does (a projection's bias) */
    LT_MV_POST_NEOX = 8,  /* with ROPE: LT_ROPE_NEOX pairs (halves of a head) */
};
/* ROPE ia[1]: which elements of a head of head_dim hd rotate together.
 * NORM pairs (x[2i], x[2i+1]) (llama2.c, GGUF llama: llama.cpp's
 * LLAMA_ROPE_TYPE_NORM); NEOX pairs (x[i], x[i + hd/2]) (GPT-NeoX, HF's
 * rotate_half, GGUF qwen2: LLAMA_ROPE_TYPE_NEOX). Pair i turns by the same
 * angle in both. */
typedef enum { LT_ROPE_NORM = 0, LT_ROPE_NEOX = 1 } lt_rope_mode;
/* The widest x a matvec with a prologue takes (its out-of-memory path holds
 * x' on the stack). */
#define LT_MV_PRE_MAX_COLS 16384

/* One kernel call. op[0] is always the output. Operands, attributes and
 * their meaning per kernel (all activations f32, row-major, one row per
 * token; "n" = tokens = op[0]->ne[1]):
 *
 * MATVEC    op0 y[rows] f32, op1 W (ne = {cols, rows}) any dtype, op2 x[cols] f32.
 *           ia[0] = 1: accumulate (y += W x) instead of y = W x.
 *           ia[1]: the input prologue, W x' instead of W x (lt_mv_prologue):
 *           RMSNORM x' = rmsnorm(x, op3 w[cols], eps fa[0]); SWIGLU
 *           x' = silu(x) * op3 up[cols]. The same bits as the RMSNORM or SWIGLU
 *           kernel into a buffer, then the matvec.
 *           ia[2]: the epilogue on each thread's rows of y (LT_MV_POST_*):
 *           BIAS first adds op5 b[rows] f32 as an ADD node would; ROPE
 *           rotates them in place as a ROPE node with head_dim ia[3], base
 *           fa[1], mode NEOX if the NEOX bit is set (else NORM) and the
 *           frequency factors op6 (or NULL) would (one token at step->pos);
 *           STORE then copies them into row step->pos of op4, a cache (ne =
 *           {rows, seq_len}) f32, as a KV_STORE node would. With a NEOX rope a
 *           task holds whole heads (rows_per_task rounds up to a multiple of
 *           head_dim), so the thread that computed a pair's rows rotates it.
 *           op3 is unused (-1 / NULL) without a prologue.
 * MATMUL    op0 Y[n][rows], op1 W (ne = {cols, rows}) any dtype, op2 X[n][cols].
 *           ia[0] = 1: accumulate.
 * RMSNORM   op0 y[n][d], op1 x[n][d], op2 w[d] f32. fa[0] = eps.
 *           y = x / sqrt(mean(x^2) + eps) * w. y may equal x.
 * ROPE      op0 q[n][heads*hd] in place, op1 k[n][kv_heads*hd] in place or NULL.
 *           ia[0] = head_dim, ia[1] = lt_rope_mode, fa[0] = base (theta), op2
 *           factors[head_dim/2] f32 or NULL. Token t is at step->pos + t.
 *           Pair i of each head (lt_rope_mode says which two elements)
 *           rotates by angle pos * base^(-2i/head_dim) / factors[i] (the
 *           factors as llama.cpp applies a rope_freqs tensor: Llama 3's
 *           scaling).
 * KV_STORE  op0 cache (ne = {kv_dim, seq_len}) f32, op1 src[n][kv_dim].
 *           Row t of src goes to cache row step->pos + t.
 * ATTENTION op0 out[n][heads*hd], op1 q[n][heads*hd], op2 kcache, op3 vcache
 *           (ne = {kv_heads*hd, seq_len}), op4 scratch f32 (ne = {seq_len, nth}).
 *           ia[0] = heads, ia[1] = kv_heads, ia[2] = head_dim. Query t (at
 *           position p = step->pos + t) attends causally to cache rows 0..p;
 *           query head h reads kv head h / (heads / kv_heads); scale 1/sqrt(hd).
 * SOFTMAX   op0 x[n][len] in place, row-wise.
 * SWIGLU    op0 out[n][f], op1 gate[n][f], op2 up[n][f]: out = silu(gate) * up.
 * ADD       op0 y[n][d], op1 a[n][d], op2 b[n][d] or b[1][d] (one row added to
 *           every row: a bias): y = a + b (y may alias a or b).
 * EMBED     op0 out[n][dim] f32, op1 table (ne = {dim, vocab}) any dtype.
 *           Row t = table row step->tokens[t]. */
typedef struct {
    lt_tensor *op[LT_MAX_OPERANDS];
    int64_t ia[4];
    float fa[4];
    lt_params params;
    uint32_t flags; /* LT_CALL_*: what the call is part of (its regime) */
} lt_call;

/* lt_call.flags: the call belongs to a batched decode step (one token of
 * each of several sequences, lt_llama_eval_batch), whose regime is
 * LT_REGIME_BATCH whatever its token count. The program builder sets it on
 * every node of such a step (lt_program_set_node_flags). */
#define LT_CALL_BATCH 1u

/* Runs thread ith's share of the call (0 <= ith < nth). Every thread of the
 * call must be given the same call and step. Writes only its own share of
 * op[0] (never another thread's rows), so the call is complete once all nth
 * threads have returned. */
typedef void (*lt_kernel_fn)(const lt_call *call, const lt_step *step, int ith, int nth);

typedef struct {
    const char *name;
    int32_t n_values;
    int32_t values[LT_MAX_PARAM_VALUES]; /* the allowed values, ascending */
    int32_t def;                          /* default: measured on the reference machine */
    /* The ISAs whose paths it changes (bit 1 << lt_isa); 0: every ISA. On
     * the others it does nothing, so it is no dimension of their space. */
    uint32_t isas;
    /* Paths with a default of their own, measured there: isa_def[i] where
     * bit 1 << i of isa_defs is set, def elsewhere (lt_param_default). */
    uint32_t isa_defs;
    int32_t isa_def[LT_ISA_COUNT];
    /* A default that depends on this machine too (its caches, lt_cpu):
     * when set, it alone gives the default on isa's path. The host's
     * fingerprint names what it reads, so a tuned configuration of one
     * machine class never meets another's default. */
    int32_t (*host_def)(lt_isa isa);
    /* The weight dtypes whose paths it changes (bit 1 << lt_dtype of op[1]);
     * 0: every dtype. On the others it does nothing, so it is no dimension
     * of the space of their calls (lt_space_fit_call, lt_space_fit_shape). */
    uint32_t dtypes;
    /* The regimes whose calls it changes (bit 1 << lt_regime); 0: every
     * regime. In the others it does nothing, so it is no dimension of their
     * calls' space (lt_space_fit_call, lt_space_fit_shape), and a stored
     * value may leave it out (it then takes its default). */
    uint32_t regimes;
} lt_param_def;

/* The dtypes with the vector blocking of the linear kernels (the others,
 * q4_0 .. q6_k, run integer dots without it for now). */
#define LT_DTYPES_BLOCKED ((1u << LT_F32) | (1u << LT_F16) | (1u << LT_BF16) | (1u << LT_Q8_0))

static inline bool lt_param_acts_on(const lt_param_def *d, lt_dtype t) {
    return d->dtypes == 0 || (d->dtypes >> t & 1u);
}

/* The dtype whose parameters a weight's path reads (lt_param_acts_on):
 * q8_0 rows interleaved by 16 (core.h) take the integer group dots of q4_0
 * .. q6_k, not the blocking and act_* modes of q8_0's plain and split rows
 * (the kernels' qdot.h dispatches so); any other weight, its own dtype's.
 * Where the two differ, a key names the layout too ("q8_0x16:..."), so
 * each path keeps its own tuned values. */
static inline lt_dtype lt_params_dtype(lt_dtype t, lt_layout l) {
    return t == LT_Q8_0 && l == LT_LAYOUT_X16 ? LT_Q4_0 : t;
}

/* The ISAs with vector paths: blocking and prefetch parameters act only there. */
#define LT_ISAS_VECTOR ((1u << LT_ISA_AVX2) | (1u << LT_ISA_AVX512))

static inline bool lt_param_applies(const lt_param_def *d, lt_isa isa) {
    return d->isas == 0 || (d->isas >> isa & 1u);
}

/* The parameter's default on isa's path. */
static inline int32_t lt_param_default(const lt_param_def *d, lt_isa isa) {
    if (d->host_def) return d->host_def(isa);
    return d->isa_defs >> isa & 1u ? d->isa_def[isa] : d->def;
}

typedef struct {
    const char *name; /* "matvec", "matmul", ... */
    lt_kernel_id id;
    int n_params;
    lt_param_def params[LT_MAX_PARAMS];
    /* One run function per ISA; NULL falls back to the next lower ISA.
     * run[LT_ISA_PORTABLE] is the scalar reference and is never NULL. */
    lt_kernel_fn run[LT_ISA_COUNT];
    /* Analytic cost of one call: bytes read+written from memory and FLOPs. */
    void (*cost)(const lt_call *call, const lt_step *step, double *bytes, double *flops);
    /* Validates operand shapes, dtypes and the parameters against the
     * kernel's constraints. Returns LT_OK, or an error with lt_error detail. */
    int (*check)(const lt_call *call);
    /* Optional: how many independent pieces the call's work splits into
     * (matvec: row groups of rows_per_task; attention: head groups). An
     * executor that cuts a call into tasks gives each the same number of
     * pieces; NULL: the work divides finely. */
    int64_t (*units)(const lt_call *call);
    /* Optional: the columns [*c0, *c1) of operand op (its ne[0] indices, in
     * every row the call touches) that task `task` of n_tasks reads or writes
     * when the call is cut into n_tasks tasks (task = ith, n_tasks = nth);
     * false when the kernel does not say (the task may touch all of it). The
     * looped executor then makes a task wait only for the producer's tasks
     * that write what it reads (attention's heads need their own q, k, v rows,
     * not every projection's last row group). */
    bool (*task_cols)(const lt_call *call, int op, int task, int n_tasks, int64_t *c0,
                      int64_t *c1);
} lt_kernel;

const lt_kernel *lt_kernel_get(lt_kernel_id id);
const lt_kernel *lt_kernel_find(const char *name); /* NULL if unknown */
/* The run function for isa: run[isa], or the nearest lower non-NULL one. */
lt_kernel_fn lt_kernel_fn_for(const lt_kernel *k, lt_isa isa);
/* Index of the named parameter, or -1. */
int lt_kernel_param_index(const lt_kernel *k, const char *name);
void lt_params_default(const lt_kernel *k, lt_params *p);
/* LT_OK if every value is one of its parameter's allowed values, else
 * LT_ECONFIG with detail naming the parameter and value. */
int lt_params_validate(const lt_kernel *k, const lt_params *p);
/* The same for any parameter list (the looped executor's, a thread count):
 * the one check of a value against its declared space; owner names it. */
int lt_param_defs_validate(const char *owner, const lt_param_def *defs, int n,
                           const lt_params *p);
/* Whether a kernel writes / reads operand op (executors derive data
 * dependencies from this): op[0] is written by every kernel; ROPE also
 * writes op[1] (in place), ATTENTION its scratch op[4], a storing MATVEC its
 * cache op[4] (which it does not read); MATVEC/MATMUL read op[0] when
 * accumulating, ROPE/SOFTMAX read op[0] (in place). */
bool lt_kernel_writes(lt_kernel_id id, const lt_call *call, int op);
bool lt_kernel_reads(lt_kernel_id id, const lt_call *call, int op);

/* Shape check plus lt_params_validate. */
int lt_call_check(lt_kernel_id id, const lt_call *call);

/* ---- shape keys -------------------------------------------------------------- */

/* The one key a call's tuned parameters go by, the same string in
 * telemetry, control messages, the config store and the tuner:
 * "q8_0:768x288:decode" (+ ":ia=a,b,c" when attributes are set). The regime
 * (decode: one token, prefill: many of one sequence, batch: a batched
 * decode step of several sequences) stands for the token count, so a
 * prefill value applies to every prefill batch size and a batch value to
 * every number of sequences in a step. */
typedef enum {
    LT_REGIME_DECODE = 0,
    LT_REGIME_PREFILL,
    LT_REGIME_BATCH,
    LT_REGIME_COUNT
} lt_regime;
const char *lt_regime_name(lt_regime r); /* "decode", "prefill", "batch" */
/* By name; LT_ENOTFOUND naming the regimes otherwise. */
int lt_regime_parse(const char *name, lt_regime *out);
/* The one decision of a step's regime: a batched decode step of several
 * tokens (batch: LT_CALL_BATCH) is batch, else several tokens are prefill
 * and one is decode. lt_shape_of_call and the runtime's thread count per
 * regime both ask it. */
lt_regime lt_regime_of(int64_t n_tokens, bool batch);

static inline bool lt_param_acts_in(const lt_param_def *d, lt_regime r) {
    return d->regimes == 0 || (d->regimes >> r & 1u);
}

typedef struct {
    lt_dtype dtype;   /* the weight operand's dtype (op[1]), else op[0]'s */
    lt_layout layout; /* its layout (named by the key where lt_params_dtype tells it apart) */
    int64_t rows, cols; /* op[1]'s ne[1], ne[0] (op[0]'s when there is no op[1]); rows 1
                           but for a weight (matvec, matmul, embed) */
    int64_t n_tokens; /* tokens of the step: op[0]->ne[1] (KV_STORE: its source's) */
    int64_t ia[3];    /* integer attributes (heads, head_dim, ...) */
    lt_regime regime;
} lt_shape;

void lt_shape_of_call(lt_kernel_id id, const lt_call *call, lt_shape *out);
/* The key of a shape; no tabs or blanks. Returns the length it wanted. */
size_t lt_shape_format(const lt_shape *s, char *buf, size_t n);
/* The weight a key names in its first field ("q4_k", "q8_0x16"): its dtype
 * and layout (LT_LAYOUT_PLAIN where the key names none). LT_EINVAL if the
 * field is no weight's. */
int lt_shape_parse_weight(const char *key, lt_dtype *t, lt_layout *l);
/* Both at once: the key of call. */
size_t lt_call_key(lt_kernel_id id, const lt_call *call, char *buf, size_t n);
#define LT_KEY_MAX 96 /* bytes a key fits in, NUL included */

#ifdef __cplusplus
}
#endif
#endif
