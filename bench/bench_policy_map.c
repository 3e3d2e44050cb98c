/*
 * bench_policy_map.c - policy-map lookups per second on one thread: 100 regex rules (one per
 * transformer block, each an alternation over the block's sublayers) looked up over 902
 * realistic layer paths (900 matching, 2 falling through to the default), with the lookup
 * cache on (the default) and off (every lookup compares 100 keys and runs 100 regexes).
 *
 * Prints medians of repeated passes (bench_util.h). Target: >= 1,000,000 cached lookups/s.
 *
 * Then building maps (issue 16: set and load must be O(1) amortised per key): a config of
 * 100 000 and of 1 000 000 keys (99 % exact layer paths, 1 % regex rules, canonical policies,
 * as mxp_policy_map_save writes them) loaded from a file with mxp_policy_map_load, median of 3
 * loads each; the time per key must not grow with the size, and 1 000 000 keys must load in
 * seconds. The baseline is a memcpy of the file's bytes (the floor for touching the text once).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "mixprec.h"

#define NRULES 100
#define NSUB 9

static const char *const sublayers[NSUB] = {"attn/q_proj", "attn/k_proj", "attn/v_proj",
                                            "attn/o_proj", "mlp/up_proj", "mlp/down_proj",
                                            "mlp/gate_proj", "input_norm", "post_norm"};

typedef struct run {
    const mxp_policy_map *m;
    char **paths;
    size_t npaths;
    size_t bad;
} run;

static void lookup_all(void *p)
{
    run *r = p;
    for (size_t i = 0; i < r->npaths; i++) {
        mxp_policy out;
        if (mxp_policy_map_get(r->m, r->paths[i], &out) != MXP_OK) r->bad++;
    }
}

/* A config of n keys as save writes it (canonical policies): returns its length, writes path. */
static size_t write_config(const char *path, size_t n)
{
    mxp_policy_map *m = mxp_policy_map_new(NULL);
    mxp_policy a, b;
    mxp_policy_parse("mixed_bfloat16", &a);
    mxp_policy_parse("p=f32,c=f16,o=f32", &b);
    char key[96];
    for (size_t i = 0; i < n; i++) {
        if (i % 100 == 99)
            snprintf(key, sizeof key, "model/block_%zu/(attn/(q|k|v|o)_proj|mlp/.*)", i);
        else
            snprintf(key, sizeof key, "model/layers_%zu/%s", i, sublayers[i % NSUB]);
        if (mxp_policy_map_set(m, key, i % 3 ? &a : &b) != MXP_OK) {
            fprintf(stderr, "set: %s\n", mxp_last_error());
            exit(1);
        }
    }
    size_t len = 0;
    mxp_policy_map_format(m, NULL, 0, &len);
    if (mxp_policy_map_save(m, path) != MXP_OK) {
        fprintf(stderr, "save: %s\n", mxp_last_error());
        exit(1);
    }
    mxp_policy_map_free(m);
    return len;
}

/* CPU time of this process: on a shared machine, wall time also counts other people's jobs. */
static double cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_d(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static void bench_load(void)
{
    static const size_t sizes[] = {100000, 1000000};
    char path[64];
    snprintf(path, sizeof path, "/tmp/mxp_bench_policy_map_%ld.cfg", (long)bu_now_ns() % 100000);
    printf("building maps: mxp_policy_map_load of a config file (99%% exact keys, 1%% regex rules)\n");
    double per_key[2] = {0, 0};
    for (size_t s = 0; s < 2; s++) {
        size_t n = sizes[s], bytes = write_config(path, n);
        double t[3], cpu[3];
        for (int r = 0; r < 3; r++) {
            mxp_policy_map *m = NULL;
            double t0 = bu_now_ns(), c0 = cpu_ns();
            mxp_status st = mxp_policy_map_load(path, &m);
            t[r] = bu_now_ns() - t0;
            cpu[r] = cpu_ns() - c0;
            if (st != MXP_OK || mxp_policy_map_count(m) != n) {
                fprintf(stderr, "load: %s\n", mxp_last_error());
                exit(1);
            }
            mxp_policy_map_free(m);
        }
        qsort(t, 3, sizeof *t, cmp_d);
        qsort(cpu, 3, sizeof *cpu, cmp_d);
        double copy_ns = bu_memcpy_equiv_ns(bytes, bytes);
        per_key[s] = cpu[1] / (double)n;
        printf("  %8zu keys (%5.1f MB): %6.3f s wall, %6.3f s CPU, medians of 3 (%.0f CPU ns per key; memcpy "
               "of the text %.4f s)\n",
               n, (double)bytes / 1e6, t[1] / 1e9, cpu[1] / 1e9, per_key[s], copy_ns / 1e9);
    }
    remove(path);
    printf("  per-key CPU time, 1 000 000 vs 100 000 keys: %.2fx (O(1) amortised: about 1; a quadratic build "
           "would be 10x)\n",
           per_key[1] / per_key[0]);
}

int main(void)
{
    mxp_policy_map *m = mxp_policy_map_new(NULL);
    if (!m) return 1;
    char key[256];
    for (int b = 0; b < NRULES; b++) {
        mxp_policy p;
        mxp_policy_parse(b % 2 ? "p=f32,c=bf16,o=f32" : "mixed_float16", &p);
        snprintf(key, sizeof key,
                 "model/block_%d/(attn/(q|k|v|o)_proj|mlp/(up|down|gate)_proj|(input|post)_norm)", b);
        if (mxp_policy_map_set(m, key, &p) != MXP_OK) {
            fprintf(stderr, "set: %s\n", mxp_last_error());
            return 1;
        }
    }
    size_t npaths = NRULES * NSUB + 2;
    char **paths = malloc(npaths * sizeof *paths);
    if (!paths) return 1;
    size_t k = 0;
    for (int s = 0; s < NSUB; s++)
        for (int b = 0; b < NRULES; b++) {
            char buf[128];
            snprintf(buf, sizeof buf, "model/block_%d/%s", b, sublayers[s]);
            paths[k++] = strdup(buf);
        }
    paths[k++] = strdup("model/embed_tokens");
    paths[k++] = strdup("lm_head");

    run r = {m, paths, npaths, 0};
    lookup_all(&r); /* warm the cache; also checks every lookup succeeds */
    if (r.bad) {
        fprintf(stderr, "%zu lookups failed: %s\n", r.bad, mxp_last_error());
        return 1;
    }
    double cached_ns = bu_time_median(lookup_all, &r);
    mxp_policy_map_set_cache_capacity(m, 0);
    double uncached_ns = bu_time_median(lookup_all, &r);

    double cached = (double)npaths / cached_ns * 1e9, uncached = (double)npaths / uncached_ns * 1e9;
    printf("policy map: %d regex rules, %zu distinct paths, one thread\n", NRULES, npaths);
    printf("  cached   lookups/s: %12.0f  (%.1f ns per lookup)\n", cached, cached_ns / (double)npaths);
    printf("  uncached lookups/s: %12.0f  (%.1f ns per lookup)\n", uncached, uncached_ns / (double)npaths);
    printf("  cache speed-up: %.0fx; target >= 1,000,000 cached lookups/s: %s\n", cached / uncached,
           cached >= 1e6 ? "met" : "NOT met");
    for (size_t i = 0; i < npaths; i++) free(paths[i]);
    free(paths);
    mxp_policy_map_free(m);
    bench_load();
    return r.bad ? 1 : 0;
}
