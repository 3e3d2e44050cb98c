/*
 * tools/mixprec.c - the `mixprec` command-line tool (docs/DESIGN.md section 9, docs/cli.md):
 * inspect, validate, cast, quantize and report on safetensors checkpoints.
 *
 *   mixprec inspect  IN [--json]
 *   mixprec validate IN [--strict]
 *   mixprec cast     IN OUT (--policy TEXT | --map FILE) [--saturate] [--dry-run] [--force]
 *                    [--threads N] [--quiet] [--max-shard-size SIZE]
 *   mixprec quantize IN OUT --scheme int8|int4|fp8|mxfp8 [--map FILE] [--keep REGEX]...
 *                    [--dry-run] [--force] [--threads N] [--quiet] [--max-shard-size SIZE]
 *   mixprec report   IN (--dtype D | --scheme S) [--map FILE] [--json]
 *
 * Exit codes: 0 success, 1 bad input file (the message names the file, the tensor and the
 * rule), 2 usage error (including an existing OUT without --force and OUT naming IN), 3 I/O
 * error (including out of memory).
 *
 * Everything streams: tensors are read with pread in pieces of at most CHUNK bytes (a whole
 * row at least, for per-row quantization) and written through the atomic writer of
 * safetensors.h (temporary file in OUT's directory, fsync, rename; removed on any failure and
 * on SIGINT / SIGTERM / SIGHUP). Uses only the public headers of libmixprec.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mixprec.h"
#include "safetensors.h"

#ifndef MXP_TOOL_QUANT
#define MXP_TOOL_QUANT 1
#endif

enum { EXIT_BADFILE = 1, EXIT_USAGE = 2, EXIT_IO = 3 };

#define CHUNK ((size_t)16 << 20) /* bytes of source data per piece */

static const char *g_cmd = "mixprec";
static bool g_quiet;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int(err)(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mixprec %s: ", g_cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
}
#ifdef __clang_analyzer__
/* The static analyzer (scripts/analyze.sh) does not step into variadic functions: under the
 * analyzer only, a call is also seen to return its code. */
#define err(code, ...) (err((code), __VA_ARGS__), (code))
#endif

static int code_of(mxp_status s)
{
    switch (s) {
    case MXP_OK:
        return 0;
    case MXP_EFORMAT:
        return EXIT_BADFILE;
    case MXP_EIO:
    case MXP_ENOMEM:
        return EXIT_IO;
    default:
        return EXIT_USAGE;
    }
}

/* ---- small helpers ------------------------------------------------------------------------- */

static bool little_endian(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* "[d0, d1, ...]" into buf (cap >= 8). A shape too long for buf is cut after its last whole
 * dimension and ends in ", ...]": never silently, never inside a number (a cut "[0, 92233...]"
 * would read as another shape). */
static void shape_str(char *buf, size_t cap, const uint64_t *shape, size_t nd)
{
    size_t j = (size_t)snprintf(buf, cap, "[");
    for (size_t d = 0; d < nd && j < cap; d++)
        j += (size_t)snprintf(buf + j, cap - j, "%s%llu", d ? ", " : "",
                              (unsigned long long)shape[d]);
    if (j + 1 < cap) {
        snprintf(buf + j, cap - j, "]");
        return;
    }
    char *comma = NULL; /* the last ", " that leaves room for ", ...]" and the NUL */
    for (char *c = buf; c + 7 <= buf + cap; c++)
        if (*c == ',') comma = c;
    snprintf(comma ? comma : buf + 1, 7, comma ? ", ...]" : "...]");
}

static const char *human(char *buf, size_t cap, double b)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4) {
        b /= 1024;
        i++;
    }
    if (i == 0)
        snprintf(buf, cap, "%.0f B", b);
    else
        snprintf(buf, cap, "%.2f %s", b, u[i]);
    return buf;
}
#define HUMAN(b) human((char[32]){0}, 32, (double)(b))

#define SHOWN_MAX 150 /* bytes of a name shown in messages and tables (docs/cli.md) */
/* A tensor name or metadata string from a file, for messages and text output. */
#define SHOWN(s) mxst_show((char[SHOWN_MAX + 4]){0}, SHOWN_MAX + 4, (s), SHOWN_MAX)
/* A longer text that may quote a name (a shard path, a library message, a plan rule): control
 * characters replaced the same way, cut only at a length no real message reaches. */
#define CLEAN(s) mxst_show((char[1028]){0}, 1028, (s), 1024)

/* The library's last message without its head, the C function's name ("mxp_policy_parse: "),
 * which means nothing to someone running the tool. */
static const char *lib_error(void)
{
    const char *m = mxp_last_error(), *p = m;
    if (strncmp(p, "mxp_", 4) != 0) return m;
    for (p += 4; *p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9'); p++) continue;
    return p[0] == ':' && p[1] == ' ' ? p + 2 : m;
}

/* Terminal columns of code point c: 0 for combining marks, zero-width characters and variation
 * selectors; 2 for the East Asian wide and fullwidth blocks (CJK, Hangul, fullwidth forms, most
 * emoji); 1 otherwise. The blocks of Unicode's EastAsianWidth W and F classes, whole: close to
 * wcwidth() in a UTF-8 locale, without depending on the caller's locale. */
static int char_width(uint32_t c)
{
    static const uint32_t zero[][2] = {{0x0300, 0x036F}, {0x0483, 0x0489}, {0x0591, 0x05BD},
                                       {0x1AB0, 0x1AFF}, {0x1DC0, 0x1DFF}, {0x200B, 0x200F},
                                       {0x20D0, 0x20FF}, {0xFE00, 0xFE0F}, {0xFE20, 0xFE2F}};
    static const uint32_t wide[][2] = {{0x1100, 0x115F},   {0x2E80, 0x303E},   {0x3041, 0x33FF},
                                       {0x3400, 0x4DBF},   {0x4E00, 0x9FFF},   {0xA000, 0xA4CF},
                                       {0xA960, 0xA97F},   {0xAC00, 0xD7A3},   {0xF900, 0xFAFF},
                                       {0xFE30, 0xFE4F},   {0xFF00, 0xFF60},   {0xFFE0, 0xFFE6},
                                       {0x1F300, 0x1F64F}, {0x1F900, 0x1F9FF}, {0x20000, 0x3FFFD}};
    for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++)
        if (c >= zero[i][0] && c <= zero[i][1]) return 0;
    for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
        if (c >= wide[i][0] && c <= wide[i][1]) return 2;
    return 1;
}

/* Text tables (inspect, report, the dry-run plan) are printed in two passes: the first widens
 * each column to its widest cell (the header included), the second prints, so that every column
 * starts at the same offset on every line whatever the names, dtypes, shapes and numbers.
 * Widths count terminal columns (char_width): a shown name is valid UTF-8, and printf's %-*s
 * pads by bytes. */
static int text_width(const char *s)
{
    int n = 0;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        const int len = *p < 0x80 ? 1 : *p < 0xE0 ? 2 : *p < 0xF0 ? 3 : 4;
        uint32_t c = len == 1 ? *p : (uint32_t)(*p & (0x7F >> len));
        int k = 1;
        for (; k < len && (p[k] & 0xC0) == 0x80; k++) c = c << 6 | (p[k] & 0x3F);
        n += char_width(c);
        p += k; /* a cut sequence (never in a shown name) ends at the next lead byte */
    }
    return n;
}

/* The printf width that pads s to w characters. */
static int pad_to(const char *s, int w) { return w + (int)strlen(s) - text_width(s); }

/* Widen the column width *w to hold s. */
static void fit(int *w, const char *s)
{
    int l = text_width(s);
    if (l > *w) *w = l;
}

/* A JSON string: quotes, backslashes and every control character escaped (DEL and C1 too, so that
 * the output is safe on a terminal), invalid UTF-8 bytes as U+FFFD, so the output is always
 * valid JSON whatever the names hold. */
static void json_str(FILE *o, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    fputc('"', o);
    while (*s) {
        bool control;
        const size_t len = mxst_char_at((const char *)s, &control);
        if (!len) {
            fputs("\\ufffd", o);
            s++;
        } else if (control) {
            unsigned cp = len == 1 ? s[0] : s[1]; /* C2 xx is U+00xx */
            if (cp == '\n')
                fputs("\\n", o);
            else if (cp == '\t')
                fputs("\\t", o);
            else
                fprintf(o, "\\u%04x", cp);
            s += len;
        } else {
            if (*s == '"' || *s == '\\') fputc('\\', o);
            fwrite(s, 1, len, o);
            s += len;
        }
    }
    fputc('"', o);
}

static void json_num(FILE *o, double v)
{
    if (isnan(v))
        fputs("\"nan\"", o);
    else if (isinf(v))
        fputs(v > 0 ? "\"inf\"" : "\"-inf\"", o);
    else
        fprintf(o, "%.9g", v);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- options ------------------------------------------------------------------------------- */

typedef struct opts {
    const char *pos[3];
    int npos;
    bool json, strict, saturate, dry_run, force, quiet, help;
    const char *policy, *map, *scheme, *dtype, *max_shard;
    const char *keep[64];
    int nkeep;
    int threads;
} opts;

/* Parse argv[2..]: returns 0 or an exit code (message printed). `allowed` lists the option
 * names this subcommand takes, `maxpos` the number of positional arguments. */
static int parse_opts(int argc, char **argv, const char *allowed, int maxpos, opts *o)
{
    memset(o, 0, sizeof *o);
    o->threads = -1;
    bool only_pos = false;
    for (int i = 2; i < argc; i++) {
        char *a = argv[i];
        if (only_pos || a[0] != '-' || a[1] == '\0') {
            if (o->npos >= maxpos)
                return err(EXIT_USAGE, "unexpected argument '%s' (see --help)", a);
            o->pos[o->npos++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_pos = true;
            continue;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            o->help = true;
            continue;
        }
        if (strncmp(a, "--", 2) != 0) return err(EXIT_USAGE, "unknown option '%s' (see --help)", a);
        char name[64];
        const char *val = NULL;
        const char *eq = strchr(a, '=');
        size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (nl >= sizeof name) return err(EXIT_USAGE, "unknown option '%s' (see --help)", a);
        memcpy(name, a + 2, nl);
        name[nl] = '\0';
        if (eq) val = eq + 1;
        /* is it allowed here? */
        char pat[80];
        snprintf(pat, sizeof pat, " %s ", name);
        char all[512];
        snprintf(all, sizeof all, " %s ", allowed);
        if (!strstr(all, pat))
            return err(EXIT_USAGE, "unknown option '--%s' for %s (see --help)", name, g_cmd);
        static const char *flags[] = {"json", "strict", "saturate", "dry-run", "force", "quiet"};
        bool is_flag = false;
        for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++)
            if (strcmp(name, flags[k]) == 0) is_flag = true;
        if (is_flag) {
            if (val) return err(EXIT_USAGE, "option --%s takes no value", name);
            if (!strcmp(name, "json"))
                o->json = true;
            else if (!strcmp(name, "strict"))
                o->strict = true;
            else if (!strcmp(name, "saturate"))
                o->saturate = true;
            else if (!strcmp(name, "dry-run"))
                o->dry_run = true;
            else if (!strcmp(name, "force"))
                o->force = true;
            else
                o->quiet = true;
            continue;
        }
        if (!val) {
            if (i + 1 >= argc) return err(EXIT_USAGE, "option --%s needs a value", name);
            val = argv[++i];
        }
        if (!strcmp(name, "policy") || !strcmp(name, "map") || !strcmp(name, "scheme") ||
            !strcmp(name, "dtype") || !strcmp(name, "max-shard-size")) {
            const char **slot = !strcmp(name, "policy")   ? &o->policy
                                : !strcmp(name, "map")    ? &o->map
                                : !strcmp(name, "scheme") ? &o->scheme
                                : !strcmp(name, "dtype")  ? &o->dtype
                                                          : &o->max_shard;
            if (*slot) return err(EXIT_USAGE, "option --%s given twice", name);
            *slot = val;
        } else if (!strcmp(name, "keep")) {
            if (o->nkeep >= 64) return err(EXIT_USAGE, "too many --keep options (at most 64)");
            o->keep[o->nkeep++] = val;
        } else if (!strcmp(name, "threads")) {
            char *end;
            errno = 0;
            long t = strtol(val, &end, 10);
            if (errno || *end || end == val || t < 0 || t > 1024)
                return err(EXIT_USAGE,
                           "--threads '%s': expected an integer from 0 (the default) to 1024", val);
            o->threads = (int)t;
        }
    }
    return 0;
}

static int default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    if (n > 8) n = 8;
    return (int)n;
}

