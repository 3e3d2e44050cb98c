/*
 * pool.c - persistent worker threads for mxp_convert_ex (opts->threads > 1).
 *
 * Why: starting and joining a thread per chunk per call cost 25-50 us per call on the
 * development VM, which is why a call had to have 2^23 elements before a second thread paid
 * off. A sleeping worker woken through a condition variable costs a few microseconds instead
 * (convert.c says why the threshold still stands).
 *
 * Shape: one mutex, a FIFO of jobs that still have unclaimed tasks, and workers that sleep on a
 * condition variable until a job arrives. A job lives on its caller's stack: the caller queues
 * it, wakes the workers, claims tasks of its own job like a worker would, then waits until every
 * task it did not run itself has finished (so the job is never touched after its caller
 * returns). Workers are started lazily, up to the largest number of helpers any call asked for
 * (at most MXP__POOL_MAX), and are never started again once the pool shuts down: a caller always
 * completes its job alone if it has to.
 *
 * Lifetime: workers block every signal (a program's handlers never run on them), use 1 MiB
 * stacks, and live until the process exits or the library is unloaded: a destructor stops and
 * joins them (a shared library must not leave threads running its unmapped code). After fork()
 * the child has none of the parent's threads: pthread_atfork handlers keep the pool's lock
 * consistent across fork and reset the child's pool to "no workers", so that its first threaded
 * call starts its own.
 */
#include "pool.h"

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>

enum { MXP__POOL_MAX = 63 }; /* workers at most (mxp_convert_ex uses up to 64 threads) */

typedef struct job {
    mxp__task_fn fn;
    void *ctx;
    size_t count; /* tasks */
    size_t next;  /* next unclaimed task (under the lock) */
    size_t done;  /* finished tasks (under the lock) */
    struct job *link;
} job;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t work; /* workers: a job was queued, or stop */
    pthread_cond_t done; /* callers: a job's last task finished */
    job *head, *tail;    /* jobs with unclaimed tasks */
    size_t workers;
    bool stopping;
    pthread_t tid[MXP__POOL_MAX];
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0, false, {0}};

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void) { pthread_mutex_lock(&pool.mu); }
static void fork_parent(void) { pthread_mutex_unlock(&pool.mu); }
static void fork_child(void)
{
    /* only the forking thread exists here, holding the lock (fork_prepare): no worker, and
     * every queued job belonged to a thread that is gone (the forking thread was not inside
     * mxp__pool_run); the condition variables may remember the parent's waiters */
    pthread_cond_init(&pool.work, NULL);
    pthread_cond_init(&pool.done, NULL);
    pool.head = pool.tail = NULL;
    pool.workers = 0;
    pthread_mutex_unlock(&pool.mu);
}
static void register_atfork(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

/* Claims the next task of j (lock held); removes j from the queue when it has no more. */
static size_t claim(job *j)
{
    const size_t i = j->next++;
    if (j->next == j->count) {
        job **p = &pool.head, *prev = NULL;
        while (*p && *p != j) {
            prev = *p;
            p = &(*p)->link;
        }
        if (*p) {
            *p = j->link;
            if (pool.tail == j) pool.tail = prev;
        }
    }
    return i;
}

/* Runs task i of j (lock held on entry and exit, released while the task runs). */
static void run_task(job *j, size_t i)
{
    pthread_mutex_unlock(&pool.mu);
    j->fn(j->ctx, i);
    pthread_mutex_lock(&pool.mu);
    if (++j->done == j->count) pthread_cond_broadcast(&pool.done);
}

static void *worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&pool.mu);
    for (;;) {
        while (!pool.stopping && !pool.head) pthread_cond_wait(&pool.work, &pool.mu);
        if (pool.stopping) break;
        job *j = pool.head;
        run_task(j, claim(j));
    }
    pthread_mutex_unlock(&pool.mu);
    return NULL;
}

/* Starts workers until there are `want` (lock held); stops at the first failure. */
static void grow(size_t want)
{
    if (want > MXP__POOL_MAX) want = MXP__POOL_MAX;
    if (pool.stopping || pool.workers >= want) return;
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) return;
    /* 8 MiB, the usual main-thread size (reserved, touched only as used): a kernel's frame is
     * small in an optimised build, but an -O0 AddressSanitizer build of the AVX-512 stochastic
     * kernels takes 1.7 MB of stack, which overflowed the 1 MiB this used to be */
    pthread_attr_setstacksize(&attr, (size_t)8 << 20);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the new thread inherits "all blocked" */
    while (pool.workers < want && pthread_create(&pool.tid[pool.workers], &attr, worker, NULL) == 0)
        pool.workers++;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
}

void mxp__pool_run(mxp__task_fn fn, void *ctx, size_t count, size_t helpers)
{
    if (count == 0) return;
    if (count == 1 || helpers == 0) {
        for (size_t i = 0; i < count; i++) fn(ctx, i);
        return;
    }
    pthread_once(&atfork_once, register_atfork);
    job j = {fn, ctx, count, 0, 0, NULL};
    pthread_mutex_lock(&pool.mu);
    grow(helpers);
    if (pool.tail) pool.tail->link = &j;
    else pool.head = &j;
    pool.tail = &j;
    /* wake as many workers as there are tasks for them (not the whole pool for a small job) */
    for (size_t w = 0; w < pool.workers && w + 1 < count; w++) pthread_cond_signal(&pool.work);
    while (j.next < j.count) run_task(&j, claim(&j));
    while (j.done < j.count) pthread_cond_wait(&pool.done, &pool.mu);
    pthread_mutex_unlock(&pool.mu);
}

size_t mxp__pool_workers(void)
{
    pthread_mutex_lock(&pool.mu);
    const size_t n = pool.workers;
    pthread_mutex_unlock(&pool.mu);
    return n;
}

#if defined(__GNUC__) || defined(__clang__)
/* At exit or unload: stop the workers (each finishes the task it runs) and join them. */
__attribute__((destructor)) static void pool_shutdown(void)
{
    pthread_mutex_lock(&pool.mu);
    pool.stopping = true;
    const size_t n = pool.workers;
    pthread_cond_broadcast(&pool.work);
    pthread_mutex_unlock(&pool.mu);
    for (size_t i = 0; i < n; i++) pthread_join(pool.tid[i], NULL);
    pthread_mutex_lock(&pool.mu);
    pool.workers = 0;
    pthread_mutex_unlock(&pool.mu);
}
#endif
