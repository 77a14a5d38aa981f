/* CPU feature detection (cpuid + xgetbv on x86; elsewhere no ISA beyond the
 * portable one, and the model name from /proc/cpuinfo), the active ISA, and
 * the host fingerprint used to key measurements and tuned configurations. */
#include "looptune/core.h"

#if LT_HAVE_X86
#include <cpuid.h>
#endif
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static lt_cpu_info lt__cpu;
static pthread_once_t lt__cpu_once = PTHREAD_ONCE_INIT;
static _Atomic int lt__isa_forced = -1;

static size_t read_cache_size(int index) {
    char path[128], buf[64];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t v = 0;
    if (fgets(buf, sizeof buf, f)) {
        char unit = 0;
        if (sscanf(buf, "%zu%c", &v, &unit) >= 1) {
            if (unit == 'K') v <<= 10;
            else if (unit == 'M') v <<= 20;
        }
    }
    fclose(f);
    return v;
}

static int read_cache_level(int index, char *type, size_t ntype) {
    char path[128];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", index);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int level = -1;
    if (fscanf(f, "%d", &level) != 1) level = -1;
    fclose(f);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", index);
    f = fopen(path, "r");
    type[0] = 0;
    if (f) {
        if (!fgets(type, (int)ntype, f)) type[0] = 0;
        fclose(f);
    }
    return level;
}

#if LT_HAVE_X86
/* The ISA flags and the brand string (cpuid leaves 0x80000002..4). */
static void detect_isa(lt_cpu_info *c) {
    unsigned a, b, cx, d;
    bool os_avx = false, os_avx512 = false;
    if (__get_cpuid(1, &a, &b, &cx, &d)) {
        c->fma = (cx >> 12) & 1;
        c->f16c = (cx >> 29) & 1;
        if ((cx >> 27) & 1) { /* OSXSAVE: the OS saves which register states? */
            unsigned lo, hi;
            __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
            os_avx = (lo & 0x6) == 0x6;
            os_avx512 = os_avx && (lo & 0xe0) == 0xe0;
        }
    }
    if (__get_cpuid_count(7, 0, &a, &b, &cx, &d)) {
        c->avx2 = os_avx && ((b >> 5) & 1);
        c->avx512f = os_avx512 && ((b >> 16) & 1);
        c->avx512bw = os_avx512 && ((b >> 30) & 1);
        c->avx512vl = os_avx512 && ((b >> 31) & 1);
        c->avx512vnni = os_avx512 && ((cx >> 11) & 1);
    }
    if (__get_cpuid_count(7, 1, &a, &b, &cx, &d)) {
        c->avxvnni = os_avx && ((a >> 4) & 1);
        c->avx512bf16 = os_avx512 && ((a >> 5) & 1);
    }
    if (!os_avx) c->fma = c->f16c = c->avxvnni = false;

    /* model name: brand string leaves 0x80000002..4 */
    unsigned brand[12] = {0};
    if (__get_cpuid(0x80000000, &a, &b, &cx, &d) && a >= 0x80000004) {
        for (unsigned i = 0; i < 3; i++)
            __get_cpuid(0x80000002 + i, &brand[4 * i], &brand[4 * i + 1], &brand[4 * i + 2],
                        &brand[4 * i + 3]);
        memcpy(c->model, brand, 48);
        c->model[48] = 0;
    }
}
#else
/* The value of the first "key : value" line of /proc/cpuinfo whose key is
 * key, into out (trimmed); false if there is none. */
static bool cpuinfo_field(const char *key, char *out, size_t n) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return false;
    char line[256];
    bool found = false;
    const size_t klen = strlen(key);
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) != 0 || (line[klen] != ' ' && line[klen] != '\t' &&
                                               line[klen] != ':'))
            continue;
        const char *v = strchr(line + klen, ':');
        if (!v) continue;
        for (v++; *v == ' ' || *v == '\t'; v++) {}
        snprintf(out, n, "%s", v);
        for (size_t k = strlen(out); k > 0 && isspace((unsigned char)out[k - 1]); k--)
            out[k - 1] = 0;
        found = out[0] != 0;
    }
    fclose(f);
    return found;
}

/* No ISA flags: only the portable kernels are compiled. The model name is
 * /proc/cpuinfo's "model name" where the kernel gives one, else the Arm
 * implementer and part numbers, else "unknown". */
static void detect_isa(lt_cpu_info *c) {
    char impl[32], part[32];
    if (cpuinfo_field("model name", c->model, sizeof c->model)) return;
    if (cpuinfo_field("CPU implementer", impl, sizeof impl) &&
        cpuinfo_field("CPU part", part, sizeof part))
        snprintf(c->model, sizeof c->model, "arm implementer %s part %s", impl, part);
}
#endif

/* LT_ISA_MAX=portable|avx2 makes the CPU look as if it had nothing above
 * that level: a machine of a fleet's smaller kind, for tests and
 * measurements on a larger one. An unknown value is kept for
 * lt_isa_env_check to report. */
static const char *lt__isa_max_bad;