/* ---- help ------------------------------------------------------------------------------------ */

static const char *HELP_MAIN =
    "usage: mixprec <command> [options]\n"
    "\n"
    "Inspect, validate and convert safetensors checkpoints (one file, or a sharded checkpoint\n"
    "through its *.safetensors.index.json).\n"
    "\n"
    "commands:\n"
    "  inspect  IN [--json]                 tensors, dtypes, shapes, bytes, totals, metadata\n"
    "  validate IN [--strict]               check every rule of the format\n"
    "  cast     IN OUT (--policy TEXT | --map FILE) [--saturate] [--dry-run] [--force]\n"
    "           [--threads N] [--quiet] [--max-shard-size SIZE]\n"
    "  quantize IN OUT --scheme int8|int4|fp8|mxfp8 [--map FILE] [--keep REGEX]...\n"
    "           [--dry-run] [--force] [--threads N] [--quiet] [--max-shard-size SIZE]\n"
    "  report   IN (--dtype D | --scheme S) [--map FILE] [--json]\n"
    "\n"
    "`mixprec <command> --help` shows a worked example. `mixprec --version` prints the version.\n"
    "Exit codes: 0 success, 1 bad input file, 2 usage error, 3 I/O error.\n";

static const char *HELP_INSPECT =
    "usage: mixprec inspect IN [--json]\n"
    "\n"
    "List the tensors of IN (a .safetensors file or a *.safetensors.index.json) with dtype,\n"
    "shape and bytes, the totals per dtype and the metadata. The file is validated first.\n"
    "  --json   machine-readable output\n"
    "\n"
    "example:\n"
    "  $ mixprec inspect model.safetensors\n"
    "  model.safetensors: 3 tensors, 1 file, 8.51 KiB\n"
    "  metadata:\n"
    "    source = mkst\n"
    "    format = pt\n"
    "  tensor      dtype  shape     bytes\n"
    "  fc.bias     F32    [32]      128\n"
    "  fc.weight   F32    [32, 64]  8192\n"
    "  norm.scale  F32    [32]      128\n"
    "  totals:\n"
    "    F32  3 tensors  2112 elements  8448 bytes\n"
    "    all  3 tensors  2112 elements  8448 bytes\n";

static const char *HELP_VALIDATE =
    "usage: mixprec validate IN [--strict]\n"
    "\n"
    "Check every rule of the safetensors format (docs/cli.md): the header length, the\n"
    "JSON header (one object, no repeated keys, entries of exactly dtype / shape / data_offsets,\n"
    "string metadata), the 22 dtypes, sizes (numel x dtype size, overflow-checked), and that the\n"
    "tensors tile the data buffer exactly. For a sharded checkpoint, every shard and the\n"
    "cross-file rules (each mapped tensor in its shard, no tensor in two shards).\n"
    "  --strict   also: data aligned to 8 bytes, each tensor aligned to its element size,\n"
    "             metadata.total_size equal to the bytes of the tensors\n"
    "Exit 0 when valid, 1 with the file, the tensor and the rule named otherwise.\n"
    "\n"
    "example:\n"
    "  $ mixprec validate model.safetensors\n"
    "  model.safetensors: valid (3 tensors, 1 file, 8.51 KiB)\n"
    "  $ mixprec validate broken.safetensors; echo $?\n"
    "  mixprec validate: broken.safetensors: tensor 'fc.bias': data_offsets begin at 20, leaving "
    "a\n"
    "  gap of 4 bytes after tensor 'fc.weight' (rule: gap)\n"
    "  1\n";

static const char *HELP_CAST =
    "usage: mixprec cast IN OUT (--policy TEXT | --map FILE) [options]\n"
    "\n"
    "Convert every floating tensor to the param dtype of the policy its name maps to. --policy\n"
    "gives one policy for all (`bf16`, `p=float16`, `mixed_bfloat16` -> param float32, ...);\n"
    "--map FILE is a policy map (one `key = policy` per line, keys are exact names or POSIX\n"
    "regexes matching the whole name, `@default = policy`). Integer, bool and dtypes mixprec\n"
    "cannot convert are copied byte for byte; metadata is kept. A quantized tensor X written by\n"
    "`mixprec quantize` (X with X_scale, and X_shape for int4) becomes floats again.\n"
    "OUT ending in .json writes a sharded checkpoint (its index; shards beside it).\n"
    "  --saturate            overflow and +-inf (even in a tensor already of the target dtype)\n"
    "                        become +-max finite; NaN stays NaN\n"
    "  --dry-run             print the plan (per tensor: dtype, shape and bytes in and out, and\n"
    "                        the rule) and the totals only; an existing OUT is noted, not\n"
    "                        refused (nothing is written)\n"
    "  --force               replace an existing OUT\n"
    "  --threads N           conversion threads (0, the default: online CPUs, at most 8)\n"
    "  --quiet               no progress and no final summary on stderr\n"
    "  --max-shard-size SIZE with an index OUT: shard size with a unit (5GB, 500MB, 2GiB;\n"
    "                        default 5GB)\n"
    "\n"
    "example: bfloat16 everywhere except the norms\n"
    "  $ cat policy.map\n"
    "  @default = bf16\n"
    "  .*norm.* = float32\n"
    "  $ mixprec cast model.safetensors model-bf16.safetensors --map policy.map --dry-run\n"
    "  fc.bias     F32 [32]     -> BF16 [32]       128 ->   64 bytes  "
    "(@default: p=bfloat16,c=bfloat16,o=bfloat16)\n"
    "  fc.weight   F32 [32, 64] -> BF16 [32, 64]  8192 -> 4096 bytes  "
    "(@default: p=bfloat16,c=bfloat16,o=bfloat16)\n"
    "  norm.scale  F32 [32]     -> F32  [32]       128 ->  128 bytes  "
    "(.*norm.*: p=float32,c=float32,o=float32)\n"
    "  total: 3 tensors, 8.25 KiB -> 4.19 KiB of tensor data (0.508x), 1 output file: "
    "model-bf16.safetensors\n"
    "  $ mixprec cast model.safetensors model-bf16.safetensors --map policy.map\n";

static const char *HELP_QUANTIZE =
    "usage: mixprec quantize IN OUT --scheme int8|int4|fp8|mxfp8 [options]\n"
    "\n"
    "Quantize the weights (floating tensors with 2 or more dimensions, read as [out, in] with\n"
    "the trailing dimensions flattened) with compressed-tensors / vLLM names: X becomes the\n"
    "quantized tensor and X_scale holds float32 DEQUANTIZATION multipliers, x ~= q * X_scale,\n"
    "one per output channel (row):\n"
    "  int8    X: I8, same shape; X_scale: F32 [out, 1] (Keras abs-max, 127 / amax)\n"
    "  int4    X: U8 [out, ceil(in/2)], two values per byte (low nibble first, two's\n"
    "          complement); X_scale: F32 [out, 1]; X_shape: I64, the original shape\n"
    "  fp8     X: F8_E4M3, same shape; X_scale: F32 [out, 1] (448 / amax current scaling)\n"
    "  mxfp8   X: F8_E4M3, same shape; X_scale: U8 [out, ceil(in/32)], E8M0 block exponents\n"
    "          (OCP MX: x ~= q * 2^(X_scale - 127))\n"
    "1-D tensors, names matching .*norm.* and any --keep REGEX (whole-name POSIX ERE) stay as\n"
    "they are, as do empty tensors and tensors whose dtype is not F32/F16/BF16. With --map, a\n"
    "tensor matched by a key is quantized as its policy's q= says (q=int8, q=int4, q=float8 ->\n"
    "the --scheme if it is fp8 or mxfp8, else fp8) or kept when the policy has no q; unmatched\n"
    "tensors use --scheme.\n"
    "Options --dry-run --force --quiet --max-shard-size as for cast; --threads is accepted, but\n"
    "quantize runs on one thread.\n"
    "\n"
    "example:\n"
    "  $ mixprec quantize model.safetensors model-int8.safetensors --scheme int8 --quiet\n"
    "  $ mixprec inspect model-int8.safetensors\n"
    "  ...\n"
    "  tensor           dtype  shape     bytes\n"
    "  fc.bias          F32    [32]      128\n"
    "  fc.weight_scale  F32    [32, 1]   128\n"
    "  norm.scale       F32    [32]      128\n"
    "  fc.weight        I8     [32, 64]  2048\n"
    "  ...\n"
    "  $ mixprec cast model-int8.safetensors back.safetensors --policy f32   # dequantize\n";

static const char *HELP_REPORT =
    "usage: mixprec report IN (--dtype D | --scheme S) [--map FILE] [--json]\n"
    "\n"
    "Before converting, see what a target does to each floating tensor: max abs error, relative\n"
    "L2 error, SQNR (dB), values overflowed (became inf / NaN, or were clamped to the largest\n"
    "finite value) and non-zero values flushed to zero. Worst (lowest SQNR) first.\n"
    "  --dtype D    a cast to D (float16, bf16, e4m3, e5m2, ...), nearest-even, no saturation\n"
    "  --scheme S   quantize and dequantize with int8 | int4 | fp8 | mxfp8 (as `quantize`)\n"
    "  --map FILE   tensors matched by a key use that policy (param dtype, or its q= with\n"
    "               --scheme); the others use --dtype / --scheme\n"
    "  --json       a JSON array, one object per tensor: tensor, dtype, target, elements,\n"
    "               max_abs_err, rel_l2, sqnr_db, overflow, flushed_to_zero, nonfinite_inputs\n"
    "               (inf / nan as strings)\n"
    "\n"
    "example:\n"
    "  $ mixprec report big.safetensors --dtype float16\n"
    "  tensor       dtype  target  max_abs_err  rel_l2  sqnr_db  overflow  flushed\n"
    "  big.weight   F32    F16             inf     inf     -inf        27        0\n"
    "  tiny.weight  F32    F16           3e-09       1     0.00         0       32\n";

/* ---- opening ----------------------------------------------------------------------------------
 */

static int open_in(const char *path, bool strict, mxst_file **f)
{
    mxp_status s = mxst_open(path, strict, f);
    if (s) return err(code_of(s), "%s", mxst_last_error());
    return 0;
}

/* ---- inspect ------------------------------------------------------------------------------------
 */

static uint64_t total_bytes(const mxst_file *f)
{
    uint64_t b = 0;
    for (size_t i = 0; i < mxst_shard_count(f); i++) b += mxst_shard_size(f, i);
    return b;
}

/* Inspect's totals: one row per dtype present, then "all". Each column is as wide as its widest
 * cell, so that rows line up whatever the counts; the words keep their columns in the singular
 * ("1 tensor "). */
typedef struct totals_row {
    const char *what;
    uint64_t n[3]; /* tensors, elements, bytes */
} totals_row;

static int digits(uint64_t v)
{
    int d = 1;
    while (v >= 10) v /= 10, d++;
    return d;
}

