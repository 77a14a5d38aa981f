/* looptune core: status codes, logging, aligned allocation, CPU features and
 * host fingerprint, clocks, f16/bf16 conversion, dtypes and tensors, the
 * persistent thread pool, and host memory-bandwidth measurement. */
#ifndef LOOPTUNE_CORE_H
#define LOOPTUNE_CORE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status codes ------------------------------------------------------ */

/* X(name, value, message): one list, expanded into the enum and lt_strerror. */
#define LT_STATUS_MAP(X)                                                       \
    X(OK, 0, "success")                                                        \
    X(EINVAL, -1, "invalid argument")                                          \
    X(ENOMEM, -2, "out of memory")                                             \
    X(EIO, -3, "input/output error")                                           \
    X(EFORMAT, -4, "malformed file or message")                                \
    X(ERANGE, -5, "value out of range")                                        \
    X(EUNSUPPORTED, -6, "unsupported")                                         \
    X(ENOTFOUND, -7, "not found")                                              \
    X(ECONFIG, -8, "configuration outside the parameter space")                \
    X(ESTATE, -9, "operation not valid in this state")                         \
    X(EKAFKA, -10, "kafka error")                                              \
    X(ETIMEOUT, -11, "timed out")

typedef enum {
#define LT__STATUS_ENUM(name, value, msg) LT_##name = value,
    LT_STATUS_MAP(LT__STATUS_ENUM)
#undef LT__STATUS_ENUM
} lt_status;

/* Static message for a status code; "unknown status" for anything else. */
const char *lt_strerror(int status);

/* Records a detail message for the calling thread (printf-style) and returns
 * status, so failures read `return lt_error(LT_EFORMAT, "%s: bad magic", p);`.
 * The buffer is thread-local and overwritten by the next lt_error call. */
int lt_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The calling thread's last detail message ("" if none). Valid until the
 * next lt_error on this thread. */
const char *lt_errmsg(void);

/* Broken invariants (not failures from the world): print file:line and abort.
 * Never compiled out. */