static void cap_isa(lt_cpu_info *c) {
    const char *v = getenv("LT_ISA_MAX");
    lt_isa cap = LT_ISA_AVX512;
    if (!v || !*v) return;
    if (lt_isa_parse(v, &cap) != LT_OK) {
        lt__isa_max_bad = v;
        return;
    }
    if (cap < LT_ISA_AVX512)
        c->avx512f = c->avx512bw = c->avx512vl = c->avx512vnni = c->avx512bf16 = false;
    /* AVX-VNNI stays under an AVX2 cap: many AVX2-only CPUs have it */
    if (cap < LT_ISA_AVX2) c->avx2 = c->fma = c->f16c = c->avxvnni = false;
}

int lt_isa_env_check(void) {
    (void)lt_cpu();
    if (lt__isa_max_bad)
        return lt_error(LT_EINVAL, "LT_ISA_MAX='%s': expected portable, avx2 or avx512",
                        lt__isa_max_bad);
    return LT_OK;
}

static void detect(void) {
    lt_cpu_info *c = &lt__cpu;
    detect_isa(c);
    cap_isa(c);
    /* trim spaces */
    char *s = c->model;
    while (*s == ' ') s++;
    memmove(c->model, s, strlen(s) + 1);
    for (size_t n = strlen(c->model); n > 0 && c->model[n - 1] == ' '; n--) c->model[n - 1] = 0;
    if (!c->model[0]) snprintf(c->model, sizeof c->model, "unknown");

    long n = sysconf(_SC_NPROCESSORS_ONLN);
    c->logical_cpus = n > 0 ? (int)n : 1;
    for (int i = 0; i < 8; i++) {
        char type[32];
        int level = read_cache_level(i, type, sizeof type);
        if (level < 0) break;
        size_t sz = read_cache_size(i);
        if (level == 1 && strncmp(type, "Data", 4) == 0) c->l1d_bytes = sz;
        else if (level == 2) c->l2_bytes = sz;
        else if (level == 3) c->l3_bytes = sz;
    }
}

const lt_cpu_info *lt_cpu(void) {
    pthread_once(&lt__cpu_once, detect);
    return &lt__cpu;
}

lt_isa lt_isa_detect(void) {
    const lt_cpu_info *c = lt_cpu();
    if (c->avx512f && c->avx512bw && c->avx512vl && c->fma && c->f16c) return LT_ISA_AVX512;
    if (c->avx2 && c->fma && c->f16c) return LT_ISA_AVX2;
    return LT_ISA_PORTABLE;
}

lt_isa lt_isa_active(void) {
    lt_isa best = lt_isa_detect();
    int forced = atomic_load(&lt__isa_forced);
    return forced >= 0 && forced < (int)best ? (lt_isa)forced : best;
}

void lt_isa_force(lt_isa isa) { atomic_store(&lt__isa_forced, (int)isa); }

const char *lt_isa_name(lt_isa isa) {
    static const char *const names[] = {
        [LT_ISA_PORTABLE] = "portable", [LT_ISA_AVX2] = "avx2", [LT_ISA_AVX512] = "avx512"};
    _Static_assert(sizeof names / sizeof names[0] == LT_ISA_COUNT, "isa names");
    return (unsigned)isa < LT_ISA_COUNT ? names[isa] : "?";
}

int lt_isa_parse(const char *s, lt_isa *out) {
    for (int i = 0; i < LT_ISA_COUNT; i++) {
        if (strcmp(s, lt_isa_name((lt_isa)i)) == 0) {
            *out = (lt_isa)i;
            return LT_OK;
        }
    }
    return lt_error(LT_EINVAL, "unknown ISA '%s' (expected portable, avx2 or avx512)", s);
}

void lt_isa_list(char *buf, size_t n) {
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i <= (int)lt_isa_detect() && len < n; i++) {
        int w = snprintf(buf + len, n - len, "%s%s", i ? ", " : "", lt_isa_name((lt_isa)i));
        if (w < 0) break;
        len += (size_t)w;
    }
}

int lt_isa_select(const char *name) {
    lt_isa isa = LT_ISA_PORTABLE;
    char has[64];
    lt_isa_list(has, sizeof has);
    if (lt_isa_parse(name, &isa) != LT_OK)
        return lt_error(LT_EINVAL, "unknown ISA '%s' (this CPU runs %s)", name, has);
    if (isa > lt_isa_detect() && !LT_HAVE_X86)
        return lt_error(LT_EINVAL, "ISA '%s' is x86's: this build has the portable kernels alone",
                        name);
    if (isa > lt_isa_detect())
        return lt_error(LT_EINVAL, "ISA '%s' is not available on this CPU (%s runs %s)", name,
                        lt_cpu()->model, has);
    lt_isa_force(isa);
    return LT_OK;
}

size_t lt_host_fingerprint(char *buf, size_t n) {
    const lt_cpu_info *c = lt_cpu();
    int len = snprintf(buf, n, "%s|%s%s%s%s%s%s%s%s%s|cpus=%d|l1d=%zuK,l2=%zuK,l3=%zuK", c->model,
                       c->avx2 ? "avx2," : "", c->fma ? "fma," : "", c->f16c ? "f16c," : "",
                       c->avxvnni ? "avxvnni," : "",
                       c->avx512f ? "avx512f," : "", c->avx512bw ? "avx512bw," : "",
                       c->avx512vl ? "avx512vl," : "", c->avx512vnni ? "avx512vnni," : "",
                       c->avx512bf16 ? "avx512bf16," : "", c->logical_cpus, c->l1d_bytes >> 10,
                       c->l2_bytes >> 10, c->l3_bytes >> 10);
    return len < 0 ? 0 : (size_t)len;
}
