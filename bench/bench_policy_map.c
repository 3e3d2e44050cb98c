/*
 * bench_policy_map.c - policy-map lookups per second on one thread: 100 regex rules (one per
 * transformer block, each an alternation over the block's sublayers) looked up over 902
 * realistic layer paths (900 matching, 2 falling through to the default), with the lookup
 * cache on (the default) and off (every lookup compares 100 keys and runs 100 regexes).
 *
 * Prints medians of repeated passes (bench_util.h). Target: >= 1,000,000 cached lookups/s.
 */
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
    return r.bad ? 1 : 0;
}
