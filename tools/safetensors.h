/*
 * tools/safetensors.h - a streaming, validating reader and an atomic streaming writer for
 * safetensors files and sharded checkpoints (*.safetensors.index.json).
 *
 * This is a small static library (CMake target mixprec_safetensors) used by the `mixprec` tool
 * and by the examples. It is not part of libmixprec: it needs jansson (Debian libjansson-dev)
 * for the JSON header, which the library itself must not depend on.
 *
 * The format (docs/DESIGN.md section 9, docs/cli.md): an 8-byte little-endian header
 * length N (N <= 100 000 000 and N <= file size - 8), N bytes of UTF-8 JSON (one object;
 * blanks before and after it are allowed, nothing else), then the data buffer.
 * Every key of the object except "__metadata__" is a tensor name whose value is an object with
 * exactly the keys "dtype" (one of the 22 names of mxst_dtype), "shape" (an array of
 * non-negative integers; [] is a scalar) and "data_offsets" ([begin, end], non-negative
 * integers, relative to the start of the data buffer). "__metadata__", when present, is an
 * object of string values. Sorted by offsets the tensors cover the data buffer exactly: the
 * first begins at 0, each begins where the previous ended, the last ends at the end of the file,
 * and end - begin = numel * bits(dtype) / 8 (computed with overflow checks; a size that is not a
 * whole number of bytes is an error).
 * Stricter than the reference implementation (huggingface/safetensors): a key repeated at any
 * level of the JSON is an error (the reference keeps the last one); an entry with keys besides
 * dtype/shape/data_offsets is an error (the reference ignores them); a tensor named
 * "__metadata__" cannot exist; a NUL character anywhere in a string is an error.
 *
 * Resource limits: opening a file reads only its header (pread) and allocates at most
 * max(file size, 1 MiB) bytes for the parsed JSON on top of the N header bytes; a header that
 * would need more is refused (MXP_EFORMAT). Tensor data is never read unless asked for, by
 * mxst_read, piece by piece. 64-bit offsets throughout: files larger than 4 GiB work.
 *
 * Errors: every fallible function returns an mxp_status (mixprec/status.h):
 *   MXP_EFORMAT  the file breaks a rule of the format; MXP_EIO  open/read/write/fsync/rename
 *   failed; MXP_ENOMEM  allocation failed; MXP_EINVAL  bad arguments; MXP_EEXIST  the output
 *   exists and overwriting was not asked for; MXP_ENOTFOUND  no such tensor.
 * and records a message, read with mxst_last_error() on the same thread, that names the file,
 * the tensor and the rule, e.g.
 *   "model.safetensors: tensor 'w': data_offsets [0, 12) hold 12 bytes but F32 [2, 2] needs 16
 *    (rule: size)".
 * Thread-safety: distinct objects are independent; a mxst_file may be read (mxst_read, the
 * getters) from several threads at once; a mxst_writer belongs to one thread at a time. The
 * last-error message is per thread.
 */
#ifndef MIXPREC_TOOLS_SAFETENSORS_H
#define MIXPREC_TOOLS_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mixprec/dtype.h"
#include "mixprec/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The 22 dtypes of the reference implementation, in its order (the writer sorts by this
 *  order, descending, then by name). */
typedef enum mxst_dtype {
    MXST_BOOL,
    MXST_F4,
    MXST_F6_E2M3,
    MXST_F6_E3M2,
    MXST_U8,
    MXST_I8,
    MXST_F8_E5M2,
    MXST_F8_E4M3,
    MXST_F8_E8M0,
    MXST_F8_E4M3FNUZ,
    MXST_F8_E5M2FNUZ,
    MXST_I16,
    MXST_U16,
    MXST_F16,
    MXST_BF16,
    MXST_I32,
    MXST_U32,
    MXST_F32,
    MXST_C64,
    MXST_F64,
    MXST_I64,
    MXST_U64
} mxst_dtype;
#define MXST_DTYPE_COUNT 22

/** Largest header length the reader accepts (the reference's limit). */
#define MXST_MAX_HEADER 100000000u