static void print_totals(FILE *out, const totals_row *rows, size_t count)
{
    static const char *const word[3] = {"tensor", "element", "byte"};
    int ww = 0, w[3] = {0, 0, 0};
    for (size_t r = 0; r < count; r++) {
        if ((int)strlen(rows[r].what) > ww) ww = (int)strlen(rows[r].what);
        for (int k = 0; k < 3; k++)
            if (digits(rows[r].n[k]) > w[k]) w[k] = digits(rows[r].n[k]);
    }
    for (size_t r = 0; r < count; r++) {
        fprintf(out, "  %-*s", ww, rows[r].what);
        for (int k = 0; k < 3; k++)
            fprintf(out, "  %*llu %s%s", w[k], (unsigned long long)rows[r].n[k], word[k],
                    k == 2 ? MXST_PLURAL(rows[r].n[k]) : rows[r].n[k] == 1 ? " " : "s");
        fputc('\n', out);
    }
}

static int cmd_inspect(int argc, char **argv)
{
    opts o;
    int rc = parse_opts(argc, argv, "json", 1, &o);
    if (rc) return rc;
    if (o.help) return fputs(HELP_INSPECT, stdout), 0;
    if (o.npos != 1) return err(EXIT_USAGE, "expected one input file (see --help)");
    mxst_file *f;
    if ((rc = open_in(o.pos[0], false, &f))) return rc;
    size_t n = mxst_count(f);
    uint64_t cnt[MXST_DTYPE_COUNT] = {0}, el[MXST_DTYPE_COUNT] = {0}, by[MXST_DTYPE_COUNT] = {0};
    for (size_t i = 0; i < n; i++) {
        const mxst_tensor *t = mxst_tensor_at(f, i);
        cnt[t->dtype]++;
        el[t->dtype] += t->numel;
        by[t->dtype] += t->nbytes;
    }
    FILE *out = stdout;
    if (o.json) {
        fputs("{\"file\":", out);
        json_str(out, o.pos[0]);
        fprintf(out, ",\"shards\":[");
        for (size_t s = 0; s < mxst_shard_count(f); s++) {
            fputs(s ? "," : "", out);
            fputs("{\"path\":", out);
            json_str(out, mxst_shard_path(f, s));
            fprintf(out, ",\"bytes\":%llu,\"header_bytes\":%llu}",
                    (unsigned long long)mxst_shard_size(f, s),
                    (unsigned long long)mxst_shard_header_len(f, s));
        }
        fputs("],\"metadata\":{", out);
        for (size_t i = 0; i < mxst_metadata_count(f); i++) {
            const char *k, *v;
            mxst_metadata_at(f, i, &k, &v);
            fputs(i ? "," : "", out);
            json_str(out, k);
            fputc(':', out);
            json_str(out, v);
        }
        fputs("},\"tensors\":[", out);
        for (size_t i = 0; i < n; i++) {
            const mxst_tensor *t = mxst_tensor_at(f, i);
            fputs(i ? "," : "", out);
            fputs("{\"name\":", out);
            json_str(out, t->name);
            fprintf(out, ",\"dtype\":\"%s\",\"shape\":[", mxst_dtype_name(t->dtype));
            for (size_t d = 0; d < t->ndim; d++)
                fprintf(out, "%s%llu", d ? "," : "", (unsigned long long)t->shape[d]);
            fprintf(out,
                    "],\"elements\":%llu,\"bytes\":%llu,\"data_offsets\":[%llu,%llu],"
                    "\"shard\":%zu}",
                    (unsigned long long)t->numel, (unsigned long long)t->nbytes,
                    (unsigned long long)t->begin, (unsigned long long)t->end, t->shard);
        }
        fputs("],\"totals\":{", out);
        bool first = true;
        uint64_t tc = 0, te = 0, tb = 0;
        for (int d = MXST_DTYPE_COUNT - 1; d >= 0; d--) {
            if (!cnt[d]) continue;
            fprintf(out, "%s\"%s\":{\"tensors\":%llu,\"elements\":%llu,\"bytes\":%llu}",
                    first ? "" : ",", mxst_dtype_name((mxst_dtype)d), (unsigned long long)cnt[d],
                    (unsigned long long)el[d], (unsigned long long)by[d]);
            first = false;
            tc += cnt[d];
            te += el[d];
            tb += by[d];
        }
        fprintf(out, "%s\"all\":{\"tensors\":%llu,\"elements\":%llu,\"bytes\":%llu}}}\n",
                first ? "" : ",", (unsigned long long)tc, (unsigned long long)te,
                (unsigned long long)tb);
    } else {
        fprintf(out, "%s: %zu tensor%s, %zu file%s, %s\n", o.pos[0], n, MXST_PLURAL(n),
                mxst_shard_count(f), MXST_PLURAL(mxst_shard_count(f)), HUMAN(total_bytes(f)));
        if (mxst_is_sharded(f))
            for (size_t s = 0; s < mxst_shard_count(f); s++)
                fprintf(out, "  shard %s: %s\n", CLEAN(mxst_shard_path(f, s)),
                        HUMAN(mxst_shard_size(f, s)));
        if (mxst_metadata_count(f)) fprintf(out, "metadata:\n");
        for (size_t i = 0; i < mxst_metadata_count(f); i++) {
            const char *k, *v;
            mxst_metadata_at(f, i, &k, &v);
            fprintf(out, "  %s = %s\n", SHOWN(k), SHOWN(v));
        }
        /* name, dtype and shape columns (two passes, see text_width); bytes last, unpadded */
        int w = (int)strlen("tensor"), dw = (int)strlen("dtype"), sw = (int)strlen("shape");
        for (int pass = 0; pass < 2; pass++) {
            if (pass)
                fprintf(out, "%-*s  %-*s  %-*s  %s\n", w, "tensor", dw, "dtype", sw, "shape",
                        "bytes");
            for (size_t i = 0; i < n; i++) {
                const mxst_tensor *t = mxst_tensor_at(f, i);
                const char *name = SHOWN(t->name), *dt = mxst_dtype_name(t->dtype);
                char shp[256];
                shape_str(shp, sizeof shp, t->shape, t->ndim);
                if (!pass) {
                    fit(&w, name);
                    fit(&dw, dt);
                    fit(&sw, shp);
                    continue;
                }
                fprintf(out, "%-*s  %-*s  %-*s  %llu\n", pad_to(name, w), name, dw, dt, sw, shp,
                        (unsigned long long)t->nbytes);
            }
        }
        fprintf(out, "totals:\n");
        totals_row rows[MXST_DTYPE_COUNT + 1];
        size_t nr = 0;
        uint64_t tc = 0, te = 0, tb = 0;
        for (int d = MXST_DTYPE_COUNT - 1; d >= 0; d--) {
            if (!cnt[d]) continue;
            rows[nr++] = (totals_row){mxst_dtype_name((mxst_dtype)d), {cnt[d], el[d], by[d]}};
            tc += cnt[d];
            te += el[d];
            tb += by[d];
        }
        rows[nr++] = (totals_row){"all", {tc, te, tb}};
        print_totals(out, rows, nr);
    }
    mxst_close(f);
    if (fflush(out) != 0 || ferror(out)) return err(EXIT_IO, "cannot write the output");
    return 0;
}

/* ---- validate -----------------------------------------------------------------------------------
 */

static int cmd_validate(int argc, char **argv)
{
    opts o;
    int rc = parse_opts(argc, argv, "strict", 1, &o);
    if (rc) return rc;
    if (o.help) return fputs(HELP_VALIDATE, stdout), 0;
    if (o.npos != 1) return err(EXIT_USAGE, "expected one input file (see --help)");
    mxst_file *f;
    if ((rc = open_in(o.pos[0], o.strict, &f))) return rc;
    printf("%s: valid%s (%zu tensor%s, %zu file%s, %s)\n", o.pos[0], o.strict ? " (strict)" : "",
           mxst_count(f), MXST_PLURAL(mxst_count(f)), mxst_shard_count(f),
           MXST_PLURAL(mxst_shard_count(f)), HUMAN(total_bytes(f)));
    mxst_close(f);
    return 0;
}

/* ---- plans (cast, quantize)
 * ----------------------------------------------------------------------- */

typedef enum op_kind {
    OP_COPY,    /* bytes as they are */
    OP_CONVERT, /* floating -> floating with mxp_convert_ex */
    OP_DEQUANT, /* quantized X (+ X_scale) -> floating */
    OP_QDATA,   /* floating -> quantized X */
    OP_QSCALE,  /* floating -> X_scale (the same quantization, scales only) */
    OP_QSHAPE   /* X_shape: the original shape as I64 */
} op_kind;

typedef enum scheme { SCH_NONE = 0, SCH_INT8, SCH_INT4, SCH_FP8, SCH_MXFP8 } scheme;

static const char *scheme_name(scheme s)
{
    static const char *n[] = {"none", "int8", "int4", "fp8", "mxfp8"};
    return n[s];
}

static bool parse_scheme(const char *t, scheme *s)
{
    if (!strcmp(t, "int8"))
        *s = SCH_INT8;
    else if (!strcmp(t, "int4"))
        *s = SCH_INT4;
    else if (!strcmp(t, "fp8"))
        *s = SCH_FP8;
    else if (!strcmp(t, "mxfp8"))
        *s = SCH_MXFP8;
    else
        return false;
    return true;
}

typedef struct item {
    char *name;
    mxst_dtype dtype;
    size_t ndim;
    uint64_t *shape;
    op_kind op;
    scheme sch;
    const mxst_tensor *src;
    const mxst_tensor *scale; /* OP_DEQUANT: the X_scale tensor */
    uint64_t rows, cols;      /* quantization geometry (cols = elements per row) */
    char rule[256];
    size_t shard; /* output shard */
} item;

typedef struct plan {
    item *it;
    size_t n, cap;
} plan;

static void plan_free(plan *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->it[i].name);
        free(p->it[i].shape);
    }
    free(p->it);
}

static item *plan_add(plan *p, const char *name, mxst_dtype dt, size_t nd, const uint64_t *shape)
{
    if (p->n == p->cap) {
        size_t nc = p->cap ? 2 * p->cap : 64;
        item *ni = realloc(p->it, nc * sizeof *ni);
        if (!ni) return NULL;
        p->it = ni;
        p->cap = nc;
    }
    item *it = &p->it[p->n];
    memset(it, 0, sizeof *it);
    it->name = strdup(name);
    it->shape = malloc((nd ? nd : 1) * sizeof *it->shape);
    if (!it->name || !it->shape) {
        free(it->name);
        free(it->shape);
        return NULL;
    }
    if (nd) memcpy(it->shape, shape, nd * sizeof *shape);
    it->dtype = dt;
    it->ndim = nd;
    p->n++;
    return it;
}

static uint64_t item_bytes(const item *it)
{
    uint64_t n = 1;
    for (size_t d = 0; d < it->ndim; d++) n *= it->shape[d];
    return n * mxst_dtype_bits(it->dtype) / 8;
}

/* The policy map for --policy / --map (exit code on failure). */
static int load_map(const opts *o, mxp_policy_map **m, bool need)
{
    *m = NULL;
    if (o->policy && o->map) return err(EXIT_USAGE, "give --policy or --map, not both");
    if (o->policy) {
        mxp_policy p;
        if (mxp_policy_parse(o->policy, &p) != MXP_OK)
            return err(EXIT_USAGE, "--policy: %s", lib_error());
        *m = mxp_policy_map_new(&p);
        if (!*m) return err(EXIT_IO, "out of memory");
    } else if (o->map) {
        mxp_status s = mxp_policy_map_load(o->map, m);
        if (s)
            return err(s == MXP_EIO      ? EXIT_IO
                       : s == MXP_ENOMEM ? EXIT_IO
                                         : EXIT_USAGE,
                       "--map %s: %s", o->map, lib_error());
    } else if (need) {
        return err(EXIT_USAGE, "give --policy TEXT or --map FILE (see --help)");
    }
    return 0;
}