#define LT_ASSERT(cond)                                                        \
    do {                                                                       \
        if (!(cond)) lt__assert_fail(__FILE__, __LINE__, #cond);               \
    } while (0)
_Noreturn void lt__assert_fail(const char *file, int line, const char *expr);

/* ---- logging (stderr) -------------------------------------------------- */

typedef enum { LT_LOG_ERROR, LT_LOG_WARN, LT_LOG_INFO, LT_LOG_DEBUG } lt_log_level;
void lt_log_set_level(lt_log_level level);
void lt_log(lt_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- memory ------------------------------------------------------------ */

#define LT_CACHE_LINE 64
/* align must be a power of two >= sizeof(void*). Returns NULL on failure.
 * Free with lt_aligned_free (NULL is a no-op). Memory is zeroed. */
void *lt_aligned_alloc(size_t align, size_t size);
void lt_aligned_free(void *p);

/* ---- clocks ------------------------------------------------------------ */

uint64_t lt_now_ns(void); /* CLOCK_MONOTONIC, nanoseconds */
double lt_now_s(void);    /* CLOCK_MONOTONIC, seconds */
/* CLOCK_REALTIME, nanoseconds since the epoch: for times that cross hosts
 * (deadlines, records' times), never for durations */
uint64_t lt_wall_ns(void);

/* ---- the user's cache folder ---------------------------------------------- */

/* Writes the path of FILE in looptune's cache folder into buf:
 * $XDG_CACHE_HOME/looptune/FILE, or ~/.cache/looptune/FILE when
 * XDG_CACHE_HOME is unset or empty. LT_ENOTFOUND if HOME is not set
 * either, LT_ERANGE if the path does not fit in n bytes. The folder itself
 * is not created. */
int lt_cache_path(char *buf, size_t n, const char *file);

/* ---- order statistics of samples ------------------------------------------ */

/* Sorts x[0..n) ascending, in place. */
void lt_sort_f64(double *x, int n);
/* The median of x[0..n) (the mean of the middle two for an even n); n >= 1,
 * x is not modified. */
double lt_median(const double *x, int n);

/* What a benchmark reports of repeated measurements. */
typedef struct {
    double min, median, max;
} lt_summary;

/* min, median (as lt_median) and max of x[0..n); n >= 1, x is not modified. */
lt_summary lt_summarize(const double *x, int n);

/* ---- CPU features and host fingerprint ---------------------------------- */

typedef enum { LT_ISA_PORTABLE = 0, LT_ISA_AVX2, LT_ISA_AVX512, LT_ISA_COUNT } lt_isa;

/* Whether this build has the x86 ISA paths (the *_avx2.c / *_avx512.c files
 * are compiled for x86 alone). Elsewhere (aarch64) lt_isa_detect() is
 * LT_ISA_PORTABLE and every kernel runs its portable path. A dispatch table
 * names an x86 path as LT_X86_ONLY(sym): NULL where there is none, so the
 * lookup falls back to portable; code that calls the x86 paths is inside
 * #if LT_HAVE_X86. */
#if defined(__x86_64__) || defined(__i386__)
#define LT_HAVE_X86 1
#define LT_X86_ONLY(sym) (sym)
#else
#define LT_HAVE_X86 0
#define LT_X86_ONLY(sym) NULL
#endif

/* One iteration of a spin-wait: tells the core this thread waits (x86
 * pause, Arm yield), so a sibling hyperthread or the memory system gets
 * the cycles. */
static inline void lt__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ volatile("yield" ::: "memory");
#endif
}

typedef struct {
    bool avx2, fma, f16c;
    bool avxvnni; /* AVX-VNNI: vpdpbusd on ymm in VEX form, with or without AVX-512 */
    bool avx512f, avx512bw, avx512vl, avx512vnni, avx512bf16;
    char model[128];      /* CPU model name from /proc/cpuinfo or cpuid */
    int logical_cpus;     /* online logical CPUs */
    size_t l1d_bytes, l2_bytes, l3_bytes; /* per-core L1d/L2, shared L3; 0 if unknown */
} lt_cpu_info;

/* Detected once (thread-safe), then cached. */
const lt_cpu_info *lt_cpu(void);
/* Best ISA level the CPU supports: AVX512 needs F+BW+VL+FMA+F16C, AVX2 needs
 * AVX2+FMA+F16C. */
lt_isa lt_isa_detect(void);
/* The ISA kernels dispatch on: detected, unless forced lower. Forcing an ISA
 * the CPU lacks is clamped to what it has. Set once at start-up. */
lt_isa lt_isa_active(void);
void lt_isa_force(lt_isa isa);
const char *lt_isa_name(lt_isa isa);
int lt_isa_parse(const char *s, lt_isa *out); /* "portable"|"avx2"|"avx512" */
/* LT_EINVAL naming the value if the environment's LT_ISA_MAX (which caps
 * what lt_cpu() reports, as on a CPU without the higher ISAs) is not an ISA
 * name; LT_OK otherwise. */
int lt_isa_env_check(void);
/* Parses name and forces it: LT_EINVAL naming what the CPU runs if it is
 * unknown or above lt_isa_detect() (a user's --isa is never clamped). */
int lt_isa_select(const char *name);
/* "portable, avx2, ..." up to lt_isa_detect(), into buf (NUL-terminated). */
void lt_isa_list(char *buf, size_t n);
/* Writes back and evicts the cache lines of [p, p + n) from every level of
 * this CPU's caches (x86-64 and arm64; false, doing nothing, elsewhere). The
 * data stay as they are; the next read comes from memory. */
bool lt_cache_evict(const void *p, size_t n);
/* "model|isa flags|cpus|l1d/l2/l3" written into buf (always NUL-terminated).
 * Returns the length it wanted. */
size_t lt_host_fingerprint(char *buf, size_t n);

/* ---- f16 / bf16 ---------------------------------------------------------- */

float lt_f16_to_f32(uint16_t h);
uint16_t lt_f32_to_f16(float f); /* round to nearest even */
float lt_bf16_to_f32(uint16_t h);
uint16_t lt_f32_to_bf16(float f); /* round to nearest even, NaN kept NaN */

/* ---- dtypes -------------------------------------------------------------- */

/* The weight dtypes: float, and ggml's quantisation types in its block
 * layouts (the legacy types in blocks of 32, the K-quants in super-blocks of
 * 256). Activations are always f32. */
typedef enum {
    LT_F32 = 0,
    LT_F16,
    LT_BF16,
    LT_Q8_0,
    LT_Q4_0,
    LT_Q4_1,
    LT_Q5_0,
    LT_Q5_1,
    LT_Q2_K,
    LT_Q3_K,
    LT_Q4_K,
    LT_Q5_K,
    LT_Q6_K,
    LT_DTYPE_COUNT
} lt_dtype;

/* q8_0, llama.cpp's block layout (GGML type 8): value = d * qs[i]. */
#define LT_QK8_0 32
typedef struct {
    uint16_t d;             /* scale, IEEE half */
    int8_t qs[LT_QK8_0];    /* quants */
} lt_block_q8_0;            /* 34 bytes, no padding */

/* The legacy types (ggml types 2, 3, 6, 7): 32 elements a block. In every
 * one of them byte j of qs holds element j in its low nibble and element
 * j + 16 in its high one; qh bit j is the fifth bit of element j. */
#define LT_QK4 32
typedef struct {
    uint16_t d;          /* scale, IEEE half: value = d * (q - 8) */
    uint8_t qs[16];
} lt_block_q4_0;         /* 18 bytes */
typedef struct {
    uint16_t d, m;       /* scale and minimum, halves: value = d * q + m */
    uint8_t qs[16];
} lt_block_q4_1;         /* 20 bytes */
typedef struct {
    uint16_t d;          /* value = d * (q - 16), q of 5 bits */
    uint8_t qh[4];
    uint8_t qs[16];
} lt_block_q5_0;         /* 22 bytes */
typedef struct {
    uint16_t d, m;       /* value = d * q + m, q of 5 bits */
    uint8_t qh[4];
    uint8_t qs[16];
} lt_block_q5_1;         /* 24 bytes */

/* The K-quants (ggml types 10-14): super-blocks of LT_QK_K elements cut in
 * sub-blocks of 16 or 32, each with a 4-8 bit scale (and minimum) that
 * multiplies the super-block's half-precision d (and dmin). The bit packing
 * of each is written out in src/core/quant_k.c. */
#define LT_QK_K 256
typedef struct {
    uint8_t scales[16];  /* per 16: scale (low nibble), minimum (high) */
    uint8_t qs[64];      /* 2-bit quants */
    uint16_t d, dmin;
} lt_block_q2_k;         /* 84 bytes: value = d * sc * q - dmin * m */
typedef struct {
    uint8_t hmask[32];   /* the third bit, set = no -4 offset */
    uint8_t qs[64];      /* low 2 bits */
    uint8_t scales[12];  /* 16 six-bit scales, offset by 32 */
    uint16_t d;
} lt_block_q3_k;         /* 110 bytes: value = d * (sc - 32) * q, q in [-4, 3] */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];  /* 8 six-bit scales and 8 six-bit minimums */
    uint8_t qs[128];     /* 4-bit quants */
} lt_block_q4_k;         /* 144 bytes: value = d * sc * q - dmin * m, per 32 */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[32];      /* fifth bits */
    uint8_t qs[128];
} lt_block_q5_k;         /* 176 bytes */
typedef struct {
    uint8_t ql[128];     /* low 4 bits */
    uint8_t qh[64];      /* high 2 bits */
    int8_t scales[16];   /* per 16 */
    uint16_t d;
} lt_block_q6_k;         /* 210 bytes: value = d * sc * (q - 32) */

