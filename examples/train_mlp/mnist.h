/*
 * mnist.h - read an MNIST-style data set (Fashion-MNIST here) from its four gzipped IDX files.
 *
 * IDX is a tiny big-endian format: a 4-byte magic (0x00000803 = unsigned bytes, 3 dimensions;
 * 0x00000801 = 1 dimension), one 4-byte size per dimension, then the bytes. We read it with zlib
 * and check everything: the magic, 28x28 images, labels in 0..9, matching counts, and that the
 * file is neither truncated nor followed by extra bytes.
 */
#ifndef TRAIN_MLP_MNIST_H
#define TRAIN_MLP_MNIST_H

#include <stddef.h>
#include <stdint.h>

#define MNIST_ROWS 28
#define MNIST_COLS 28
#define MNIST_PIXELS (MNIST_ROWS * MNIST_COLS) /* 784 */
#define MNIST_CLASSES 10

typedef struct mnist_split {
    size_t n;        /* number of examples */
    uint8_t *images; /* [n, 784] pixels 0..255, row-major */
    uint8_t *labels; /* [n] classes 0..9 */
} mnist_split;

/*
 * Load DIR/<prefix>-images-idx3-ubyte.gz and DIR/<prefix>-labels-idx1-ubyte.gz (prefix "train"
 * or "t10k"). On failure returns -1, leaves *out empty and writes a message naming the file into
 * err (cap bytes). limit > 0 keeps only the first `limit` examples.
 */
int mnist_load(const char *dir, const char *prefix, size_t limit, mnist_split *out, char *err,
               size_t cap);

void mnist_free(mnist_split *s);

#endif /* TRAIN_MLP_MNIST_H */
