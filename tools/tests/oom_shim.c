/*
 * oom_shim.c - allocation failures on demand for the command-line tool (mixprec_oom, a build of
 * tools/mixprec.c linked with this file and -Wl,--wrap for the allocators: every allocation of
 * the tool, of the safetensors reader / writer, of jansson (which allocates through the reader's
 * functions) and of the library goes through here). tools/tests/cli_oom_test.sh drives it.
 *
 *   MXP_OOM_AT=K      allocation K (counted from 0) fails, and with MXP_OOM_ONLY=1 that one
 *                     alone, else every later one too (a process that ran out of memory)
 *   MXP_OOM_REPORT=F  at exit, write the number of allocations made to file F
 *
 * Worker threads allocate too (the tool's conversions run on several), so the counter is atomic;
 * with one thread (--threads 1) the order of allocations, and so K, is the same in every run.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OOM_WRAP_DECLS_ONLY /* the __real_ / __wrap_ declarations only */
#include "oom_wrap.h"

static atomic_long count;
static long fail_at = -2; /* -2: not read yet, -1: no failure */
static int only;

static void report(void)
{
    const char *f = getenv("MXP_OOM_REPORT");
    if (!f) return;
    FILE *o = fopen(f, "w");
    if (!o) return;
    fprintf(o, "%ld\n", atomic_load(&count));
    fclose(o);
}

static int refuse(void)
{
    if (fail_at == -2) { /* the first allocation comes before any thread is started */
        const char *at = getenv("MXP_OOM_AT"), *o = getenv("MXP_OOM_ONLY");
        fail_at = at && *at ? strtol(at, NULL, 10) : -1;
        only = o && *o == '1';
        atexit(report);
    }
    const long k = atomic_fetch_add(&count, 1);
    return fail_at >= 0 && (k == fail_at || (!only && k > fail_at));
}

void *__wrap_malloc(size_t n) { return refuse() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return refuse() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return refuse() ? NULL : __real_realloc(p, n); }
void *__wrap_aligned_alloc(size_t align, size_t n) { return refuse() ? NULL : __real_aligned_alloc(align, n); }
int __wrap_posix_memalign(void **p, size_t align, size_t n)
{
    return refuse() ? ENOMEM : __real_posix_memalign(p, align, n);
}
char *__wrap_strdup(const char *s) { return refuse() ? NULL : __real_strdup(s); }
char *__wrap_strndup(const char *s, size_t n) { return refuse() ? NULL : __real_strndup(s, n); }
