/*
 * fuzz_safetensors.c - libFuzzer target for the safetensors header reader (tools/safetensors.c),
 * the attack surface of the `mixprec` tool.
 *
 * The input is a whole file. Invariants checked (abort on violation):
 *  - mxst_open_mem never crashes, hangs or over-allocates (ASan / -rss_limit_mb catch those);
 *  - failure: MXP_EFORMAT or MXP_ENOMEM with a non-empty message, output untouched;
 *  - success: the tensors tile the data buffer exactly in offset order, each tensor's bytes
 *    match numel * bits / 8, every tensor is found by name, and every byte reads back equal
 *    to the input (mxst_read);
 *  - strict success implies lax success.
 * Run (clang, -DMIXPREC_FUZZ=ON; the target is built by tools/CMakeLists.txt):
 *   build/tools/fuzz_safetensors -runs=10000000 -rss_limit_mb=256 -timeout=2 -max_len=4096 \
 *       fuzz/corpus/safetensors
 * ASan's default 256 MB quarantine of freed blocks alone passes 256 MB of RSS within a second
 * (jansson frees many small blocks; a single input needs far less), which -rss_limit_mb reports
 * as an out-of-memory on an empty input: so this target asks for a 32 MB quarantine itself
 * (__asan_default_options below; ASAN_OPTIONS still overrides it).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* read by ASan at start-up when it is linked in; an unused function otherwise */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "quarantine_size_mb=32"; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mxst_file *const sentinel = (mxst_file *)(uintptr_t)0x10;
    mxst_file *f = sentinel;
    mxp_status s = mxst_open_mem(data, size, "fuzz", false, &f);
    mxst_file *g = sentinel;
    mxp_status s2 = mxst_open_mem(data, size, "fuzz", true, &g);
    if (s2 == MXP_OK) {
        if (s != MXP_OK) abort();
        mxst_close(g);
    } else if (g != sentinel) {
        abort();
    }
    if (s != MXP_OK) {
        if ((s != MXP_EFORMAT && s != MXP_ENOMEM) || mxst_last_error()[0] == '\0') abort();
        if (f != sentinel) abort();
        return 0;
    }
    uint64_t hlen = mxst_shard_header_len(f, 0), expect = 0;
    unsigned char buf[64];
    for (size_t i = 0; i < mxst_count(f); i++) {
        const mxst_tensor *t = mxst_tensor_at(f, i);
        if (t->begin != expect || t->end - t->begin != t->nbytes) abort();
        uint64_t numel = 1;
        for (size_t d = 0; d < t->ndim; d++) numel *= t->shape[d];
        if (numel != t->numel || t->numel * mxst_dtype_bits(t->dtype) / 8 != t->nbytes) abort();
        if (mxst_find(f, t->name) != t) abort();
        size_t n = t->nbytes < sizeof buf ? (size_t)t->nbytes : sizeof buf;
        if (mxst_read(f, t, t->nbytes - n, buf, n) != MXP_OK) abort();
        if (n && memcmp(buf, data + 8 + hlen + t->end - n, n) != 0) abort();
        expect = t->end;
    }
    if (8 + hlen + expect != size) abort();
    for (size_t i = 0; i < mxst_metadata_count(f); i++) {
        const char *k, *v;
        if (!mxst_metadata_at(f, i, &k, &v) || mxst_metadata_get(f, k) == NULL) abort();
    }
    mxst_close(f);
    return 0;
}