/** The dtype's name as written in files ("F32", "BF16", "F8_E4M3", ...); "?" if invalid. */
const char *mxst_dtype_name(mxst_dtype d);
/** Parse an exact (case-sensitive) safetensors dtype name. Returns false if unknown. */
bool mxst_dtype_parse(const char *name, mxst_dtype *out);
/** Bits per element: 4 (F4), 6 (F6_*), 8, 16, 32 or 64 (C64 and the 64-bit types). */
unsigned mxst_dtype_bits(mxst_dtype d);
/** The mixprec dtype with the same bits, if there is one: F64 F32 F16 BF16 F8_E4M3
 *  (float8_e4m3fn) F8_E5M2 I8 U8 I16 I32 I64 BOOL. Returns false for the others. */
bool mxst_dtype_to_mxp(mxst_dtype d, mxp_dtype *out);
/** The safetensors name of a mixprec dtype (every mxp_dtype has one). */
bool mxst_dtype_from_mxp(mxp_dtype d, mxst_dtype *out);

/** Detail of the last failure of an mxst_ function on this thread ("" if none). */
const char *mxst_last_error(void);

/* ---- reading --------------------------------------------------------------------------- */

/** One tensor of an open file or checkpoint. Owned by the mxst_file; valid until it closes. */
typedef struct mxst_tensor {
    const char *name; /* UTF-8, no NUL inside */
    mxst_dtype dtype;
    size_t ndim;
    const uint64_t *shape; /* ndim dimensions (NULL when ndim == 0: a scalar) */
    uint64_t numel;        /* product of the shape (1 for a scalar) */
    uint64_t nbytes;       /* end - begin */
    uint64_t begin, end;   /* data_offsets, relative to the data buffer of its shard */
    size_t shard;          /* index of the shard file holding it (0 for a single file) */
} mxst_tensor;

typedef struct mxst_file mxst_file;

/**
 * The character at str (UTF-8): its length in bytes (1 to 4), or 0 when the byte at str does not
 * start a valid sequence (stray continuation byte, overlong form, surrogate, beyond U+10FFFF, cut
 * short). *control: it is a control character, C0, DEL or C1 (U+0080..U+009F, which some
 * terminals obey as escapes). Reads up to the NUL. Thread-safety: safe.
 */
size_t mxst_char_at(const char *str, bool *control);

/**
 * A printable copy of str (a name, a metadata string or a message quoting them: untrusted text)
 * in buf: each control character or invalid UTF-8 byte becomes '?', and the text is cut after
 * max bytes of the original with "..." (never inside a UTF-8 character, so the copy stays valid
 * UTF-8). docs/cli.md's rule uses max = 150. buf holds cap bytes; max is lowered to cap - 4 if
 * needed. Returns buf. Thread-safety: safe.
 */
const char *mxst_show(char *buf, size_t cap, const char *str, size_t max);

/** "s" after a count other than 1, for messages and text output: "1 byte", "4 bytes". The one
 *  copy, for the reader's and writer's messages and the mixprec tool's. */
#define MXST_PLURAL(n) ((n) == 1 ? "" : "s")

/**
 * Open and validate a safetensors file, or a sharded checkpoint when the path ends in ".json"
 * (its *.safetensors.index.json: {"metadata": {"total_size": N, ...}, "weight_map":
 * {tensor: shard file name}}; shard names are plain file names in the index's directory).
 * Every rule above is checked before this returns, and for a checkpoint every shard is opened
 * and validated and the cross-file rules hold: every mapped tensor exists in the shard it is
 * mapped to, every tensor of a shard is mapped to that shard (a tensor in two shards is an
 * error), shard names are unique plain names. Strict mode (`strict`) also requires: the data
 * buffer to start at a multiple of 8 bytes (header padded), each tensor's begin to be a
 * multiple of its element size, and metadata.total_size (when present) to equal the sum of the
 * tensors' bytes.
 * Tensors are listed shard by shard, in offset order within a shard.
 * @retval MXP_OK *out is the open file (close with mxst_close)
 * @retval MXP_EFORMAT / MXP_EIO / MXP_ENOMEM / MXP_EINVAL (NULL arguments); *out untouched
 */