static int lookup(const mxp_policy_map *m, const char *name, mxp_policy *p, const char **key)
{
    mxp_status s = mxp_policy_map_match(m, name, p, key);
    /* the library's message quotes the name as it is: cleaned like the name */
    if (s) return err(EXIT_USAGE, "tensor '%s': %s", SHOWN(name), CLEAN(lib_error()));
    return 0;
}

static void rule_text(char *buf, size_t cap, const char *key, const mxp_policy *p)
{
    char pol[96];
    mxp_policy_format(p, pol, sizeof pol);
    snprintf(buf, cap, "%s: %s", key ? key : "@default", pol);
}

static size_t name_len_suffix(const char *name, const char *suf)
{
    size_t a = strlen(name), b = strlen(suf);
    return a > b && strcmp(name + a - b, suf) == 0 ? a - b : 0;
}

/* Is X (with its X_scale / X_shape) a tensor written by `quantize`? Fills the scheme and the
 * geometry, or returns false. */
static bool quantized_pair(const mxst_file *f, const mxst_tensor *x, scheme *sch,
                           const mxst_tensor **scale, uint64_t *rows, uint64_t *cols,
                           const mxst_tensor **shp)
{
    size_t nl = strlen(x->name);
    char *buf = malloc(nl + 8);
    if (!buf) return false;
    memcpy(buf, x->name, nl);
    strcpy(buf + nl, "_scale");
    const mxst_tensor *s = mxst_find(f, buf);
    strcpy(buf + nl, "_shape");
    const mxst_tensor *sh = mxst_find(f, buf);
    free(buf);
    *shp = NULL;
    if (!s || x->ndim < 1 || x->shape[0] == 0) return false;
    uint64_t r = x->shape[0], c = r ? x->numel / r : 0;
    if (x->dtype == MXST_U8 && sh && sh->dtype == MXST_I64 && sh->ndim == 1 && sh->numel >= 2 &&
        s->dtype == MXST_F32 && s->numel == r) {
        *sch = SCH_INT4;
        *shp = sh;
        *rows = r;
        *cols = 0; /* from X_shape, read later */
        *scale = s;
        return true;
    }
    if ((x->dtype == MXST_I8 || x->dtype == MXST_F8_E4M3 || x->dtype == MXST_F8_E5M2) &&
        s->dtype == MXST_F32 && (s->numel == r || s->numel == 1)) {
        *sch = x->dtype == MXST_I8 ? SCH_INT8 : SCH_FP8;
        *rows = r;
        *cols = c;
        *scale = s;
        return true;
    }
    if ((x->dtype == MXST_F8_E4M3 || x->dtype == MXST_F8_E5M2) &&
        (s->dtype == MXST_U8 || s->dtype == MXST_F8_E8M0) && s->numel == r * ((c + 31) / 32)) {
        *sch = SCH_MXFP8;
        *rows = r;
        *cols = c;
        *scale = s;
        return true;
    }
    return false;
}

/* cast: one item per output tensor. */
static int plan_cast(const mxst_file *f, const mxp_policy_map *m, bool saturate, plan *p)
{
    size_t n = mxst_count(f);
    /* names consumed as the scale / shape of a quantized tensor */
    bool *used = calloc(n ? n : 1, sizeof *used);
    if (!used) return err(EXIT_IO, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const mxst_tensor *t = mxst_tensor_at(f, i), *sc, *sh;
        scheme sch;
        uint64_t r, c;
        if (quantized_pair(f, t, &sch, &sc, &r, &c, &sh)) {
            used[(size_t)(sc - mxst_tensor_at(f, 0))] = true;
            if (sh) used[(size_t)(sh - mxst_tensor_at(f, 0))] = true;
        }
    }
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        const mxst_tensor *t = mxst_tensor_at(f, i), *sc = NULL, *sh = NULL;
        if (used[i]) continue;
        mxp_policy pol;
        const char *key;
        if ((rc = lookup(m, t->name, &pol, &key))) break;
        mxst_dtype to;
        mxst_dtype_from_mxp(pol.param, &to);
        scheme sch;
        uint64_t r = 0, c = 0;
        mxp_dtype src_mxp;
        if (quantized_pair(f, t, &sch, &sc, &r, &c, &sh)) {
            uint64_t shape[64];
            size_t nd = t->ndim;
            if (sh) {
                /* the original shape, from X_shape (I64) */
                nd = (size_t)sh->numel;
                int64_t dims[64];
                if (nd > 64) {
                    rc =
                        err(EXIT_BADFILE, "%s: tensor '%s': %zu dimensions (rule: quantized-shape)",
                            mxst_path(f), SHOWN(sh->name), nd);
                    break;
                }
                mxp_status s = mxst_read(f, sh, 0, dims, nd * 8);
                if (s) {
                    rc = err(code_of(s), "%s", mxst_last_error());
                    break;
                }
                /* The reader's overflow rule for the output (float64 at most: 64 bits an
                 * element): the product of the non-zero dimensions must fit, or a zero
                 * dimension would hide [1, 2^40, 2^40, 0]-like shapes from the size checks. */
                uint64_t numel = 1, nonzero = 1;
                bool bad = false, ovf = false;
                for (size_t d = 0; d < nd; d++) {
                    if (dims[d] < 0) bad = true;
                    shape[d] = (uint64_t)dims[d];
                    if (shape[d] == 0) {
                        numel = 0;
                        continue;
                    }
                    if (nonzero > (UINT64_MAX / 64) / shape[d]) ovf = true;
                    nonzero *= shape[d];
                    if (d > 0) numel *= shape[d]; /* <= nonzero: no overflow unless ovf */
                }
                c = numel;
                if (ovf) {
                    rc = err(EXIT_BADFILE,
                             "%s: tensor '%s': the original shape overflows 64 bits "
                             "(rule: quantized-shape)",
                             mxst_path(f), SHOWN(sh->name));
                    break;
                }
                if (bad || shape[0] != r || t->ndim != 2 || t->shape[1] != (c + 1) / 2) {
                    rc = err(EXIT_BADFILE,
                             "%s: tensor '%s': X_shape does not match the packed "
                             "int4 tensor [%llu, %llu] (rule: quantized-shape)",
                             mxst_path(f), SHOWN(t->name), (unsigned long long)t->shape[0],
                             (unsigned long long)(t->ndim > 1 ? t->shape[1] : 0));
                    break;
                }
            }
            /* int8 / fp8 / mxfp8 keep X's own shape, which may have any number of dimensions */
            item *it = plan_add(p, t->name, to, nd, sh ? shape : t->shape);
            if (!it) {
                rc = err(EXIT_IO, "out of memory");
                break;
            }
            it->op = OP_DEQUANT;
            it->sch = sch;
            it->src = t;
            it->scale = sc;
            it->rows = r;
            it->cols = c;
            char rt[160];
            rule_text(rt, sizeof rt, key, &pol);
            snprintf(it->rule, sizeof it->rule, "dequantize %s; %s", scheme_name(sch), rt);
        } else if (mxst_dtype_to_mxp(t->dtype, &src_mxp) && mxp_dtype_is_floating(src_mxp)) {
            item *it = plan_add(p, t->name, to, t->ndim, t->shape);
            if (!it) {
                rc = err(EXIT_IO, "out of memory");
                break;
            }
            /* --saturate applies to every pair, the same dtype included (+-inf -> +-max) */
            it->op = to == t->dtype && !saturate ? OP_COPY : OP_CONVERT;
            it->src = t;
            rule_text(it->rule, sizeof it->rule, key, &pol);
        } else {
            item *it = plan_add(p, t->name, t->dtype, t->ndim, t->shape);
            if (!it) {
                rc = err(EXIT_IO, "out of memory");
                break;
            }
            it->op = OP_COPY;
            it->src = t;
            snprintf(it->rule, sizeof it->rule, "%s: copied byte for byte",
                     mxp_dtype_is_floating(src_mxp) || !mxst_dtype_to_mxp(t->dtype, NULL)
                         ? "dtype not converted by mixprec"
                         : "integer/bool");
        }
    }
    free(used);
    return rc;
}

typedef struct regs {
    regex_t r[65];
    int n;
} regs;

static int compile_keep(const opts *o, regs *rg)
{
    rg->n = 0;
    const char *pats[65];
    pats[0] = ".*norm.*";
    for (int i = 0; i < o->nkeep; i++) pats[i + 1] = o->keep[i];
    for (int i = 0; i < o->nkeep + 1; i++) {
        size_t l = strlen(pats[i]);
        char *a = malloc(l + 5);
        if (!a) return err(EXIT_IO, "out of memory");
        snprintf(a, l + 5, "^(%s)$", pats[i]);
        int e = regcomp(&rg->r[rg->n], a, REG_EXTENDED | REG_NOSUB);
        free(a);
        if (e) {
            char msg[200];
            regerror(e, &rg->r[rg->n], msg, sizeof msg);
            return err(EXIT_USAGE, "--keep '%s': %s", pats[i], msg);
        }
        rg->n++;
    }
    return 0;
}

static void free_keep(regs *rg)
{
    for (int i = 0; i < rg->n; i++) regfree(&rg->r[i]);
    rg->n = 0;
}

/* Which scheme applies to tensor t for quantize / report --scheme (SCH_NONE: keep), and why. */
static int choose_scheme(const mxst_tensor *t, scheme deflt, const mxp_policy_map *m,
                         const regs *rg, const opts *o, scheme *out, char *why, size_t cap)
{
    mxp_dtype xt;
    *out = SCH_NONE;
    if (!mxst_dtype_to_mxp(t->dtype, &xt) ||
        (xt != MXP_FLOAT32 && xt != MXP_FLOAT16 && xt != MXP_BFLOAT16)) {
        snprintf(why, cap, "kept: dtype %s is not quantized", mxst_dtype_name(t->dtype));
        return 0;
    }
    if (t->ndim < 2) {
        snprintf(why, cap, "kept: %zu-D tensor", t->ndim);
        return 0;
    }
    for (int i = 0; i < rg->n; i++) {
        if (regexec(&rg->r[i], t->name, 0, NULL, 0) == 0) {
            snprintf(why, cap, "kept: matches %s", i == 0 ? ".*norm.*" : o->keep[i - 1]);
            return 0;
        }
    }
    if (t->numel == 0) {
        snprintf(why, cap, "kept: empty tensor");
        return 0;
    }
    if (m) {
        mxp_policy pol;
        const char *key;
        int rc = lookup(m, t->name, &pol, &key);
        if (rc) return rc;
        if (key) {
            char pt[96];
            mxp_policy_format(&pol, pt, sizeof pt);
            switch (pol.quant) {
            case MXP_QUANT_NONE:
                snprintf(why, cap, "kept: %s: %s", key, pt);
                return 0;
            case MXP_QUANT_INT8:
                *out = SCH_INT8;
                break;
            case MXP_QUANT_INT4:
                *out = SCH_INT4;
                break;
            case MXP_QUANT_FLOAT8:
                *out = deflt == SCH_MXFP8 ? SCH_MXFP8 : SCH_FP8;
                break;
            }
            snprintf(why, cap, "%s: %s: %s", scheme_name(*out), key, pt);
            return 0;
        }
    }
    *out = deflt;
    snprintf(why, cap, "%s: --scheme", scheme_name(deflt));
    return 0;
}

