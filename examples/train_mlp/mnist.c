/*
 * mnist.c - gzipped IDX reader for (Fashion-)MNIST, with every failure reported by file name.
 */
#include "mnist.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* Read exactly n bytes or fail with a message saying what was short. */
static int read_exact(gzFile f, void *dst, size_t n, const char *path, const char *what, char *err,
                      size_t cap)
{
    uint8_t *p = dst;
    while (n > 0) {
        unsigned chunk = n > (1u << 30) ? (1u << 30) : (unsigned)n;
        int got = gzread(f, p, chunk);
        if (got < 0) {
            int zerr = 0;
            const char *msg = gzerror(f, &zerr);
            snprintf(err, cap, "%s: corrupt gzip data while reading %s (zlib: %s)", path, what, msg);
            return -1;
        }
        if (got == 0) {
            snprintf(err, cap, "%s: truncated: file ends inside %s", path, what);
            return -1;
        }
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

static uint32_t be32(const uint8_t b[4])
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

/*
 * Read one IDX file of unsigned bytes with `ndims` dimensions. dims[0] is the item count; for
 * images dims[1..2] must be 28, 28. Returns the malloc'd payload of count * item bytes.
 */
static uint8_t *read_idx(const char *path, uint32_t ndims, size_t *count, char *err, size_t cap)
{
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f) {
        snprintf(err, cap, "%s: cannot open (%s)", path, errno ? strerror(errno) : "out of memory");
        return NULL;
    }
    uint8_t *data = NULL;
    uint8_t head[4 * 4];
    if (read_exact(f, head, 4 * (1 + ndims), path, "the IDX header", err, cap) != 0) goto fail;

    uint32_t magic = be32(head), want = 0x00000800u | ndims;
    if (magic != want) {
        snprintf(err, cap, "%s: bad magic 0x%08x (expected 0x%08x: unsigned bytes, %u dimension%s)",
                 path, (unsigned)magic, (unsigned)want, (unsigned)ndims, ndims == 1 ? "" : "s");
        goto fail;
    }
    size_t n = be32(head + 4), item = 1;
    if (ndims == 3) {
        uint32_t rows = be32(head + 8), cols = be32(head + 12);
        if (rows != MNIST_ROWS || cols != MNIST_COLS) {
            snprintf(err, cap, "%s: images are %ux%u (expected %dx%d)", path, (unsigned)rows,
                     (unsigned)cols, MNIST_ROWS, MNIST_COLS);
            goto fail;
        }
        item = MNIST_PIXELS;
    }
    if (n == 0 || n > 10000000) {
        snprintf(err, cap, "%s: implausible item count %zu", path, n);
        goto fail;
    }
    data = malloc(n * item);
    if (!data) {
        snprintf(err, cap, "%s: out of memory for %zu items", path, n);
        goto fail;
    }
    if (read_exact(f, data, n * item, path, ndims == 3 ? "the pixels" : "the labels", err, cap) != 0)
        goto fail;
    uint8_t extra;
    int more = gzread(f, &extra, 1);
    if (more != 0) {
        snprintf(err, cap, "%s: %s after %zu items (wrong size in the header?)", path,
                 more > 0 ? "unexpected extra bytes" : "corrupt gzip data", n);
        goto fail;
    }
    gzclose(f);
    *count = n;
    return data;
fail:
    free(data);
    gzclose(f);
    return NULL;
}

int mnist_load(const char *dir, const char *prefix, size_t limit, mnist_split *out, char *err,
               size_t cap)
{
    char ipath[4096], lpath[4096];
    snprintf(ipath, sizeof ipath, "%s/%s-images-idx3-ubyte.gz", dir, prefix);
    snprintf(lpath, sizeof lpath, "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
    memset(out, 0, sizeof *out);

    size_t ni = 0, nl = 0;
    uint8_t *images = read_idx(ipath, 3, &ni, err, cap);
    if (!images) return -1;
    uint8_t *labels = read_idx(lpath, 1, &nl, err, cap);
    if (!labels) {
        free(images);
        return -1;
    }
    if (ni != nl) {
        snprintf(err, cap, "%s has %zu images but %s has %zu labels", ipath, ni, lpath, nl);
        goto fail;
    }
    for (size_t i = 0; i < nl; i++) {
        if (labels[i] >= MNIST_CLASSES) {
            snprintf(err, cap, "%s: label %u at index %zu is not a class 0..9", lpath,
                     (unsigned)labels[i], i);
            goto fail;
        }
    }
    out->n = (limit > 0 && limit < ni) ? limit : ni;
    out->images = images;
    out->labels = labels;
    return 0;
fail:
    free(images);
    free(labels);
    return -1;
}

void mnist_free(mnist_split *s)
{
    if (!s) return;
    free(s->images);
    free(s->labels);
    memset(s, 0, sizeof *s);
}