/* "f32" "f16" "bf16" "q8_0" "q4_0" "q4_1" "q5_0" "q5_1" "q2_k" ... "q6_k" */
const char *lt_dtype_name(lt_dtype t);
/* Any of those names, in either case ("Q4_K" too). LT_EINVAL on unknown. */
int lt_dtype_parse(const char *s, lt_dtype *out);
int64_t lt_dtype_block(lt_dtype t);                /* elements per block: 1, 32 or 256 */
size_t lt_dtype_block_bytes(lt_dtype t);           /* bytes per block: 4, 2, 2, 34, 18, ... */
/* Whether t is one of ggml's quantised types (q8_0 and every later one). */
static inline bool lt_dtype_is_quant(lt_dtype t) { return t >= LT_Q8_0; }
/* Bytes of a row of n elements; n must be a multiple of lt_dtype_block. */
size_t lt_dtype_row_bytes(lt_dtype t, int64_t n);

/* Row conversion (portable, not for hot paths). n multiple of the block.
 * lt_row_to_f32 gives the bits of ggml's dequantisation; lt_row_from_f32
 * quantises by the method of ggml's reference quantisers (legacy types:
 * the absmax or min/max scale; K-quants: their scale search, without an
 * importance matrix). */
void lt_row_to_f32(lt_dtype t, const void *src, float *dst, int64_t n);
void lt_row_from_f32(lt_dtype t, const float *src, void *dst, int64_t n);