static int plan_quantize(const mxst_file *f, scheme deflt, const mxp_policy_map *m, const regs *rg,
                         const opts *o, plan *p)
{
    size_t n = mxst_count(f);
    for (size_t i = 0; i < n; i++) {
        const mxst_tensor *t = mxst_tensor_at(f, i);
        scheme sch;
        char why[200];
        int rc = choose_scheme(t, deflt, m, rg, o, &sch, why, sizeof why);
        if (rc) return rc;
        if (sch == SCH_NONE) {
            item *it = plan_add(p, t->name, t->dtype, t->ndim, t->shape);
            if (!it) return err(EXIT_IO, "out of memory");
            it->op = OP_COPY;
            it->src = t;
            snprintf(it->rule, sizeof it->rule, "%s", why);
            continue;
        }
        uint64_t rows = t->shape[0], cols = t->numel / rows;
        size_t nl = strlen(t->name);
        char *sname = malloc(nl + 8), *hname = malloc(nl + 8);
        if (!sname || !hname) {
            free(sname);
            free(hname);
            return err(EXIT_IO, "out of memory");
        }
        snprintf(sname, nl + 8, "%s_scale", t->name);
        snprintf(hname, nl + 8, "%s_shape", t->name);
        if (mxst_find(f, sname) || (sch == SCH_INT4 && mxst_find(f, hname))) {
            rc = err(EXIT_BADFILE,
                     "%s: tensor '%s': cannot quantize, the file already has a "
                     "tensor '%s' (rule: quantize-name)",
                     mxst_path(f), SHOWN(t->name), SHOWN(mxst_find(f, sname) ? sname : hname));
            free(sname);
            free(hname);
            return rc;
        }
        item *it;
        if (sch == SCH_INT4) {
            uint64_t shp[2] = {rows, (cols + 1) / 2};
            it = plan_add(p, t->name, MXST_U8, 2, shp);
        } else {
            it = plan_add(p, t->name, sch == SCH_INT8 ? MXST_I8 : MXST_F8_E4M3, t->ndim, t->shape);
        }
        item *sc = NULL, *sh = NULL;
        if (it) {
            it->op = OP_QDATA;
            it->sch = sch;
            it->src = t;
            it->rows = rows;
            it->cols = cols;
            snprintf(it->rule, sizeof it->rule, "%s", why);
            uint64_t sshape[2] = {rows, sch == SCH_MXFP8 ? (cols + 31) / 32 : 1};
            sc = plan_add(p, sname, sch == SCH_MXFP8 ? MXST_U8 : MXST_F32, 2, sshape);
        }
        if (sc) {
            sc->op = OP_QSCALE;
            sc->sch = sch;
            sc->src = t;
            sc->rows = rows;
            sc->cols = cols;
            snprintf(sc->rule, sizeof sc->rule, "scales of %.189s", why);
            if (sch == SCH_INT4) {
                uint64_t nd = t->ndim;
                sh = plan_add(p, hname, MXST_I64, 1, &nd);
                if (sh) {
                    sh->op = OP_QSHAPE;
                    sh->src = t;
                    snprintf(sh->rule, sizeof sh->rule, "original shape of int4 '%s'",
                             SHOWN(t->name));
                }
            }
        }
        free(sname);
        free(hname);
        if (!it || !sc || (sch == SCH_INT4 && !sh)) return err(EXIT_IO, "out of memory");
    }
    return 0;
}

/* ---- output paths ---------------------------------------------------------------------------- */

static volatile sig_atomic_t g_signal;

static void on_signal(int sig)
{
    mxst_cleanup_temps();
    g_signal = sig;
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGQUIT, &sa, NULL);
    /* a full file-size limit must be a write error (EFBIG), not a silent kill */
    signal(SIGXFSZ, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
}

static bool ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Refuse an output path that is one of the inputs, or exists without --force. For a dry run
 * (`exists` not NULL) an existing OUT without --force is no error: *exists is set instead, and the
 * plan ends with a note (a dry run writes nothing, so nothing would be overwritten). */
static int check_out_path(const char *out, const mxst_file *in, const char *in_path, bool force,
                          bool *exists)
{
    struct stat sb;
    if (stat(out, &sb) != 0) {
        if (errno == ENOENT) return 0;
        return err(EXIT_IO, "%s: %s", out, strerror(errno));
    }
    if (S_ISDIR(sb.st_mode)) return err(EXIT_USAGE, "%s: is a directory; OUT must be a file", out);
    for (size_t i = 0; i < mxst_shard_count(in); i++) {
        uint64_t dev, ino;
        if (mxst_shard_identity(in, i, &dev, &ino) && dev == (uint64_t)sb.st_dev &&
            ino == (uint64_t)sb.st_ino)
            return err(EXIT_USAGE, "%s: the output names the input %s; write to another file", out,
                       CLEAN(mxst_shard_path(in, i)));
    }
    struct stat ib;
    if (stat(in_path, &ib) == 0 && ib.st_dev == sb.st_dev && ib.st_ino == sb.st_ino)
        return err(EXIT_USAGE, "%s: the output names the input %s; write to another file", out,
                   in_path);
    if (!force && exists) {
        *exists = true;
        return 0;
    }
    if (!force) return err(EXIT_USAGE, "%s: already exists (use --force to overwrite)", out);
    return 0;
}

/* The dry run's line for an output file that exists (checked without --force). */
static void print_exists_note(const char *path)
{
    printf("note: %s already exists; the run without --dry-run needs --force to overwrite it\n",
           path);
}

/* ---- execution ----------------------------------------------------------------------------------
 */

typedef struct progress {
    bool on;
    double t0, last;
    uint64_t done, total;
} progress;

static void progress_tick(progress *pg, const char *name, uint64_t add)
{
    pg->done += add;
    if (!pg->on) return;
    double t = now_s();
    if (t - pg->last < 0.2 && pg->done < pg->total) return;
    pg->last = t;
    double rate = (double)pg->done / (t - pg->t0 + 1e-9);
    double eta = rate > 0 ? (double)(pg->total - pg->done) / rate : 0;
    char nm[41];
    mxst_show(nm, sizeof nm, name, sizeof nm - 4); /* stderr is a terminal here */
    fprintf(stderr, "\r\033[K%5.1f%%  %s/s  ETA %.0fs  %s",
            pg->total ? 100.0 * (double)pg->done / (double)pg->total : 100.0, HUMAN(rate), eta, nm);
}

static void progress_end(progress *pg)
{
    if (pg->on) fprintf(stderr, "\r\033[K");
}

typedef struct bufs {
    unsigned char *in, *out, *aux;
    float *f32, *sc;
    size_t in_cap, out_cap, aux_cap, f32_cap, sc_cap;
} bufs;

static int grow(void **p, size_t *cap, size_t need)
{
    if (need == 0) need = 1; /* realloc(p, 0) may free p and return NULL */
    if (need <= *cap && *p) return 0;
    void *q = realloc(*p, need);
    if (!q) return err(EXIT_IO, "out of memory (%zu byte%s)", need, MXST_PLURAL(need));
    *p = q;
    *cap = need;
    return 0;
}
#define GROW(b, field, need) grow((void **)&(b)->field, &(b)->field##_cap, (need))

static void free_bufs(bufs *b)
{
    free(b->in);
    free(b->out);
    free(b->aux);
    free(b->f32);
    free(b->sc);
}

typedef struct ctx {
    const mxst_file *f;
    mxst_writer *w;
    mxp_convert_opts copts;
    bufs b;
    progress *pg;
} ctx;

static int st_fail(mxp_status s, const char *what)
{
    (void)what;
    return err(code_of(s), "%s", mxst_last_error());
}

static int lib_fail(const ctx *c, const item *it, mxp_status s)
{
    /* mixprec library failures on data: a non-finite weight is a bad input file */
    int code = s == MXP_ENOMEM                              ? EXIT_IO
               : (s == MXP_EINVAL || s == MXP_EUNSUPPORTED) ? EXIT_BADFILE
                                                            : EXIT_IO;
    return err(code, "%s: tensor '%s': %s (rule: finite)", mxst_path(c->f), SHOWN(it->src->name),
               CLEAN(lib_error()));
}

static int put(ctx *c, const item *it, const void *buf, size_t len)
{
    mxp_status s = mxst_writer_write(c->w, buf, len);
    if (s) return st_fail(s, "write");
    progress_tick(c->pg, it->name, len);
    return 0;
}

static int run_copy(ctx *c, const item *it)
{
    const mxst_tensor *t = it->src;
    for (uint64_t off = 0; off < t->nbytes;) {
        size_t n = t->nbytes - off < CHUNK ? (size_t)(t->nbytes - off) : CHUNK;
        int rc = GROW(&c->b, in, n);
        if (rc) return rc;
        mxp_status s = mxst_read(c->f, t, off, c->b.in, n);
        if (s) return st_fail(s, "read");
        if ((rc = put(c, it, c->b.in, n))) return rc;
        off += n;
    }
    return 0;
}

static int run_convert(ctx *c, const item *it)
{
    const mxst_tensor *t = it->src;
    mxp_dtype from, to;
    mxst_dtype_to_mxp(t->dtype, &from);
    mxst_dtype_to_mxp(it->dtype, &to);
    size_t es = mxp_dtype_size(from), os = mxp_dtype_size(to);
    size_t per = CHUNK / es;
    for (uint64_t e = 0; e < t->numel;) {
        size_t n = t->numel - e < per ? (size_t)(t->numel - e) : per;
        int rc = GROW(&c->b, in, n * es);
        if (!rc) rc = GROW(&c->b, out, n * os);
        if (rc) return rc;
        mxp_status s = mxst_read(c->f, t, e * es, c->b.in, n * es);
        if (s) return st_fail(s, "read");
        s = mxp_convert_ex(c->b.out, to, c->b.in, from, n, &c->copts);
        if (s) return lib_fail(c, it, s);
        if ((rc = put(c, it, c->b.out, n * os))) return rc;
        e += n;
    }
    return 0;
}

/* Rows per piece for row-wise work on `cols` elements of `es` bytes. A row costs at least the
 * 4 bytes of its scale, so rows of no elements still come CHUNK / 4 to a piece (not one: a
 * [2^40, 0] tensor looped for hours); callers also skip tensors of no elements outright, as even
 * CHUNK / 4 rows a piece is 2^18 pieces for nothing there. */
static uint64_t rows_per_piece(uint64_t cols, size_t es)
{
    uint64_t rb = cols * es;
    if (rb < 4) rb = 4;
    uint64_t r = CHUNK / rb;
    return r ? r : 1;
}

