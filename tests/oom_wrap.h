/*
 * oom_wrap.h - allocation failures on demand for the out-of-memory tests (tests/test_oom.c,
 * tools/tests/test_safetensors_oom.c). Include it once, in a program linked with
 *   -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=aligned_alloc,--wrap=posix_memalign,
 *   --wrap=free,--wrap=strdup,--wrap=strndup
 * so that every such call in the objects it links (the static libraries' included) comes here.
 * While oom.armed, allocation oom.fail_at (counted from 0 since arming) fails, and with oom.rest
 * every later one too; oom.live counts the blocks handed out and not freed, armed or not.
 * Only the thread running the scenarios may allocate while armed: the counters are plain.
 * oom_run() runs one scenario once and fails the test (cmocka, included first) if it leaked or
 * freed a block that was not its own.
 */
#ifndef MIXPREC_OOM_WRAP_H
#define MIXPREC_OOM_WRAP_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mixprec.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);
void __real_free(void *p);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);
int __wrap_posix_memalign(void **p, size_t align, size_t n);
void __wrap_free(void *p);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

#ifndef OOM_WRAP_DECLS_ONLY /* tools/tests/oom_shim.c has its own wrappers, for a whole process */
static struct {
    int armed;    /* count and inject */
    long count;   /* allocations since arming */
    long fail_at; /* first allocation to fail (-1: none) */
    int rest;     /* fail every allocation from fail_at on, not only that one */
    long failed;  /* allocations refused since arming */
    long live;    /* blocks handed out and not yet freed */
} oom = {0, 0, -1, 0, 0, 0};

static int oom_refuse(void)
{
    if (!oom.armed) return 0;
    const long k = oom.count++;
    const int no = oom.fail_at >= 0 && (k == oom.fail_at || (oom.rest && k > oom.fail_at));
    oom.failed += no;
    return no;
}

static void *oom_got(void *p)
{
    oom.live += p != NULL;
    return p;
}

void *__wrap_malloc(size_t n) { return oom_refuse() ? NULL : oom_got(__real_malloc(n)); }
void *__wrap_calloc(size_t n, size_t size) { return oom_refuse() ? NULL : oom_got(__real_calloc(n, size)); }
void *__wrap_aligned_alloc(size_t align, size_t n)
{
    return oom_refuse() ? NULL : oom_got(__real_aligned_alloc(align, n));
}
char *__wrap_strdup(const char *s) { return oom_refuse() ? NULL : oom_got(__real_strdup(s)); }
char *__wrap_strndup(const char *s, size_t n) { return oom_refuse() ? NULL : oom_got(__real_strndup(s, n)); }

void *__wrap_realloc(void *p, size_t n)
{
    if (oom_refuse()) return NULL; /* p stays valid, as after a real failure */
    void *q = __real_realloc(p, n);
    oom.live += q != NULL && p == NULL;
    return q;
}

int __wrap_posix_memalign(void **p, size_t align, size_t n)
{
    if (oom_refuse()) return ENOMEM;
    const int r = __real_posix_memalign(p, align, n);
    oom.live += r == 0;
    return r;
}

void __wrap_free(void *p)
{
    oom.live -= p != NULL;
    __real_free(p);
}

/* Run fn(ctx) once with allocation fail_at failing (-1: none), alone or with every later one
 * (rest); *st is its status. Fails the test when the run did not end with the blocks it started
 * with. Returns the number of allocations the run made. */
static long oom_run(const char *name, mxp_status (*fn)(void *), void *ctx, long fail_at, int rest, mxp_status *st)
{
    const long live0 = oom.live;
    oom.count = 0;
    oom.failed = 0;
    oom.fail_at = fail_at;
    oom.rest = rest;
    oom.armed = 1;
    *st = fn(ctx);
    oom.armed = 0;
    if (oom.live != live0)
        fail_msg("%s: allocation %ld failing (%s): %ld block(s) %s", name, fail_at,
                 rest ? "and every later one" : "alone", labs(oom.live - live0),
                 oom.live > live0 ? "leaked" : "freed twice or not ours");
    return oom.count;
}

#endif /* OOM_WRAP_DECLS_ONLY */
#endif /* MIXPREC_OOM_WRAP_H */