/* The unpacked sub-block scales and minimums of a q4_k / q5_k super-block
 * (6 bits each, 8 of each): sc[j], m[j] for sub-block j of 32. Bytes 0-3
 * hold scales 0-3 (6 bits) and the top 2 bits of scales 4-7; bytes 4-7 the
 * same for the minimums; bytes 8-11 the low 4 bits of scale (low nibble)
 * and minimum (high nibble) 4-7. Inline: the integer dots take it per
 * super-block. */
static inline void lt_qk_scale_min(const uint8_t s[12], uint8_t sc[8], uint8_t m[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 63;
        m[j] = s[j + 4] & 63;
        sc[j + 4] = (uint8_t)((s[j + 8] & 0x0f) | (s[j] >> 6) << 4);
        m[j + 4] = (uint8_t)((s[j + 8] >> 4) | (s[j + 4] >> 6) << 4);
    }
}
/* The 16 signed scales (6 bits less 32, in [-32, 31]) of a q3_k super-block. */
void lt_q3k_scales(const uint8_t scales[12], int8_t sc[16]);

/* ---- q8_0 split layout ---------------------------------------------------
 * The same quants and scales as q8_0, in the same bytes per row, laid out
 * for the vector dot: a row of nb blocks is cut into groups of
 * LT_Q8_SPLIT_GROUP blocks (the last one holds the nb % 32 left, if any),
 * and a group of n blocks is its n x 32 quants followed by its n f16
 * scales. A full group is 1088 bytes, 17 cache lines, so when a row starts
 * on a line every group's quants do, and every pair of blocks is one line
 * that one 64-byte load reads, where plain 34-byte blocks straddle lines
 * and their scales need a gather. */
#define LT_Q8_SPLIT_GROUP 32