static int run_dequant(ctx *c, const item *it)
{
    const mxst_tensor *t = it->src, *st = it->scale;
    mxp_dtype to;
    mxst_dtype_to_mxp(it->dtype, &to);
    size_t os = mxp_dtype_size(to);
    uint64_t rows = it->rows, cols = it->cols;
    uint64_t qrow = it->sch == SCH_INT4 ? (cols + 1) / 2 : cols; /* bytes per stored row */
    uint64_t nblk = (cols + 31) / 32;
    /* No elements (any number of empty rows): the output is empty, its header says it all. */
    if (rows == 0 || cols == 0) return 0;
    uint64_t per = rows_per_piece(cols, 4);
    bool per_tensor = st->numel == 1 && rows != 1;
    float s1 = 0;
    if (per_tensor) {
        mxp_status s = mxst_read(c->f, st, 0, &s1, 4);
        if (s) return st_fail(s, "read");
    }
    for (uint64_t r0 = 0; r0 < rows;) {
        uint64_t nr = rows - r0 < per ? rows - r0 : per;
        size_t ne = (size_t)(nr * cols);
        int rc = GROW(&c->b, in, (size_t)(nr * qrow));
        if (!rc) rc = GROW(&c->b, f32, ne * 4 + 4);
        if (!rc) rc = GROW(&c->b, out, ne * os + 1);
        if (!rc) rc = GROW(&c->b, aux, (size_t)(nr * (it->sch == SCH_MXFP8 ? nblk : 4)) + 4);
        if (rc) return rc;
        mxp_status s = mxst_read(c->f, t, r0 * qrow, c->b.in, (size_t)(nr * qrow));
        if (!s && !per_tensor)
            s = it->sch == SCH_MXFP8 ? mxst_read(c->f, st, r0 * nblk, c->b.aux, (size_t)(nr * nblk))
                                     : mxst_read(c->f, st, r0 * 4, c->b.aux, (size_t)(nr * 4));
        if (s) return st_fail(s, "read");
        float *y = c->b.f32;
        if (it->sch == SCH_INT8 || it->sch == SCH_INT4) {
            for (uint64_t r = 0; r < nr; r++) {
                const unsigned char *q = c->b.in + r * qrow;
                for (uint64_t j = 0; j < cols; j++) {
                    int v;
                    if (it->sch == SCH_INT8) {
                        v = (int)(int8_t)q[j];
                    } else {
                        unsigned nib = (q[j / 2] >> (4 * (j & 1))) & 0xF;
                        v = nib >= 8 ? (int)nib - 16 : (int)nib;
                    }
                    y[r * cols + j] = (float)v;
                }
            }
        } else {
            mxp_dtype fmt = t->dtype == MXST_F8_E5M2 ? MXP_FLOAT8_E5M2 : MXP_FLOAT8_E4M3FN;
            s = mxp_convert(y, MXP_FLOAT32, c->b.in, fmt, ne);
            if (s) return lib_fail(c, it, s);
        }
        for (uint64_t r = 0; r < nr; r++) {
            float *yr = y + r * cols;
            if (it->sch == SCH_MXFP8) {
                const unsigned char *e = c->b.aux + r * nblk;
                for (uint64_t j = 0; j < cols; j++) {
                    unsigned ex = e[j / 32];
                    yr[j] = ex == 0xFF ? NAN : yr[j] * ldexpf(1.0f, (int)ex - 127);
                }
            } else {
                float sc;
                if (per_tensor)
                    sc = s1;
                else
                    memcpy(&sc, c->b.aux + 4 * r, 4);
                for (uint64_t j = 0; j < cols; j++) yr[j] = yr[j] * sc;
            }
        }
        s = mxp_convert_ex(c->b.out, to, y, MXP_FLOAT32, ne, &c->copts);
        if (s) return lib_fail(c, it, s);
        if ((rc = put(c, it, c->b.out, ne * os))) return rc;
        r0 += nr;
    }
    return 0;
}

#if MXP_TOOL_QUANT
/* Quantize rows [r0, r0+nr) of it->src into c->b.out (data) and c->b.sc / c->b.aux (scales). */
static int quant_rows(ctx *c, const item *it, uint64_t r0, uint64_t nr, size_t *qbytes)
{
    const mxst_tensor *t = it->src;
    mxp_dtype xt;
    mxst_dtype_to_mxp(t->dtype, &xt);
    size_t es = mxp_dtype_size(xt);
    uint64_t cols = it->cols;
    size_t ne = (size_t)(nr * cols);
    uint64_t qrow = it->sch == SCH_INT4 ? (cols + 1) / 2 : cols;
    int rc = GROW(&c->b, in, ne * es);
    if (!rc) rc = GROW(&c->b, out, (size_t)(nr * qrow) + 1);
    if (!rc) rc = GROW(&c->b, sc, (size_t)nr * 4 + 4);
    if (!rc) rc = GROW(&c->b, aux, (size_t)(nr * ((cols + 31) / 32)) + 4);
    if (rc) return rc;
    mxp_status s = mxst_read(c->f, t, r0 * cols * es, c->b.in, ne * es);
    if (s) return st_fail(s, "read");
    mxp_qlayout l = {(size_t)nr, (size_t)cols, MXP_QAXIS_ROW, 0};
    switch (it->sch) {
    case SCH_INT8:
        s = mxp_quantize_int8((int8_t *)c->b.out, c->b.sc, c->b.in, xt, &l);
        break;
    case SCH_INT4:
        s = mxp_quantize_int4(c->b.out, c->b.sc, c->b.in, xt, &l);
        break;
    case SCH_FP8:
        s = mxp_quantize_fp8(c->b.out, MXP_FLOAT8_E4M3FN, c->b.sc, c->b.in, xt, &l);
        break;
    case SCH_MXFP8:
        s = mxp_quantize_mx(c->b.out, MXP_FLOAT8_E4M3FN, c->b.aux, c->b.in, xt, (size_t)nr,
                            (size_t)cols, MXP_MX_RCEIL);
        break;
    default:
        s = MXP_EINVAL;
    }
    if (s) return lib_fail(c, it, s);
    if (it->sch != SCH_MXFP8) /* multipliers in -> dequantization multipliers out */
        for (uint64_t r = 0; r < nr; r++) c->b.sc[r] = 1.0f / c->b.sc[r];
    *qbytes = (size_t)(nr * qrow);
    return 0;
}
#endif

static int run_quant(ctx *c, const item *it)
{
#if MXP_TOOL_QUANT
    mxp_dtype xt;
    mxst_dtype_to_mxp(it->src->dtype, &xt);
    /* never empty: choose_scheme keeps tensors of no elements, which have no scale to compute */
    if (it->rows == 0 || it->cols == 0)
        return err(EXIT_BADFILE, "tensor '%s': no elements to quantize", SHOWN(it->name));
    uint64_t per = rows_per_piece(it->cols, mxp_dtype_size(xt));
    for (uint64_t r0 = 0; r0 < it->rows;) {
        uint64_t nr = it->rows - r0 < per ? it->rows - r0 : per;
        size_t qb = 0;
        int rc = quant_rows(c, it, r0, nr, &qb);
        if (rc) return rc;
        if (it->op == OP_QDATA)
            rc = put(c, it, c->b.out, qb);
        else if (it->sch == SCH_MXFP8)
            rc = put(c, it, c->b.aux, (size_t)(nr * ((it->cols + 31) / 32)));
        else
            rc = put(c, it, c->b.sc, (size_t)nr * 4);
        if (rc) return rc;
        r0 += nr;
    }
    return 0;
#else
    (void)c;
    return err(EXIT_USAGE, "tensor '%s': this build has no quantization (quant.h)",
               SHOWN(it->name));
#endif
}

static int run_item(ctx *c, const item *it)
{
    switch (it->op) {
    case OP_COPY:
        return run_copy(c, it);
    case OP_CONVERT:
        return run_convert(c, it);
    case OP_DEQUANT:
        return run_dequant(c, it);
    case OP_QDATA:
    case OP_QSCALE:
        return run_quant(c, it);
    case OP_QSHAPE: {
        unsigned char b[8 * 64];
        size_t nd = it->src->ndim > 64 ? 64 : it->src->ndim;
        for (size_t d = 0; d < nd; d++)
            for (int k = 0; k < 8; k++)
                b[8 * d + (size_t)k] = (unsigned char)(it->src->shape[d] >> (8 * k));
        return put(c, it, b, nd * 8);
    }
    }
    return 0;
}

static void print_plan(const plan *p, size_t nshards, const char *out_path)
{
    uint64_t in_total = 0, out_total = 0;
    /* columns: name, source dtype and shape, target dtype and shape, bytes in and out (two
     * passes, see text_width); the rule last, unpadded */
    int w[7] = {0};
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < p->n; i++) {
            const item *it = &p->it[i];
            const bool follower = it->op == OP_QSCALE || it->op == OP_QSHAPE;
            char shp[256] = "", oshp[256], ibs[24], obs[24];
            if (!follower) shape_str(shp, sizeof shp, it->src->shape, it->src->ndim);
            shape_str(oshp, sizeof oshp, it->shape, it->ndim);
            uint64_t ib = follower ? 0 : it->src->nbytes;
            if (it->op == OP_DEQUANT) ib += it->scale->nbytes;
            uint64_t ob = item_bytes(it);
            snprintf(ibs, sizeof ibs, "%llu", (unsigned long long)ib);
            snprintf(obs, sizeof obs, "%llu", (unsigned long long)ob);
            const char *sdt = follower ? "-" : mxst_dtype_name(it->src->dtype);
            const char *cell[7] = {SHOWN(it->name), sdt, shp, mxst_dtype_name(it->dtype), oshp,
                                   ibs, obs};
            if (!pass) {
                for (int k = 0; k < 7; k++) fit(&w[k], cell[k]);
                continue;
            }
            in_total += ib;
            out_total += ob;
            printf("%-*s  %-*s %-*s -> %-*s %-*s  %*s -> %*s byte%-1s  (%s)", pad_to(cell[0], w[0]),
                   cell[0], w[1], cell[1], w[2], cell[2], w[3], cell[3], w[4], cell[4], w[5],
                   cell[5], w[6], cell[6], MXST_PLURAL(ob), CLEAN(it->rule));
            if (nshards > 1) printf(" [shard %zu]", it->shard + 1);
            putchar('\n');
        }
    }
    printf("total: %zu tensor%s, %s -> %s of tensor data (%.3fx), %zu output file%s: %s\n", p->n,
           MXST_PLURAL(p->n), HUMAN(in_total), HUMAN(out_total),
           in_total ? (double)out_total / (double)in_total : 1.0, nshards, MXST_PLURAL(nshards),
           out_path);
}

/* Shard file name i (0-based) of n for an index path ".../X.safetensors.index.json". */
static char *shard_name(const char *index_path, size_t i, size_t n, bool full)
{
    const char *slash = strrchr(index_path, '/');
    size_t dirlen = slash ? (size_t)(slash - index_path) + 1 : 0;
    const char *base = index_path + dirlen;
    size_t bl = strlen(base);
    size_t stem = name_len_suffix(base, ".safetensors.index.json");
    if (!stem) stem = name_len_suffix(base, ".index.json");
    if (!stem) stem = name_len_suffix(base, ".json");
    if (!stem) stem = bl;
    size_t cap = dirlen + stem + 64;
    char *s = malloc(cap);
    if (!s) return NULL;
    size_t j = 0;
    if (full) {
        memcpy(s, index_path, dirlen);
        j = dirlen;
    }
    memcpy(s + j, base, stem);
    j += stem;
    snprintf(s + j, cap - j, "-%05zu-of-%05zu.safetensors", i + 1, n);
    return s;
}

