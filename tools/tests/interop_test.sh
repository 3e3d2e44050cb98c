#!/bin/sh
# interop_test.sh MIXPREC [VENV] - the reference implementation (Python safetensors + numpy,
# ml_dtypes for bfloat16 / float8 when present) and mixprec read each other's files, tensor for
# tensor. The Python is $MXP_PYTHON, else VENV/bin/python (CI's step 7 makes the venv with pip).
# Exit 77 (CTest: skipped) with a message when the packages are not there.
set -u
M=$1
PYB=${MXP_PYTHON:-}
[ -z "$PYB" ] && [ -n "${2:-}" ] && [ -x "$2/bin/python" ] && PYB="$2/bin/python"
if [ -z "$PYB" ] || ! "$PYB" -c 'import numpy, safetensors.numpy' 2>/dev/null; then
    echo "skipped: Python safetensors + numpy not found (set MXP_PYTHON or make the venv:"
    echo "  python3 -m venv build/interop-venv && build/interop-venv/bin/pip install numpy ml_dtypes safetensors)"
    exit 77
fi
base=${TMPDIR:-/tmp}
[ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ] && base=/dev/shm
T=$(mktemp -d "$base/mixprec_interop.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM
cd "$T" || exit 1
"$PYB" - "$M" <<'PY'
import json, subprocess, sys
import numpy as np
from safetensors.numpy import save_file, load_file
from safetensors import safe_open
try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None

M = sys.argv[1]
fails = 0
def check(cond, what):
    global fails
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        fails += 1
NP = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I8": np.int8, "U8": np.uint8,
      "I16": np.int16, "U16": np.uint16, "I32": np.int32, "U32": np.uint32, "I64": np.int64,
      "U64": np.uint64, "BOOL": bool}
if ml_dtypes is not None:
    NP.update({"BF16": ml_dtypes.bfloat16, "F8_E4M3": ml_dtypes.float8_e4m3fn,
               "F8_E5M2": ml_dtypes.float8_e5m2})
def load_ref(path):
    """Every tensor through the reference library's own parser (safetensors.deserialize):
    load_file's numpy backend has no bfloat16 / float8."""
    from safetensors import deserialize
    out = {}
    for name, t in deserialize(open(path, "rb").read()):
        out[name] = np.frombuffer(bytes(t["data"]), dtype=NP[t["dtype"]]).reshape(t["shape"])
    return out