/* Block b's quants and scale in a split row of nb blocks. */
static inline const int8_t *lt_q8s_qs(const void *row, int64_t nb, int64_t b) {
    (void)nb;
    const int64_t g = b / LT_Q8_SPLIT_GROUP;
    return (const int8_t *)row + (size_t)g * LT_Q8_SPLIT_GROUP * sizeof(lt_block_q8_0) +
           (size_t)(b % LT_Q8_SPLIT_GROUP) * LT_QK8_0;
}
static inline const uint16_t *lt_q8s_scales(const void *row, int64_t nb, int64_t b) {
    const int64_t g = b / LT_Q8_SPLIT_GROUP, g0 = g * LT_Q8_SPLIT_GROUP;
    const int64_t n = nb - g0 < LT_Q8_SPLIT_GROUP ? nb - g0 : LT_Q8_SPLIT_GROUP;
    return (const uint16_t *)((const char *)row + (size_t)g0 * sizeof(lt_block_q8_0) +
                              (size_t)n * LT_QK8_0) + (b - g0);
}
/* A q8_0 row of nb blocks rewritten split (dst must not overlap src). */
void lt_q8_0_split_row(const lt_block_q8_0 *src, void *dst, int64_t nb);

/* ---- interleaved layout (q8_0, q4_0 .. q5_1, q4_k, q6_k) ----------------
 * Rows in groups of LT_X16_ROWS, four bytes of each row side by side: a
 * 32-bit lane is then one row, so one vector instruction takes four
 * elements of 16 rows (or 8) against the same four x, a block's dot ends in
 * one int32 per row, and its scales multiply 16 rows at once. A group takes
 * exactly the bytes of its 16 plain rows: row r is lane r % 16 of the group
 * at data + r / 16 * 16 * nb[1], nb[1] the plain row's bytes.
 *   q4_0, rows of nb blocks: nb x 256 bytes of quants, then nb x 16 f16
 *     scales (block b's, row i at b * 16 + i). Block b's quants are four
 *     64-byte pieces; piece j holds bytes 4j .. 4j + 3 of each row's 16
 *     quant bytes, row i's at 4i (elements 4j .. 4j + 3 in the low nibbles,
 *     4j + 16 .. 4j + 19 in the high ones).
 *   q8_0, as q4_0: nb x 512 bytes of quants, then nb x 16 f16 scales. Block
 *     b's quants are eight 64-byte pieces; piece j holds elements 4j .. 4j
 *     + 3 of each row, row i's at 4i.
 *   q4_1, q5_0, q5_1, block after block (320, 352, 384 bytes): four
 *     pieces of quants as q4_0's, q5_0's and q5_1's piece of the fifth bits
 *     (row i's 32 bits at 4i: byte k holds element 4j + k's bit at bit j
 *     and element 16 + 4j + k's at bit 4 + j, j, k < 4), the 16 rows' d
 *     (f16), q4_1's and q5_1's 16 minimums m (f16).
 *   q4_k, super-block after super-block, 2304 bytes each: the 16 rows' d
 *     (f16), their dmin, three 64-byte pieces of their 12 scale bytes (piece
 *     k: bytes 4k .. 4k + 3, row i's at 4i), then 32 pieces of quants: piece
 *     8c + p holds bytes 32c + 4p .. 32c + 4p + 3 of each row's 128 (the low
 *     nibbles elements 64c + 4p .., the high ones 64c + 32 + 4p ..).
 *   q6_k, super-block after super-block, 3360 bytes each: four pieces of
 *     the 16 rows' scales (piece k: scales 4k .. 4k + 3), 32 pieces of ql
 *     (piece j: ql bytes 4j .. 4j + 3), 16 of qh (likewise), then the 16
 *     rows' d (f16). */
#define LT_X16_ROWS 16
/* Whether t has an interleaved layout. */
static inline bool lt_x16_has(lt_dtype t) {
    return t == LT_Q8_0 || t == LT_Q4_0 || t == LT_Q4_1 || t == LT_Q5_0 || t == LT_Q5_1 || t == LT_Q4_K ||
           t == LT_Q6_K;
}
/* nrows (1 .. 16) plain rows of t (lt_x16_has) of nb blocks, stride bytes
 * apart, written as one group (rows past nrows are zeros) at group (no
 * overlap). */
