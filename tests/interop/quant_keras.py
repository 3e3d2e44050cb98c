#!/usr/bin/env python3
"""Keras interop for mixprec/quant.h: keras.quantizers.abs_max_quantize (int8, and int4 with
value_range (-8, 7)) and keras.quantizers.pack_int4, bit for bit, through quant_driver.

usage: quant_keras.py QUANT_DRIVER
Needs keras (numpy backend: KERAS_BACKEND=numpy, which also imports scipy and jax) and numpy;
exits 77 (skipped) with a message when they are missing.
Compared: per tensor (axis None), per row (axis -1) and per column (axis 0) layouts of random
float32 matrices of several shapes and magnitudes, plus values whose product x * s lands on
k + 0.5 exactly; the int8 values, the float32 scales (bits), and the packed int4 bytes
(Keras packs along axis 1 here, i.e. along each row: mixprec's layout).
"""
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("KERAS_BACKEND", "numpy")
try:
    import numpy as np
    import keras
    from keras import quantizers
except Exception as e:  # noqa: BLE001 - any import failure means "peer not available"
    print(f"SKIP: keras / numpy not importable ({type(e).__name__}: {e})")
    sys.exit(77)

driver = sys.argv[1]
rng = np.random.default_rng(20261123)
tmp = tempfile.mkdtemp(prefix="mxp-quant-interop-")
fails = 0
checked = 0


def run(*args):
    r = subprocess.run([driver, *map(str, args)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"quant_driver {args}: {r.stderr}")


def ties(x, axis, hi):
    """Overwrite some elements with values whose float32 product with the group's scale is
    k + 0.5 exactly (when such a float32 exists), using numpy float32 arithmetic like Keras."""
    amax = np.max(np.abs(x), axis=axis, keepdims=True)
    s = np.float32(hi) / (amax + np.float32(1e-7))
    s = np.broadcast_to(s, x.shape)
    flat, sf = x.reshape(-1), s.reshape(-1)
    for i in rng.choice(flat.size, size=max(1, flat.size // 4), replace=False):
        k = rng.integers(-hi, hi)
        t = np.float32(k + 0.5)
        c = np.float32(t / sf[i])
        for d in range(-3, 4):
            v = c
            for _ in range(abs(d)):
                v = np.nextafter(v, np.float32(np.inf if d > 0 else -np.inf), dtype=np.float32)
            if np.float32(v * sf[i]) == t:
                flat[i] = v
                break
    return x


for shape in [(1, 1), (1, 7), (3, 5), (8, 33), (17, 64), (64, 9), (5, 1000)]:
    for scale in [1e-3, 1.0, 37.0, 1e30]:
        for axis_name, axis, code in [("tensor", None, 0), ("row", -1, 1), ("col", 0, 2)]:
            for kind, hi in [("int8", 127), ("int4", 7)]:
                x = (rng.standard_normal(shape) * scale).astype(np.float32)
                if rng.integers(0, 2):
                    x = ties(x, axis, hi)  # both sides see the final x (a tie may move amax)
                xin, qout, sout = (os.path.join(tmp, n) for n in ("x", "q", "s"))
                x.tofile(xin)
                run(kind, shape[0], shape[1], code, xin, qout, sout)
                q_k, s_k = quantizers.abs_max_quantize(x, axis=axis, value_range=(-hi, hi) if kind == "int8" else (-8, 7))
                q_k, s_k = np.asarray(q_k), np.asarray(s_k).astype(np.float32).reshape(-1)
                ours_s = np.fromfile(sout, dtype=np.float32)
                if kind == "int8":
                    want_q = q_k.astype(np.int8).reshape(-1)
                    ours_q = np.fromfile(qout, dtype=np.int8)
                else:
                    packed, _, _ = quantizers.pack_int4(q_k.astype(np.int8), axis=1)
                    want_q = np.asarray(packed).view(np.uint8).reshape(-1)
                    ours_q = np.fromfile(qout, dtype=np.uint8)
                checked += 1
                if not np.array_equal(ours_s.view(np.uint32), s_k.view(np.uint32)):
                    fails += 1
                    print(f"FAIL {kind} {axis_name} {shape} x{scale}: scales differ: ours {ours_s[:4]} keras {s_k[:4]}")
                elif not np.array_equal(ours_q, want_q):
                    fails += 1
                    bad = np.nonzero(ours_q != want_q)[0][0]
                    print(f"FAIL {kind} {axis_name} {shape} x{scale}: byte {bad}: ours {ours_q[bad]} keras {want_q[bad]}")

# pack_int4 alone, odd and even column counts
for shape in [(1, 1), (2, 3), (4, 8), (7, 31)]:
    v = rng.integers(-8, 8, size=shape).astype(np.int8)
    vin, pout = os.path.join(tmp, "v"), os.path.join(tmp, "p")
    v.tofile(vin)
    run("pack", shape[0], shape[1], vin, pout)
    packed, _, _ = quantizers.pack_int4(v, axis=1)
    checked += 1
    if not np.array_equal(np.fromfile(pout, dtype=np.uint8), np.asarray(packed).view(np.uint8).reshape(-1)):
        fails += 1
        print(f"FAIL pack_int4 {shape}")

print(f"keras {keras.__version__} numpy {np.__version__}: {checked} comparisons, {fails} failures")
sys.exit(1 if fails else 0)