def run(*args):
    p = subprocess.run([M, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr

rng = np.random.default_rng(7)
ref = {
    "w.f32": rng.standard_normal((17, 33)).astype(np.float32),
    "w.f64": rng.standard_normal((5, 3)),
    "w.f16": rng.standard_normal((8,)).astype(np.float16),
    "i.i8": rng.integers(-128, 127, (4, 4)).astype(np.int8),
    "i.u8": rng.integers(0, 255, (3,)).astype(np.uint8),
    "i.i16": rng.integers(-1000, 1000, (6,)).astype(np.int16),
    "i.i32": rng.integers(-10**9, 10**9, (2, 2)).astype(np.int32),
    "i.i64": rng.integers(-10**12, 10**12, (3,)).astype(np.int64),
    "i.u16": rng.integers(0, 60000, (3,)).astype(np.uint16),
    "i.u32": rng.integers(0, 4 * 10**9, (3,)).astype(np.uint32),
    "i.u64": rng.integers(0, 2**62, (3,)).astype(np.uint64),
    "b.bool": rng.integers(0, 2, (7,)).astype(bool),
    "s.scalar": np.array(3.5, dtype=np.float32),
    "e.empty": np.zeros((0, 4), dtype=np.float32),
}
if ml_dtypes is not None:
    ref["w.bf16"] = rng.standard_normal((4, 6)).astype(ml_dtypes.bfloat16)
    ref["w.e4m3"] = rng.standard_normal((9,)).astype(ml_dtypes.float8_e4m3fn)
    ref["w.e5m2"] = rng.standard_normal((9,)).astype(ml_dtypes.float8_e5m2)
save_file(ref, "ref.safetensors", metadata={"format": "np", "note": "reference"})

# 1. mixprec reads the reference's file
rc, out, err = run("validate", "--strict", "ref.safetensors")
check(rc == 0, "reference file valid for mixprec (strict): " + (err.strip() or out.strip()))
rc, out, err = run("inspect", "--json", "ref.safetensors")
check(rc == 0, "inspect --json of the reference file")
info = json.loads(out)
names = {t["name"]: t for t in info["tensors"]}
check(set(names) == set(ref), "same tensor names")
with safe_open("ref.safetensors", "np") as f:
    for k in ref:
        sl = f.get_slice(k)
        check(names[k]["dtype"] == sl.get_dtype() and names[k]["shape"] == list(sl.get_shape()),
              f"{k}: dtype {names[k]['dtype']} shape {names[k]['shape']} as the reference says")
check(info["metadata"] == {"format": "np", "note": "reference"}, "metadata read")

# widen everything to float64 with mixprec; compare with numpy's exact widening
rc, out, err = run("cast", "ref.safetensors", "wide.safetensors", "--policy", "f64", "--quiet")
check(rc == 0, "cast the reference file to float64: " + err.strip())
wide = load_ref("wide.safetensors")
for k, v in ref.items():
    w = wide[k]
    if v.dtype.kind == "f" or (ml_dtypes is not None and v.dtype in
                               (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2)):
        check(w.dtype == np.float64 and w.shape == v.shape and
              np.array_equal(w, v.astype(np.float64), equal_nan=True), f"{k}: widened exactly")
    else:
        check(w.dtype == v.dtype and np.array_equal(w, v), f"{k}: copied byte for byte")

# 2. the reference reads mixprec's files: narrowing matches numpy / ml_dtypes rounding
for pol, np_t in (("f16", np.float16), ("bf16", ml_dtypes.bfloat16 if ml_dtypes else None),
                  ("e4m3", ml_dtypes.float8_e4m3fn if ml_dtypes else None),
                  ("e5m2", ml_dtypes.float8_e5m2 if ml_dtypes else None)):
    if np_t is None:
        print(f"skip {pol}: ml_dtypes not installed")
        continue
    out_name = f"out_{pol}.safetensors"
    rc, out, err = run("cast", "ref.safetensors", out_name, "--policy", pol, "--quiet")
    check(rc == 0, f"cast to {pol}: " + err.strip())
    got = load_ref(out_name)
    with safe_open(out_name, "np") as f:
        check(f.metadata().get("note") == "reference", f"{pol}: metadata kept, read by the reference")
    for k, v in ref.items():
        if v.dtype.kind == "f" and v.dtype != np.float64 or k in ("w.bf16", "w.e4m3", "w.e5m2"):
            want = v.astype(np.float32).astype(np_t)   # exact widening, then one rounding
            check(got[k].dtype == np.dtype(np_t) and
                  np.array_equal(got[k].reshape(-1).view(np.uint8), want.reshape(-1).view(np.uint8)),
                  f"{pol}: {k} bit-identical to the reference library's rounding")
        elif k == "w.f64":
            # float64 -> narrow rounds once; ml_dtypes / numpy also round float64 directly
            want = v.astype(np_t)
            check(np.array_equal(got[k].reshape(-1).view(np.uint8), want.reshape(-1).view(np.uint8)),
                  f"{pol}: {k} (float64 source) bit-identical")
        else:
            check(np.array_equal(got[k], v), f"{pol}: {k} unchanged")

# 3. quantized output loads with the reference library
rc, out, err = run("quantize", "ref.safetensors", "q.safetensors", "--scheme", "int8", "--quiet")
if rc == 0:
    q = load_ref("q.safetensors")
    check(q["w.f32"].dtype == np.int8 and q["w.f32_scale"].dtype == np.float32 and
          q["w.f32_scale"].shape == (17, 1), "int8: X I8 and X_scale F32 [out, 1]")
    deq = q["w.f32"].astype(np.float32) * q["w.f32_scale"]
    amax = np.abs(ref["w.f32"]).max(axis=1, keepdims=True)
    check(np.all(np.abs(deq - ref["w.f32"]) <= amax / 127 * 0.5 * 1.001 + 1e-7),
          "int8: x ~= q * X_scale within half a step per row")
else:
    print("skip quantize: " + err.strip())

print(f"{fails} failure(s)")
sys.exit(1 if fails else 0)
PY
exit $?
