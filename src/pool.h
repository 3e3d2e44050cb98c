/*
 * pool.h - the library's persistent worker threads (not installed; see pool.c).
 */
#ifndef MIXPREC_POOL_H
#define MIXPREC_POOL_H

#include <stddef.h>

/* One task of a job: fn(ctx, i) for task index i. */
typedef void (*mxp__task_fn)(void *ctx, size_t i);

/*
 * Run fn(ctx, i) for every i in [0, count), on the calling thread and on up to `helpers` pool
 * workers, and return when all count tasks have finished. The calling thread takes tasks too,
 * so the job completes even when no worker can be started (count tasks, in any order, each
 * exactly once). Thread-safe: concurrent callers share the workers. Never fails.
 */
void mxp__pool_run(mxp__task_fn fn, void *ctx, size_t count, size_t helpers);

/* Workers started so far and alive (tests). */
size_t mxp__pool_workers(void);

#endif /* MIXPREC_POOL_H */