/* Write the plan to OUT (one file, or shards + index). */
static int execute(const mxst_file *f, plan *p, const char *out_path, const opts *o,
                   const char *const *meta, size_t nmeta, bool out_exists)
{
    bool sharded = ends_with(out_path, ".json");
    uint64_t max_shard = 0;
    if (o->max_shard) {
        if (!sharded)
            return err(EXIT_USAGE,
                       "--max-shard-size needs an index OUT (*.safetensors.index.json)");
        if (!mxst_parse_size(o->max_shard, &max_shard) || max_shard == 0)
            return err(EXIT_USAGE,
                       "--max-shard-size '%s': expected a size with a unit, e.g. "
                       "5GB, 500MB, 2GiB, 4096B",
                       o->max_shard);
    } else if (sharded) {
        max_shard = 5000000000ull; /* transformers' default "5GB" */
    }
    /* shards: greedy in plan order; a quantized tensor's scale / shape stay with it */
    size_t nshards = 1;
    uint64_t cur = 0;
    for (size_t i = 0; i < p->n; i++) {
        uint64_t b = item_bytes(&p->it[i]);
        bool follower = p->it[i].op == OP_QSCALE || p->it[i].op == OP_QSHAPE;
        if (sharded && cur > 0 && !follower && cur + b > max_shard) {
            nshards++;
            cur = 0;
        }
        p->it[i].shard = nshards - 1;
        cur += b;
    }
    char **paths = calloc(nshards, sizeof *paths);
    bool *exists = calloc(nshards, sizeof *exists); /* dry run: the shards that exist */
    if (!paths || !exists) {
        free(paths);
        free(exists);
        return err(EXIT_IO, "out of memory");
    }
    int rc = 0;
    for (size_t s = 0; s < nshards && !rc; s++) {
        paths[s] = sharded ? shard_name(out_path, s, nshards, true) : strdup(out_path);
        if (!paths[s])
            rc = err(EXIT_IO, "out of memory");
        else if (sharded)
            rc = check_out_path(paths[s], f, mxst_path(f), o->force, o->dry_run ? &exists[s] : NULL);
    }
    if (!rc && o->dry_run) {
        print_plan(p, nshards, out_path);
        if (out_exists) print_exists_note(out_path);
        for (size_t s = 0; s < nshards; s++)
            if (exists[s]) print_exists_note(paths[s]);
    }
    free(exists);
    if (rc || o->dry_run) goto done;

    progress pg = {0};
    pg.on = !o->quiet && isatty(2);
    pg.t0 = pg.last = now_s();
    for (size_t i = 0; i < p->n; i++) pg.total += item_bytes(&p->it[i]);
    mxst_writer **ws = calloc(nshards, sizeof *ws);
    if (!ws) {
        rc = err(EXIT_IO, "out of memory");
        goto done;
    }
    ctx c;
    memset(&c, 0, sizeof c);
    c.f = f;
    c.pg = &pg;
    c.copts.saturate = o->saturate;
    c.copts.threads = o->threads > 0 ? o->threads : default_threads();
    unsigned wflags = o->force ? MXST_OVERWRITE : 0;
    for (size_t s = 0; s < nshards && !rc; s++) {
        size_t cnt = 0;
        for (size_t i = 0; i < p->n; i++) cnt += p->it[i].shard == s;
        mxst_spec *specs = calloc(cnt ? cnt : 1, sizeof *specs);
        size_t *map = calloc(cnt ? cnt : 1, sizeof *map);
        if (!specs || !map) {
            free(specs);
            free(map);
            rc = err(EXIT_IO, "out of memory");
            break;
        }
        size_t k = 0;
        for (size_t i = 0; i < p->n; i++) {
            if (p->it[i].shard != s) continue;
            specs[k] = (mxst_spec){p->it[i].name, p->it[i].dtype, p->it[i].ndim, p->it[i].shape};
            map[k++] = i;
        }
        mxp_status st = mxst_writer_begin(paths[s], specs, cnt, meta, nmeta, wflags, &ws[s]);
        free(specs);
        if (st) {
            rc = st == MXP_EEXIST
                     ? err(EXIT_USAGE, "%s", mxst_last_error())
                     : err(st == MXP_EINVAL ? EXIT_BADFILE : code_of(st), "%s", mxst_last_error());
            free(map);
            break;
        }
        c.w = ws[s];
        for (size_t j = 0; j < cnt && !rc; j++) {
            size_t pi = map[mxst_writer_order(ws[s], j)];
            rc = run_item(&c, &p->it[pi]);
        }
        free(map);
        if (!rc) {
            st = mxst_writer_finish(ws[s]);
            if (st) rc = err(code_of(st), "%s", mxst_last_error());
        }
    }
    progress_end(&pg);
    if (!rc) {
        /* every shard is complete and synced: put them in place, then the index */
        for (size_t s = 0; s < nshards && !rc; s++) {
            mxp_status st = mxst_writer_commit(ws[s]);
            ws[s] = NULL;
            if (st) {
                rc = err(st == MXP_EEXIST ? EXIT_USAGE : code_of(st), "%s", mxst_last_error());
                /* nothing is left on failure: the shards already in place go, as when the index fails */
                for (size_t k = 0; k < s; k++) unlink(paths[k]);
            }
        }
        if (!rc && sharded) {
            const char **names = calloc(p->n ? p->n : 1, sizeof *names);
            const char **shn = calloc(p->n ? p->n : 1, sizeof *shn);
            char **base = calloc(nshards, sizeof *base);
            uint64_t total = 0;
            if (names && shn && base) {
                for (size_t s = 0; s < nshards; s++)
                    base[s] = shard_name(out_path, s, nshards, false);
                for (size_t i = 0; i < p->n; i++) {
                    names[i] = p->it[i].name;
                    shn[i] = base[p->it[i].shard];
                    total += item_bytes(&p->it[i]);
                }
                char *text = mxst_index_json(names, shn, p->n, total);
                if (!text)
                    rc = err(EXIT_IO, "out of memory");
                else {
                    mxp_status st = mxst_write_small_file(out_path, text, strlen(text), wflags);
                    if (st)
                        rc = err(st == MXP_EEXIST ? EXIT_USAGE : code_of(st), "%s",
                                 mxst_last_error());
                    free(text);
                }
                for (size_t s = 0; s < nshards; s++) free(base[s]);
            } else {
                rc = err(EXIT_IO, "out of memory");
            }
            free(names);
            free(shn);
            free(base);
            if (rc) /* the index failed: take the shards back out */
                for (size_t s = 0; s < nshards; s++) unlink(paths[s]);
        }
    }
    for (size_t s = 0; s < nshards; s++) mxst_writer_abort(ws[s]);
    free(ws);
    free_bufs(&c.b);
    if (!rc && !o->quiet) {
        double dt = now_s() - pg.t0;
        fprintf(stderr, "wrote %s: %zu tensor%s, %s in %.2f s (%s/s)\n", out_path, p->n,
                MXST_PLURAL(p->n), HUMAN(pg.total), dt,
                HUMAN((double)pg.total / (dt > 0 ? dt : 1e-9)));
    }
done:
    for (size_t s = 0; s < nshards; s++) free(paths[s]);
    free(paths);
    return rc;
}

static int metadata_pairs(const mxst_file *f, const char ***out, size_t *n)
{
    size_t m = mxst_metadata_count(f);
    const char **kv = calloc(2 * m + 2, sizeof *kv);
    if (!kv) return err(EXIT_IO, "out of memory");
    for (size_t i = 0; i < m; i++) mxst_metadata_at(f, i, &kv[2 * i], &kv[2 * i + 1]);
    *out = kv;
    *n = m;
    return 0;
}

static int convert_common(int argc, char **argv, bool quant)
{
    opts o;
    int rc = parse_opts(argc, argv,
                        quant ? "scheme map keep dry-run force threads quiet max-shard-size"
                              : "policy map saturate dry-run force threads quiet max-shard-size",
                        2, &o);
    if (rc) return rc;
    if (o.help) return fputs(quant ? HELP_QUANTIZE : HELP_CAST, stdout), 0;
    if (o.npos != 2) return err(EXIT_USAGE, "expected IN and OUT (see --help)");
    g_quiet = o.quiet;
    scheme sch = SCH_NONE;
    if (quant) {
        if (!o.scheme) return err(EXIT_USAGE, "--scheme int8|int4|fp8|mxfp8 is required");
        if (!parse_scheme(o.scheme, &sch))
            return err(EXIT_USAGE, "--scheme '%s': expected int8, int4, fp8 or mxfp8", o.scheme);
#if !MXP_TOOL_QUANT
        return err(EXIT_USAGE, "this build has no quantization (quant.h)");
#endif
    }
    if (!little_endian()) return err(EXIT_USAGE, "big-endian hosts are not supported");
    const char *in = o.pos[0], *out = o.pos[1];
    mxp_policy_map *m = NULL;
    if ((rc = load_map(&o, &m, !quant))) return rc;
    regs rg = {.n = 0};
    if (quant && (rc = compile_keep(&o, &rg))) {
        mxp_policy_map_free(m);
        return rc;
    }
    install_signals();
    mxst_file *f = NULL;
    plan p = {0};
    const char **kv = NULL;
    size_t nkv = 0;
    bool out_exists = false; /* dry run without --force: OUT exists (a note, not an error) */
    if ((rc = open_in(in, false, &f))) goto out;
    if ((rc = check_out_path(out, f, in, o.force, o.dry_run ? &out_exists : NULL))) goto out;
    rc = quant ? plan_quantize(f, sch, m, &rg, &o, &p) : plan_cast(f, m, o.saturate, &p);
    if (rc) goto out;
    if ((rc = metadata_pairs(f, &kv, &nkv))) goto out;
    rc = execute(f, &p, out, &o, kv, nkv, out_exists);
out:
    free(kv);
    plan_free(&p);
    mxst_close(f);
    free_keep(&rg);
    mxp_policy_map_free(m);
    return rc;
}

/* ---- report -----------------------------------------------------------------------------------
 */

typedef struct stat_row {
    const mxst_tensor *t;
    char target[32];
    double max_abs, sum_x2, sum_e2;
    uint64_t overflow, flushed, nonfinite_in;
} stat_row;

static void accumulate(stat_row *r, const double *x, const double *y, size_t n, double maxfin)
{
    for (size_t i = 0; i < n; i++) {
        double a = x[i], b = y[i];
        if (!isfinite(a)) {
            r->nonfinite_in++;
            continue;
        }
        if (!isfinite(b) || (maxfin > 0 && fabs(b) == maxfin && fabs(a) > maxfin)) r->overflow++;
        if (a != 0 && b == 0) r->flushed++;
        double e = isfinite(b) ? fabs(b - a) : (double)INFINITY;
        if (e > r->max_abs) r->max_abs = e;
        r->sum_x2 += a * a;
        r->sum_e2 += e * e;
    }
}

static double sqnr_db(const stat_row *r)
{
    if (r->sum_e2 == 0) return (double)INFINITY;
    if (!isfinite(r->sum_e2)) return -(double)INFINITY;
    if (r->sum_x2 == 0) return -(double)INFINITY;
    return 10.0 * log10(r->sum_x2 / r->sum_e2);
}

static double rel_l2(const stat_row *r)
{
    if (r->sum_e2 == 0) return 0;
    if (r->sum_x2 == 0) return (double)INFINITY;
    return sqrt(r->sum_e2) / sqrt(r->sum_x2);
}

static int cmp_rows(const void *a, const void *b)
{
    const stat_row *x = a, *y = b;
    double sx = sqnr_db(x), sy = sqnr_db(y);
    if (sx != sy) return sx < sy ? -1 : 1;
    if (x->overflow != y->overflow) return x->overflow > y->overflow ? -1 : 1;
    if (x->flushed != y->flushed) return x->flushed > y->flushed ? -1 : 1;
    return strcmp(x->t->name, y->t->name);
}

static double max_finite(mxp_dtype d)
{
    switch (d) {
    case MXP_FLOAT16:
        return 65504.0;
    case MXP_BFLOAT16:
        return 3.3895313892515355e38;
    case MXP_FLOAT8_E4M3FN:
        return 448.0;
    case MXP_FLOAT8_E5M2:
        return 57344.0;
    default:
        return 0; /* float32 / float64 targets: overflow shows as inf */
    }
}

/* Evaluate one tensor: x (the source widened exactly to float64) against y (the source through
 * the target, widened exactly to float64). A cast goes straight from the source dtype to the
 * target (one rounding, as `cast` does); a scheme quantizes and dequantizes to float32. */
