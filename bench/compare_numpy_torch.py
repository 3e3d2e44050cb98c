#!/usr/bin/python3
"""compare_numpy_torch.py - the conversions of bench_convert.c done by NumPy and PyTorch.

Same operations, sizes and columns as bench/bench_convert (median ns per element, GB/s of bytes
read + written, ratio to a memcpy-equivalent copy of (bytes_in + bytes_out) / 2 measured in the
same run), so the two tables can be read side by side (bench/RESULTS.md).

  NumPy:   np.copyto(dst, src, casting="unsafe") into a preallocated array (what astype does
           without the allocation); float16 only (NumPy has no bfloat16 / float8; ml_dtypes adds
           them and is used when installed).
  PyTorch: dst.copy_(src) into a preallocated tensor (what .to() does without the allocation),
           with torch.set_num_threads(1) and (2); float8 needs torch >= 2.1.
Whatever is not installed is skipped with a note. Usage:
  /usr/bin/python3 bench/compare_numpy_torch.py [--quick] [--csv]
"""
import statistics
import sys
import time

QUICK = "--quick" in sys.argv
CSV = "--csv" in sys.argv
SIZES = [16, 26] if QUICK else [12, 16, 20, 24, 26]

try:
    import numpy as np
except ImportError:  # pragma: no cover - the script is pointless without numpy
    print("numpy not installed: nothing to compare")
    sys.exit(0)

try:
    import ml_dtypes  # type: ignore
except ImportError:
    ml_dtypes = None

try:
    import torch  # type: ignore
except ImportError:
    torch = None


def median_ns(fn, target_s=0.3):
    """Median wall time of fn() in ns, after one warm-up call (about target_s per measurement)."""
    t0 = time.perf_counter_ns()
    fn()
    one = max(time.perf_counter_ns() - t0, 1)
    reps = int(min(201, max(5, target_s * 1e9 / one))) | 1
    samples = []
    for _ in range(reps):
        a = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - a)
    return statistics.median(samples)


_memcpy_cache = {}


def memcpy_ns(bytes_in, bytes_out):
    key = (bytes_in, bytes_out)
    if key not in _memcpy_cache:
        nbytes = max((bytes_in + bytes_out) // 2, 1)
        a = np.ones(nbytes, dtype=np.uint8)
        b = np.zeros(nbytes, dtype=np.uint8)
        _memcpy_cache[key] = median_ns(lambda: np.copyto(b, a))
    return _memcpy_cache[key]


def report(name, lib, threads, n, ns, bytes_in, bytes_out):
    base = memcpy_ns(bytes_in, bytes_out)
    moved = bytes_in + bytes_out
    if CSV:
        print(f"{name},{lib},{threads},{n},{ns / n:.4f},{moved / ns:.2f},{moved / base:.2f},{base / ns:.3f}")
    else:
        lg = n.bit_length() - 1
        print(f"{name:<16} {lib:<10} {threads:2d}  2^{lg:<3d} {ns / n:9.4f} {moved / ns:8.2f} "
              f"{moved / base:8.2f} {base / ns:7.2f}x")
    sys.stdout.flush()


def source_values(n):
    rng = np.random.default_rng(1)
    return (rng.random(n, dtype=np.float32) * 16 - 8).astype(np.float32)


def numpy_rows(n, f32):
    out = []
    np_types = [("f16", np.float16)]
    if ml_dtypes is not None:
        np_types += [("bf16", ml_dtypes.bfloat16), ("e4m3fn", ml_dtypes.float8_e4m3fn),
                     ("e5m2", ml_dtypes.float8_e5m2)]
    for short, dt in np_types:
        narrow = np.empty(n, dtype=dt)
        np.copyto(narrow, f32, casting="unsafe")
        back = np.empty(n, dtype=np.float32)
        sz = np.dtype(dt).itemsize
        out.append((f"f32->{short}", median_ns(lambda: np.copyto(narrow, f32, casting="unsafe")), 4 * n, sz * n))
        out.append((f"{short}->f32", median_ns(lambda: np.copyto(back, narrow, casting="unsafe")), sz * n, 4 * n))
    return out


def torch_rows(n, f32):
    out = []
    src = torch.from_numpy(f32)
    types = [("f16", torch.float16, 2), ("bf16", torch.bfloat16, 2)]
    if hasattr(torch, "float8_e4m3fn"):
        types += [("e4m3fn", torch.float8_e4m3fn, 1), ("e5m2", torch.float8_e5m2, 1)]
    for short, dt, sz in types:
        narrow = torch.empty(n, dtype=dt)
        narrow.copy_(src)
        back = torch.empty(n, dtype=torch.float32)
        out.append((f"f32->{short}", median_ns(lambda: narrow.copy_(src)), 4 * n, sz * n))
        out.append((f"{short}->f32", median_ns(lambda: back.copy_(narrow)), sz * n, 4 * n))
    return out


def main():
    if CSV:
        print("conversion,lib,threads,n,ns_per_elem,gbps,memcpy_gbps,ratio_to_memcpy")
    else:
        print(f"numpy {np.__version__}" + (f", ml_dtypes {ml_dtypes.__version__}" if ml_dtypes else
                                         " (no ml_dtypes: bfloat16/float8 skipped)")
              + (f", torch {torch.__version__}" if torch else " (no torch: skipped)"))
        if torch is not None and not hasattr(torch, "float8_e4m3fn"):
            print("torch has no float8 dtypes (needs >= 2.1): float8 skipped for torch")
        print(f"{'conversion':<16} {'lib':<10} {'th':>2}  {'n':<5} {'ns/elem':>9} {'GB/s':>8} "
              f"{'memcpy':>8} {'ratio':>8}")
    for lg in SIZES:
        n = 1 << lg
        f32 = source_values(n)
        for name, ns, bi, bo in numpy_rows(n, f32):
            report(name, "numpy", 1, n, ns, bi, bo)
        if torch is not None:
            for threads in (1, 2):
                torch.set_num_threads(threads)
                for name, ns, bi, bo in torch_rows(n, f32):
                    report(name, "torch", threads, n, ns, bi, bo)


if __name__ == "__main__":
    main()
