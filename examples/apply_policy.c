/*
 * apply_policy.c - Axon's MixedPrecision example in C: apply a mixed-precision policy to every
 * layer of a model except batch normalisation, then ask the policy map what each layer gets.
 *
 *   Axon (Elixir)                                   mixprec (C)
 *   Axon.dense(128, activation: :relu)              {"dense_0", "dense"}
 *   Axon.batch_norm()                               {"batch_norm_0", "batch_norm"}
 *   ...                                             ...
 *   create_policy(params: {:f, 32},                 mxp_policy_parse("p={:f, 32},c={:f, 16},o={:f, 32}")
 *                 compute: {:f, 16}, output: {:f, 32})
 *   apply_policy(model, policy, except: [:batch_norm])  mxp_policy_map_apply(..., &except_bn, ...)
 *
 * Batch norm stays on the default policy (all float32): its statistics need the range.
 * Build: part of the examples (make / cmake); run: ./apply_policy
 */
#include <stdio.h>

#include "mixprec.h"

int main(void)
{
    /* The docs model: input 784 -> dense 128 relu -> batch_norm -> dropout -> dense 64 relu
     * -> batch_norm -> dropout -> dense 10 softmax. Paths are the layers' names; ops their kinds. */
    static const mxp_layer model[] = {
        {"dense_0", "dense"},           /* 784 -> 128, relu */
        {"batch_norm_0", "batch_norm"}, /* 128 */
        {"dropout_0", "dropout"},       /* rate 0.5 */
        {"dense_1", "dense"},           /* 128 -> 64, relu */
        {"batch_norm_1", "batch_norm"}, /* 64 */
        {"dropout_1", "dropout"},       /* rate 0.5 */
        {"dense_2", "dense"},           /* 64 -> 10, softmax */
    };
    const size_t nlayers = sizeof model / sizeof model[0];

    mxp_policy policy;
    if (mxp_policy_parse("p={:f, 32},c={:f, 16},o={:f, 32}", &policy) != MXP_OK) {
        fprintf(stderr, "policy: %s\n", mxp_last_error());
        return 1;
    }

    /* NULL default: layers the map does not name follow the global default (all float32). */
    mxp_policy_map *map = mxp_policy_map_new(NULL);
    if (!map) {
        fprintf(stderr, "policy map: %s\n", mxp_last_error());
        return 1;
    }
    static const char *const except[] = {"batch_norm"};
    const mxp_layer_select except_bn = {.except = except, .n_except = 1};
    size_t applied = 0;
    mxp_status s = mxp_policy_map_apply(map, model, nlayers, &policy, &except_bn, &applied);
    if (s != MXP_OK) {
        fprintf(stderr, "apply_policy: %s: %s\n", mxp_status_name(s), mxp_last_error());
        mxp_policy_map_free(map);
        return 1;
    }
    printf("applied p=f32,c=f16,o=f32 to %zu of %zu layers (except: batch_norm)\n\n", applied, nlayers);

    for (size_t i = 0; i < nlayers; i++) {
        mxp_policy p;
        const char *key = NULL;
        s = mxp_policy_map_match(map, model[i].path, &p, &key);
        if (s != MXP_OK) {
            fprintf(stderr, "%s: %s\n", model[i].path, mxp_last_error());
            mxp_policy_map_free(map);
            return 1;
        }
        char text[64];
        mxp_policy_format(&p, text, sizeof text);
        printf("%-13s %-11s %s%s\n", model[i].path, model[i].op, text, key ? "" : "  (default)");
    }

    /* The map as a text config, ready for mxp_policy_map_load. */
    char config[1024];
    size_t len = 0;
    mxp_policy_map_format(map, config, sizeof config, &len);
    printf("\nconfig (%zu bytes):\n%s", len, config);
    mxp_policy_map_free(map);
    return 0;
}