static int report_tensor(const mxst_file *f, stat_row *r, mxp_dtype target, scheme sch, bufs *b)
{
    const mxst_tensor *t = r->t;
    mxp_dtype xt;
    mxst_dtype_to_mxp(t->dtype, &xt);
    size_t es = mxp_dtype_size(xt);
    /* nothing to measure (and no row count to divide by); choose_scheme keeps these anyway */
    if (t->numel == 0) return 0;
    uint64_t rows = sch == SCH_NONE ? 1 : t->shape[0];
    uint64_t cols = sch == SCH_NONE ? t->numel : t->numel / rows;
    uint64_t per = sch == SCH_NONE ? 1 : rows_per_piece(cols, es);
    uint64_t piece = CHUNK / 8;
    for (uint64_t e0 = 0; e0 < t->numel;) {
        size_t n;
        uint64_t nr = 0;
        if (sch == SCH_NONE) {
            n = t->numel - e0 < piece ? (size_t)(t->numel - e0) : (size_t)piece;
        } else {
            uint64_t r0 = e0 / cols;
            nr = rows - r0 < per ? rows - r0 : per;
            n = (size_t)(nr * cols);
        }
        /* in: source bytes; out: x (n doubles) then y (n doubles); f32: n floats; aux: q */
        int rc = GROW(b, in, n * es);
        if (!rc) rc = GROW(b, out, n * 16 + 16);
        if (!rc) rc = GROW(b, f32, n * 8 + 8);
        if (!rc) rc = GROW(b, aux, 2 * n + 64);
        if (!rc) rc = GROW(b, sc, (size_t)nr * 4 + 4);
        if (rc) return rc;
        mxp_status s = mxst_read(f, t, e0 * es, b->in, n * es);
        if (s) return st_fail(s, "read");
        double *x = (double *)(void *)b->out, *y = x + n;
        s = mxp_convert(x, MXP_FLOAT64, b->in, xt, n);
        double maxfin = 0;
        if (!s && sch == SCH_NONE) {
            /* the narrow values go to f32's buffer (n * 8 bytes hold any dtype) */
            s = mxp_convert(b->f32, target, b->in, xt, n);
            if (!s) s = mxp_convert(y, MXP_FLOAT64, b->f32, target, n);
            maxfin = max_finite(target);
        } else if (!s) {
#if MXP_TOOL_QUANT
            /* The quantizers refuse NaN and inf (so does `quantize`), but report counts them
             * apart and measures the other values (docs/cli.md): a zero in their place leaves
             * every row's amax and block's maximum as the finite values make them. All-zero
             * bytes are +0 in F32, F16 and BF16, the dtypes choose_scheme quantizes. */
            for (size_t i = 0; i < n; i++)
                if (!isfinite(x[i])) memset(b->in + i * es, 0, es);
            mxp_qlayout l = {(size_t)nr, (size_t)cols, MXP_QAXIS_ROW, 0};
            unsigned char *q = b->aux;
            float *y32 = b->f32;
            switch (sch) {
            case SCH_INT8:
                s = mxp_quantize_int8((int8_t *)q, b->sc, b->in, xt, &l);
                if (!s) s = mxp_dequantize_int8(y32, MXP_FLOAT32, (int8_t *)q, b->sc, &l);
                break;
            case SCH_INT4:
                s = mxp_quantize_int4(q, b->sc, b->in, xt, &l);
                if (!s) s = mxp_dequantize_int4(y32, MXP_FLOAT32, q, b->sc, &l);
                break;
            case SCH_FP8:
                s = mxp_quantize_fp8(q, MXP_FLOAT8_E4M3FN, b->sc, b->in, xt, &l);
                if (!s) s = mxp_dequantize_fp8(y32, MXP_FLOAT32, q, MXP_FLOAT8_E4M3FN, b->sc, &l);
                break;
            case SCH_MXFP8: {
                unsigned char *e8 = q + n;
                s = mxp_quantize_mx(q, MXP_FLOAT8_E4M3FN, e8, b->in, xt, (size_t)nr, (size_t)cols,
                                    MXP_MX_RCEIL);
                if (!s)
                    s = mxp_dequantize_mx(y32, MXP_FLOAT32, q, MXP_FLOAT8_E4M3FN, e8, (size_t)nr,
                                          (size_t)cols);
                break;
            }
            default:
                s = MXP_EINVAL;
            }
            if (!s) s = mxp_convert(y, MXP_FLOAT64, y32, MXP_FLOAT32, n);
#else
            return err(EXIT_USAGE, "this build has no quantization (quant.h)");
#endif
        }
        if (s) {
            int code = s == MXP_ENOMEM ? EXIT_IO : EXIT_BADFILE;
            return err(code, "%s: tensor '%s': %s (rule: finite)", mxst_path(f), SHOWN(t->name),
                       CLEAN(lib_error()));
        }
        accumulate(r, x, y, n, maxfin);
        e0 += n;
    }
    return 0;
}

/* A line of report's table: tensor, dtype and target left-aligned, the numbers right-aligned. */
static void report_line(const char *const cell[8], const int w[8])
{
    for (int k = 0; k < 8; k++)
        printf("%s%*s", k ? "  " : "", k < 3 ? -pad_to(cell[k], w[k]) : w[k], cell[k]);
    putchar('\n');
}

static int cmd_report(int argc, char **argv)
{
    opts o;
    int rc = parse_opts(argc, argv, "dtype scheme map json", 1, &o);
    if (rc) return rc;
    if (o.help) return fputs(HELP_REPORT, stdout), 0;
    if (o.npos != 1) return err(EXIT_USAGE, "expected one input file (see --help)");
    if (!o.dtype == !o.scheme) return err(EXIT_USAGE, "give --dtype D or --scheme S (one of them)");
    mxp_dtype target = MXP_FLOAT32;
    scheme sch = SCH_NONE;
    if (o.dtype) {
        if (mxp_dtype_parse(o.dtype, &target) != MXP_OK)
            return err(EXIT_USAGE, "--dtype: %s", lib_error());
        if (!mxp_dtype_is_floating(target))
            return err(EXIT_USAGE, "--dtype %s: expected a floating dtype", o.dtype);
    } else if (!parse_scheme(o.scheme, &sch)) {
        return err(EXIT_USAGE, "--scheme '%s': expected int8, int4, fp8 or mxfp8", o.scheme);
    }
#if !MXP_TOOL_QUANT
    if (sch != SCH_NONE) return err(EXIT_USAGE, "this build has no quantization (quant.h)");
#endif
    mxp_policy_map *m = NULL;
    if (o.map && (rc = load_map(&o, &m, false))) return rc;
    mxst_file *f;
    if ((rc = open_in(o.pos[0], false, &f))) {
        mxp_policy_map_free(m);
        return rc;
    }
    size_t n = mxst_count(f), nr = 0;
    stat_row *rows = calloc(n ? n : 1, sizeof *rows);
    regs rg = {.n = 0};
    bufs b;
    memset(&b, 0, sizeof b);
    if (!rows) rc = err(EXIT_IO, "out of memory");
    if (!rc && sch != SCH_NONE) rc = compile_keep(&o, &rg);
    for (size_t i = 0; i < n && !rc; i++) {
        const mxst_tensor *t = mxst_tensor_at(f, i);
        mxp_dtype xt;
        if (!mxst_dtype_to_mxp(t->dtype, &xt) || !mxp_dtype_is_floating(xt)) continue;
        mxp_dtype tg = target;
        scheme ts = sch;
        if (sch != SCH_NONE) {
            char why[200];
            if ((rc = choose_scheme(t, sch, m, &rg, &o, &ts, why, sizeof why))) break;
            if (ts == SCH_NONE) continue; /* kept: no error */
        } else if (m) {
            mxp_policy pol;
            const char *key;
            if ((rc = lookup(m, t->name, &pol, &key))) break;
            if (key) tg = pol.param;
        }
        if (xt == MXP_FLOAT64 && ts == SCH_NONE && tg == MXP_FLOAT64) continue;
        stat_row *r = &rows[nr++];
        r->t = t;
        if (ts != SCH_NONE)
            snprintf(r->target, sizeof r->target, "%s", scheme_name(ts));
        else {
            mxst_dtype sd;
            mxst_dtype_from_mxp(tg, &sd);
            snprintf(r->target, sizeof r->target, "%s", mxst_dtype_name(sd));
        }
        rc = report_tensor(f, r, tg, ts, &b);
    }
    if (!rc) {
        qsort(rows, nr, sizeof *rows, cmp_rows);
        if (o.json) {
            printf("[");
            for (size_t i = 0; i < nr; i++) {
                const stat_row *r = &rows[i];
                printf("%s\n {\"tensor\":", i ? "," : "");
                json_str(stdout, r->t->name);
                printf(",\"dtype\":\"%s\",\"target\":\"%s\",\"elements\":%llu,\"max_abs_err\":",
                       mxst_dtype_name(r->t->dtype), r->target, (unsigned long long)r->t->numel);
                json_num(stdout, r->max_abs);
                printf(",\"rel_l2\":");
                json_num(stdout, rel_l2(r));
                printf(",\"sqnr_db\":");
                json_num(stdout, sqnr_db(r));
                printf(",\"overflow\":%llu,\"flushed_to_zero\":%llu,\"nonfinite_inputs\":%llu}",
                       (unsigned long long)r->overflow, (unsigned long long)r->flushed,
                       (unsigned long long)r->nonfinite_in);
            }
            printf("%s]\n", nr ? "\n" : "");
        } else {
            /* two passes, see text_width */
            const char *head[8] = {"tensor", "dtype",   "target",   "max_abs_err",
                                   "rel_l2", "sqnr_db", "overflow", "flushed"};
            int w[8];
            for (int k = 0; k < 8; k++) w[k] = (int)strlen(head[k]);
            for (int pass = 0; pass < 2; pass++) {
                if (pass) report_line(head, w);
                for (size_t i = 0; i < nr; i++) {
                    const stat_row *r = &rows[i];
                    char num[5][32];
                    snprintf(num[0], sizeof num[0], "%.4g", r->max_abs);
                    snprintf(num[1], sizeof num[1], "%.4g", rel_l2(r));
                    snprintf(num[2], sizeof num[2], "%.2f", sqnr_db(r));
                    snprintf(num[3], sizeof num[3], "%llu", (unsigned long long)r->overflow);
                    snprintf(num[4], sizeof num[4], "%llu", (unsigned long long)r->flushed);
                    const char *cell[8] = {SHOWN(r->t->name), mxst_dtype_name(r->t->dtype),
                                           r->target, num[0], num[1], num[2], num[3], num[4]};
                    if (pass)
                        report_line(cell, w);
                    else
                        for (int k = 0; k < 8; k++) fit(&w[k], cell[k]);
                }
            }
            if (nr == 0) printf("(no floating tensors to report)\n");
        }
        if (fflush(stdout) != 0) rc = err(EXIT_IO, "cannot write the output");
    }
    free_bufs(&b);
    free_keep(&rg);
    free(rows);
    mxst_close(f);
    mxp_policy_map_free(m);
    return rc;
}

/* ---- main ---------------------------------------------------------------------------------------
 */

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(HELP_MAIN, stderr);
        return EXIT_USAGE;
    }
    const char *c = argv[1];
    if (!strcmp(c, "--version") || !strcmp(c, "-V")) {
        printf("mixprec %s (library %s, %s kernels)\n", MXP_VERSION_STRING, mxp_version(),
               mxp_isa());
        return 0;
    }
    if (!strcmp(c, "--help") || !strcmp(c, "-h") || !strcmp(c, "help")) {
        fputs(HELP_MAIN, stdout);
        return 0;
    }
    g_cmd = c;
    if (!strcmp(c, "inspect")) return cmd_inspect(argc, argv);
    if (!strcmp(c, "validate")) return cmd_validate(argc, argv);
    if (!strcmp(c, "cast")) return convert_common(argc, argv, false);
    if (!strcmp(c, "quantize")) return convert_common(argc, argv, true);
    if (!strcmp(c, "report")) return cmd_report(argc, argv);
    g_cmd = "mixprec";
    fprintf(stderr, "mixprec: unknown command '%s'\n\n%s", c, HELP_MAIN);
    return EXIT_USAGE;
}