void lt_x16_pack(lt_dtype t, const void *src, size_t stride, int nrows, int64_t nb, void *group);
/* Row i's block b of a group of rows of nb blocks of t, as a plain block. */
void lt_x16_block(lt_dtype t, const void *group, int64_t nb, int i, int64_t b, void *out);

/* ---- tensors ------------------------------------------------------------- */

typedef enum {
    LT_LAYOUT_PLAIN = 0, /* the dtype's own blocks, one after the other */
    LT_LAYOUT_Q8_SPLIT,  /* q8_0 rows in the split layout above */
    LT_LAYOUT_X16,       /* q8_0, q4_0 .. q5_1, q4_k or q6_k rows interleaved by 16 (above) */
} lt_layout;

/* A transparent descriptor. ne[0] is the innermost (contiguous) dimension,
 * as in ggml: a weight matrix of `rows` outputs over `cols` inputs has
 * ne = {cols, rows, 1, 1}. nb[i] is the stride of dimension i in bytes
 * (nb[0] = block bytes). The tensor does not own data. */
typedef struct {
    lt_dtype dtype;
    int64_t ne[4];
    size_t nb[4];
    void *data;
    lt_layout layout; /* zero (plain) unless the weights were repacked */
} lt_tensor;

/* Fills ne and contiguous nb for the given shape (unused dims = 1). */
void lt_tensor_init(lt_tensor *t, lt_dtype dtype, int64_t ne0, int64_t ne1, int64_t ne2,
                    int64_t ne3, void *data);
int64_t lt_tensor_nelements(const lt_tensor *t);
size_t lt_tensor_nbytes(const lt_tensor *t); /* contiguous size: the bytes of its data */
/* Bytes from data to the end of the last element under the strides: the
 * extent of memory t covers, padding between rows included. */
size_t lt_tensor_span(const lt_tensor *t);
/* Pointer to row i1 (dims 2,3 zero). */
static inline void *lt_tensor_row(const lt_tensor *t, int64_t i1) {
    return (char *)t->data + (size_t)i1 * t->nb[1];
}

/* ---- thread pool --------------------------------------------------------- */

/* A persistent pool of nthreads-1 workers plus the caller. Workers spin
 * briefly waiting for work, then sleep. lt_pool_run wakes them, runs
 * fn(arg, ith, nth) on every thread (the caller is ith 0) and returns once
 * all have returned. Not reentrant: one lt_pool_run at a time. */
typedef struct lt_pool lt_pool;
typedef void (*lt_pool_fn)(void *arg, int ith, int nth);

int lt_pool_init(lt_pool **out, int nthreads); /* nthreads >= 1 */
void lt_pool_free(lt_pool *pool);              /* NULL is a no-op; joins workers */
int lt_pool_size(const lt_pool *pool);
void lt_pool_run(lt_pool *pool, lt_pool_fn fn, void *arg);
/* The same on the first nth threads only (ith 0..nth-1, fn sees nth; the
 * other workers stay asleep when nth is 1). nth <= 0 or above the pool's
 * size means all of them. */
void lt_pool_run_n(lt_pool *pool, int nth, lt_pool_fn fn, void *arg);
/* All threads of the current lt_pool_run meet here (a sense-reversing spin
 * barrier with acquire/release ordering: writes before the barrier are
 * visible after it). Call only from inside fn, from every thread. */
void lt_pool_barrier(lt_pool *pool);

/* ---- host memory bandwidth ------------------------------------------------ */

typedef struct {
    double triad_gb_s; /* STREAM triad a[i] = b[i] + s*c[i], counted as 3 arrays moved */
    double read_gb_s;  /* read-only: vector loads summed (decode's access pattern) */
} lt_membw;

/* Measures both on arrays of bytes_per_array each (far larger than the LLC;
 * 0 = default 256 MiB), split over the pool's threads, best of reps runs. */
int lt_membw_measure(lt_pool *pool, size_t bytes_per_array, int reps, lt_membw *out);

#ifdef __cplusplus
}
#endif
#endif