mxp_status mxst_open(const char *path, bool strict, mxst_file **out);

/**
 * Validate a whole single file held in memory (size bytes), named `name` in messages. The same
 * rules as mxst_open for one file; mxst_read then copies from `data`, which must outlive the
 * returned object. For tests and the fuzz target.
 */
mxp_status mxst_open_mem(const void *data, size_t size, const char *name, bool strict,
                         mxst_file **out);

/** Close (NULL accepted). */
void mxst_close(mxst_file *f);

/** Number of tensors. */
size_t mxst_count(const mxst_file *f);
/** The i-th tensor (shard order, then offset order), NULL if i >= count. */
const mxst_tensor *mxst_tensor_at(const mxst_file *f, size_t i);
/** The tensor with this exact name, or NULL. */
const mxst_tensor *mxst_find(const mxst_file *f, const char *name);

/** Number of "__metadata__" entries (of the first shard for a checkpoint). */
size_t mxst_metadata_count(const mxst_file *f);
/** The i-th metadata entry, in file order (*key, *value may be NULL). False if i >= count. */
bool mxst_metadata_at(const mxst_file *f, size_t i, const char **key, const char **value);
/** The value of a metadata key, or NULL. */
const char *mxst_metadata_get(const mxst_file *f, const char *key);

/** Number of files: 1, or the shard count of a checkpoint. */
size_t mxst_shard_count(const mxst_file *f);
/** Path of shard i (the file itself for a single file), NULL if out of range. */
const char *mxst_shard_path(const mxst_file *f, size_t i);
/** Header length N of shard i (its data starts at byte 8 + N). */
uint64_t mxst_shard_header_len(const mxst_file *f, size_t i);
/** Size in bytes of shard i. */
uint64_t mxst_shard_size(const mxst_file *f, size_t i);
/** True when the file was opened through an index (a sharded checkpoint). */
bool mxst_is_sharded(const mxst_file *f);
/** The path given to mxst_open. */
const char *mxst_path(const mxst_file *f);

/** (dev, inode) of shard i, to tell whether an output would overwrite an input. */
bool mxst_shard_identity(const mxst_file *f, size_t i, uint64_t *dev, uint64_t *ino);

/**
 * Copy len bytes of tensor t's data, starting `offset` bytes into it, to buf (pread, retried
 * on short reads and EINTR). offset + len must not pass t->nbytes.
 * @retval MXP_OK / MXP_EINVAL (range) / MXP_EIO (read failed or the file shrank)
 * Thread-safety: safe concurrently on one file.
 */
mxp_status mxst_read(const mxst_file *f, const mxst_tensor *t, uint64_t offset, void *buf,
                     size_t len);

/* ---- writing ----------------------------------------------------------------------------- */

/** What the writer needs to know about a tensor before any data. */
typedef struct mxst_spec {
    const char *name;
    mxst_dtype dtype;
    size_t ndim;
    const uint64_t *shape;
} mxst_spec;

typedef struct mxst_writer mxst_writer;

/** Writer flags. */
enum {
    MXST_OVERWRITE = 1, /**< replace an existing output file (default: MXP_EEXIST) */
    MXST_NO_FSYNC = 2   /**< skip fsync (tests of very large files only; not crash-safe) */
};

/**
 * Start writing `path` with these tensors (copied) and metadata (npairs key/value string
 * pairs, copied; "format": "pt" is added when absent, the rest kept in the given order).
 * Tensors are laid out like the reference writer: by dtype order descending (mxst_dtype), then
 * by name (bytes); the header is compact JSON padded with spaces to a multiple of 8.
 * The data goes to a temporary file ".<name>.tmp-XXXXXX" in path's directory, which is
 * registered for mxst_cleanup_temps() (signal handlers) and removed by mxst_writer_abort.
 * Rejected (MXP_EINVAL, message names the tensor): a repeated name, "__metadata__", a name
 * with a NUL, a size that overflows 64 bits or is not a whole number of bytes, a metadata key
 * given twice.
 * @retval MXP_OK *out ready for data; MXP_EEXIST path exists and no MXST_OVERWRITE;
 *         MXP_EIO cannot create the temporary file; MXP_ENOMEM; MXP_EINVAL
 */
mxp_status mxst_writer_begin(const char *path, const mxst_spec *tensors, size_t n,
                             const char *const *meta_kv, size_t npairs, unsigned flags,
                             mxst_writer **out);

/** Number of tensors and the input index of the i-th tensor in file order. */
size_t mxst_writer_count(const mxst_writer *w);
size_t mxst_writer_order(const mxst_writer *w, size_t i);
/** Input index of the tensor the next written byte belongs to (count when all data is in). */
size_t mxst_writer_current(const mxst_writer *w);
/** Bytes of tensor input index i (numel * bits / 8), and the total of the data buffer. */
uint64_t mxst_writer_nbytes(const mxst_writer *w, size_t i);
uint64_t mxst_writer_data_size(const mxst_writer *w);
/** Size of the finished file (8 + header + data). */
uint64_t mxst_writer_file_size(const mxst_writer *w);

/**
 * Append len bytes of data (in file order: the tensors of mxst_writer_order, one after the
 * other; a call may span tensors). Retries short writes and EINTR.
 * @retval MXP_OK / MXP_EINVAL (more bytes than the tensors hold) / MXP_EIO (write failed: disk
 *         full, file size limit, ...; the message names the file and errno's text)
 * After a failure only mxst_writer_abort is allowed.
 */
mxp_status mxst_writer_write(mxst_writer *w, const void *buf, size_t len);

/**
 * Finish: every byte must have been written (else MXP_EINVAL); fsync, close, then the
 * temporary file replaces path (rename with MXST_OVERWRITE, else a no-clobber link: MXP_EEXIST
 * if path appeared meanwhile), and the directory is fsynced. Frees w whatever the result; on
 * failure the temporary file is removed and path is unchanged.
 */
mxp_status mxst_writer_commit(mxst_writer *w);

/**
 * The first half of commit, for several files that must appear together: check completeness,
 * fsync and close. Then mxst_writer_commit (renames) or mxst_writer_abort. On failure w is
 * still valid and must be aborted.
 */
mxp_status mxst_writer_finish(mxst_writer *w);

/** Abandon: close and remove the temporary file, free w. NULL accepted. */
void mxst_writer_abort(mxst_writer *w);

/**
 * Unlink every temporary file of writers not yet committed or aborted in this process.
 * Async-signal-safe (only unlink(2)): call it from a SIGINT/SIGTERM handler before re-raising.
 */
void mxst_cleanup_temps(void);

/**
 * Write a small file (an index) atomically: temporary file in its directory, fsync, rename
 * (or no-clobber link without MXST_OVERWRITE), directory fsync.
 * @retval MXP_OK / MXP_EEXIST / MXP_EIO / MXP_ENOMEM
 */
mxp_status mxst_write_small_file(const char *path, const void *data, size_t len, unsigned flags);

/**
 * The JSON text of an index for shards: {"metadata": {"total_size": total}, "weight_map":
 * {name: shard, ...}} with names sorted, pretty-printed like transformers (indent 2). names[i]
 * is stored in shard file shards[i]. Returns a malloc'd NUL-terminated string (free it), or
 * NULL when out of memory.
 */
char *mxst_index_json(const char *const *names, const char *const *shards, size_t n,
                      uint64_t total_size);

/**
 * Parse a size with an explicit unit: "5GB", "500MB", "10kB", "2GiB", "64MiB", "1KiB",
 * "4096B" (decimal units are powers of 10, binary ones powers of 2, case-insensitive).
 * A bare number, an unknown unit or an overflow is refused (false).
 */
bool mxst_parse_size(const char *text, uint64_t *out);

#ifdef __cplusplus
}
#endif

#endif /* MIXPREC_TOOLS_SAFETENSORS_H */
