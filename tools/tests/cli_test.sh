#!/bin/sh
# cli_test.sh MIXPREC MKST - end-to-end tests of the mixprec command line: exit codes, messages,
# round trips (cast -> cast back is bit-exact where the formats allow), policy maps, sharded
# checkpoints, atomic output under injected failures (RLIMIT_FSIZE, SIGINT mid-way, a bad tensor
# in the middle), OUT == IN, --force, --dry-run, quantize / dequantize, report.
# The files come from mkst (tools/tests/mkst.c), which writes them through the library's
# float64 conversion and reads them back with its own bit decoding.
set -u
M=$1
K=$2
scratch=mixprec_cli
. "$(dirname "$0")/cli_lib.sh" # ASAN_OPTIONS, the scratch directory $T (now current), ok / bad
# the system python when there is one (version-manager shims cost a second per start)
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
command -v $PY >/dev/null 2>&1 || PY=
# expect CODE DESC CMD...: run, compare the exit code
expect() {
    want=$1; desc=$2; shift 2
    "$@" >out.txt 2>err.txt
    got=$?
    if [ "$got" = "$want" ]; then ok "$desc"; else bad "$desc (exit $got, want $want)"; cat err.txt; fi
}
has() { # has FILE TEXT DESC
    if grep -q -- "$2" "$1"; then ok "$3"; else bad "$3 ('$2' not in $1)"; cat "$1"; fi
}
no_temps() { # no temporary file left in the directory
    if ls -A "${1:-.}" | grep -q 'tmp-'; then bad "$2: temporary file left"; ls -A "${1:-.}"; else ok "$2: no temporary file"; fi
}

# ---- surface --------------------------------------------------------------------------------
expect 0 "--version" "$M" --version
has out.txt "mixprec 0" "--version prints the version"
expect 2 "no arguments is a usage error" "$M"
expect 2 "unknown command" "$M" frobnicate
for c in inspect validate cast quantize report; do
    expect 0 "$c --help" "$M" $c --help
    has out.txt "example" "$c --help has a worked example"
done
expect 2 "unknown option" "$M" inspect --bogus x
expect 2 "cast without a policy" "$M" cast a b
expect 3 "missing input is an I/O error" "$M" inspect nothere.safetensors
has err.txt "nothere.safetensors" "the message names the file"

# ---- files ------------------------------------------------------------------------------------
"$K" write model.safetensors 'fc.weight=F32[16,40]:rand' 'fc.bias=F32[16]:rand' \
    'layer_norm.weight=F32[40]:ones' 'emb=BF16[8,12]:rand' 'step=I64[]:ramp' \
    'mask=BOOL[5]:ramp' 'q=F8_E8M0[4]:ramp' || exit 1
expect 0 "validate a good file" "$M" validate model.safetensors
expect 0 "validate --strict a file of our writer" "$M" validate --strict model.safetensors
expect 0 "inspect" "$M" inspect model.safetensors
has out.txt "fc.weight" "inspect lists tensors"
has out.txt "source = mkst" "inspect shows metadata"
expect 0 "inspect --json" "$M" inspect --json model.safetensors
if [ -n "$PY" ]; then
    if $PY -c 'import json,sys; d=json.load(open("out.txt")); assert len(d["tensors"])==7; assert d["totals"]["all"]["tensors"]==7' 2>err.txt
    then ok "inspect --json is JSON with 7 tensors"; else bad "inspect --json"; cat err.txt; fi
fi

# malformed files: exit 1, the message names the file and the rule
hdr() { # hdr FILE JSON DATA_BYTES
    $PY - "$1" "$2" "$3" <<'PY'
import struct, sys
h = sys.argv[2].encode()
open(sys.argv[1], 'wb').write(struct.pack('<Q', len(h)) + h + b'\0' * int(sys.argv[3]))
PY
}
if [ -n "$PY" ]; then
    hdr gap.safetensors '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}}' 20
    expect 1 "gap: exit 1" "$M" validate gap.safetensors
    has err.txt "gap.safetensors: tensor 'b'.*rule: gap" "gap: file, tensor and rule named"
    hdr dup.safetensors '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}' 8
    expect 1 "duplicate key: exit 1" "$M" validate dup.safetensors
    has err.txt "rule: duplicate-key" "duplicate key named"
    hdr trunc.safetensors '{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}' 9
    expect 1 "truncated: exit 1" "$M" inspect trunc.safetensors
    has err.txt "rule: truncated" "truncated named"
    expect 1 "cast of a bad file: exit 1" "$M" cast trunc.safetensors x.safetensors --policy bf16
    [ -e x.safetensors ] && bad "cast of a bad file wrote an output" || ok "cast of a bad file wrote nothing"
    printf 'abc' > short.safetensors
    expect 1 "3-byte file: exit 1" "$M" validate short.safetensors
    hdr unpadded.safetensors '{}' 0
    expect 0 "unpadded header: valid" "$M" validate unpadded.safetensors
    expect 1 "unpadded header: --strict refuses" "$M" validate --strict unpadded.safetensors
    has err.txt "rule: strict-alignment" "strict rule named"
fi

# ---- a count of one: "1 tensor", "1 byte", never "1 tensors" ------------------------------------
"$K" write one.safetensors 'w=U8[1]:ramp' || exit 1
plural1() { # plural1 FILE DESC: no "1 tensors" / "1 files" / "1 bytes" / "1 elements" in FILE
    if grep -Eq '(^|[^0-9.])1 (tensors|files|bytes|elements|output files)([^a-z]|$)' "$1"
    then bad "$2: plural after a count of 1"; cat "$1"; else ok "$2: singular after a count of 1"; fi
}
expect 0 "validate a one-tensor file" "$M" validate one.safetensors
has out.txt "^one.safetensors: valid (1 tensor, 1 file, " "validate: 1 tensor"
plural1 out.txt "validate"
expect 0 "inspect a one-tensor file" "$M" inspect one.safetensors
has out.txt "^one.safetensors: 1 tensor, 1 file, " "inspect: 1 tensor"
has out.txt "^  all  *1 tensor  *1 element  *1 byte$" "inspect totals: 1 tensor, 1 element, 1 byte"
plural1 out.txt "inspect"
expect 0 "cast --dry-run of a one-tensor file" "$M" cast one.safetensors one-out.safetensors --policy f16 --dry-run
has out.txt "^w .* 1 ->  *1 byte  " "cast --dry-run: 1 byte"
has out.txt "^total: 1 tensor, 1 B -> 1 B of tensor data (1.000x), 1 output file: one-out.safetensors$" \
    "cast --dry-run: total of 1 tensor"
plural1 out.txt "cast --dry-run"
expect 0 "cast a one-tensor file" "$M" cast one.safetensors one-out.safetensors --policy f16
has err.txt "^wrote one-out.safetensors: 1 tensor, " "cast: wrote 1 tensor"
plural1 err.txt "cast"
if [ -n "$PY" ]; then
    hdr gap1.safetensors '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},
                           "b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}}' 3
    expect 1 "a gap of one byte: exit 1" "$M" validate gap1.safetensors
    has err.txt "a gap of 1 byte after tensor 'a' (rule: gap)" "gap: 1 byte"
    hdr trail1.safetensors '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}' 2
    expect 1 "one trailing byte: exit 1" "$M" validate trail1.safetensors
    has err.txt ": 1 trailing byte: the tensors end at byte 1 of the data buffer, which holds 2 bytes" \
        "trailing: 1 byte"
    hdr size1.safetensors '{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,1]}}' 1
    expect 1 "a one-byte tensor of two elements: exit 1" "$M" validate size1.safetensors
    has err.txt "hold 1 byte but U8 \[2\] needs 2 (rule: size)" "size: 1 byte"
    hdr f4.safetensors '{"a":{"dtype":"F4","shape":[1],"data_offsets":[0,0]}}' 0
    expect 1 "one F4 element: exit 1" "$M" validate f4.safetensors
    has err.txt "1 element of F4 is not a whole number of bytes (rule: whole-bytes)" "whole-bytes: 1 element"
    printf 'a' > one-byte.safetensors
    expect 1 "a 1-byte file: exit 1" "$M" validate one-byte.safetensors
    has err.txt "file is 1 byte, too short" "header-length: 1 byte"
fi
# shapes too long for a table cell (a zero dimension keeps the tensor empty): cut after a whole
# dimension with ", ...]", never inside a number (the plan once showed 922337203685477580 for
# 9223372036854775807, silently)
if [ -n "$PY" ]; then
    d=9223372036854775807
    hdr longshape.safetensors "{\"w\":{\"dtype\":\"F32\",\"shape\":[0,$d,$d,$d,$d,$d,$d,$d,$d,$d,$d,$d,$d,$d,$d,$d],\"data_offsets\":[0,0]}}" 0
    expect 0 "inspect a 16-dimension shape" "$M" inspect longshape.safetensors
    has out.txt "\[0, $d, .*, $d, \.\.\.\]  *0$" "inspect: a long shape ends in ', ...]'"
    expect 0 "cast --dry-run of a 16-dimension shape" "$M" cast longshape.safetensors ls2.safetensors --policy bf16 --dry-run
    has out.txt "$d, \.\.\.\] *-> BF16 \[0, $d, .*$d, \.\.\.\]  *0 -> 0 bytes" "plan: both long shapes end in ', ...]'"
    if grep -Eq "922337203685477580([^0-9]|$)" out.txt; then
        bad "plan: a dimension cut inside its number"; cat out.txt
    else ok "plan: no dimension cut inside its number"; fi
fi

# a header length of 2 with 1 byte after it (the writer's own counts, "N more bytes than the
# tensors hold" and "only N of M data bytes", cannot be reached from the command line)
printf '\002\000\000\000\000\000\000\000{' > hlen1.safetensors
expect 1 "a header length past the one byte left: exit 1" "$M" validate hlen1.safetensors
has err.txt "header length 2 runs past the end of the file (1 byte after the length) (rule: header-length)" \
    "header-length: 1 byte after the length"
plural1 err.txt "header-length"

# ---- cast round trips -------------------------------------------------------------------------
"$K" write narrow.safetensors 'a=BF16[33,7]:rand' 'b=F16[100]:rand' 'c=F16[9]:tiny' \
    'd=F8_E4M3[64]:ramp' 'e=F8_E5M2[5,5]:rand' 'i=I32[3]:ramp' || exit 1
expect 0 "cast narrow -> float32" "$M" cast narrow.safetensors wide.safetensors --policy f32 --quiet
expect 0 "cast float32 -> narrow again (map)" sh -c "printf '%s\n' 'a = bf16' '[bc] = f16' 'd = e4m3' 'e = e5m2' > back.map && '$M' cast wide.safetensors back.safetensors --map back.map --quiet"
if cmp -s narrow.safetensors back.safetensors; then ok "narrow -> f32 -> narrow is bit-exact"; else bad "narrow -> f32 -> narrow differs"; fi
expect 0 "cast narrow -> float64" "$M" cast narrow.safetensors wide64.safetensors --policy f64 --quiet
expect 0 "cast float64 -> narrow again" "$M" cast wide64.safetensors back64.safetensors --map back.map --quiet
if cmp -s narrow.safetensors back64.safetensors; then ok "narrow -> f64 -> narrow is bit-exact"; else bad "narrow -> f64 -> narrow differs"; fi
"$K" dump wide.safetensors c > c32.txt; "$K" dump narrow.safetensors c > c16.txt
if cmp -s c32.txt c16.txt; then ok "widening keeps every value (subnormals included)"; else bad "widening changed values"; fi
expect 0 "inspect the cast output" "$M" inspect --json wide.safetensors
has out.txt '"source":"mkst"' "metadata kept through cast"
has out.txt '"i","dtype":"I32"' "integers copied as they are"

# a policy map: bfloat16 except the norms
printf '@default = bf16\n.*norm.* = float32\n' > policy.map
expect 0 "cast --map --dry-run" "$M" cast model.safetensors m16.safetensors --map policy.map --dry-run
has out.txt "layer_norm.weight.*-> F32" "dry-run: norm stays float32"
has out.txt "fc.weight.*-> BF16.*@default" "dry-run: rule named"
has out.txt "^total: 7 tensors" "dry-run: totals"
[ -e m16.safetensors ] && bad "dry-run wrote a file" || ok "dry-run wrote nothing"
expect 0 "cast --map" "$M" cast model.safetensors m16.safetensors --map policy.map --threads 2
expect 0 "cast output is valid (strict)" "$M" validate --strict m16.safetensors
"$M" inspect m16.safetensors > insp.txt
has insp.txt "layer_norm.weight  *F32" "norm kept in float32"
has insp.txt "fc.weight  *BF16" "weights in bfloat16"
has insp.txt "q  *F8_E8M0" "unconvertible dtype copied"
no_temps . "after cast"
printf 'fc[.].* = bf16\n.*weight = f16\n' > amb.map
expect 2 "an ambiguous map is a usage error" "$M" cast model.safetensors amb.safetensors --map amb.map
has err.txt "fc.weight" "ambiguity names the tensor"

# ---- --saturate: every pair, the target dtype itself included ---------------------------------
# 'big' is i % 7 * 1.5e5 - 3e5: -3e5, -1.5e5, 0, 1.5e5 ... 6e5, so float16 holds -inf -inf 0 inf
# inf inf inf (mkst rounds without saturating); saturated, every inf is float16's max, 65504.
"$K" write sat.safetensors 'h=F16[7]:big' 'f=F32[7]:big' || exit 1
expect 0 "cast --saturate" "$M" cast sat.safetensors sat-out.safetensors --policy f16 --saturate --quiet
for t in h f; do
    "$K" dump sat-out.safetensors $t | tr '\n' ' ' > dump.txt
    if [ "$(cat dump.txt)" = "-65504 -65504 0 65504 65504 65504 65504 " ]; then
        ok "--saturate: $t (already float16 for h) has no inf left"
    else
        bad "--saturate: $t (already float16 for h) has no inf left: $(cat dump.txt)"
    fi
done

# ---- tensors of no elements: O(1) whatever the shape ---------------------------------------------
# A zero-column quantized tensor [2^40, 0] with its scale once looped per (empty) row for hours;
# `timeout` turns such a regression into a failure instead of a hung test.
T_OUT=
command -v timeout >/dev/null 2>&1 && T_OUT="timeout 30"
"$K" write e8.safetensors 'w=I8[1099511627776,0]:ramp' 'w_scale=F32[1]:ones' || exit 1
"$K" write emx.safetensors 'w=F8_E4M3[1099511627776,0]:ramp' 'w_scale=U8[0]:ramp' || exit 1
for e in e8 emx; do
    expect 0 "$e: cast of a [2^40, 0] quantized tensor ends" \
        $T_OUT "$M" cast $e.safetensors $e-out.safetensors --policy bf16 --quiet
    "$M" inspect $e-out.safetensors > ei.txt 2>&1
    has ei.txt "^w  *BF16  *\[1099511627776, 0\]  *0$" "$e: dequantized to an empty tensor of the right dtype and shape"
    if grep -q w_scale ei.txt; then bad "$e: scale left after dequantization"; else ok "$e: scale consumed"; fi
    expect 0 "$e: dry-run" $T_OUT "$M" cast $e.safetensors $e-dry.safetensors --policy f32 --dry-run
    has out.txt "^w .*I8\|^w .*F8_E4M3" "$e: dry-run lists the tensor"
done
"$K" write ef.safetensors 'w=F32[1099511627776,0]:ramp' 'z=F32[0,1099511627776]:ramp' || exit 1
expect 0 "cast of empty float tensors ends" $T_OUT "$M" cast ef.safetensors ef-out.safetensors --policy f16 --quiet
expect 0 "report --dtype of empty tensors ends" $T_OUT "$M" report ef.safetensors --dtype bf16
expect 0 "report --scheme of empty tensors ends" $T_OUT "$M" report e8.safetensors --scheme int8
if "$M" quantize ef.safetensors ef-q.safetensors --scheme int8 --dry-run >out.txt 2>&1; then
    has out.txt "^w .*kept: empty tensor" "quantize keeps an empty tensor"
fi
if [ -n "$PY" ]; then
    # int4: X U8 [3, 0] whose X_shape [3, 2^40, 0] gives the empty original shape back
    $PY - <<'PY2'
import json, struct
def mk(path, tensors, data):
    h = json.dumps(tensors, separators=(",", ":")).encode()
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)
mk("e4.safetensors", {"w": {"dtype": "U8", "shape": [3, 0], "data_offsets": [0, 0]},
                      "w_scale": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]},
                      "w_shape": {"dtype": "I64", "shape": [3], "data_offsets": [12, 36]}},
   struct.pack("<3f", 1, 1, 1) + struct.pack("<3q", 3, 1 << 40, 0))
# an X_shape whose product overflows, hidden from a plain product by the packed [1, 0]
mk("e4ov.safetensors", {"w": {"dtype": "U8", "shape": [1, 0], "data_offsets": [0, 0]},
                        "w_scale": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                        "w_shape": {"dtype": "I64", "shape": [3], "data_offsets": [4, 28]}},
   struct.pack("<f", 1) + struct.pack("<3q", 1, 1 << 40, 1 << 40))
# an int8 tensor of 5000 dimensions [2, 1, ..., 1] with a per-row scale: cast once copied its
# shape into a 64-entry stack array (a segfault, an ASan stack-buffer-overflow)
mk("ehd.safetensors", {"w": {"dtype": "I8", "shape": [2] + [1] * 4999, "data_offsets": [0, 2]},
                       "w_scale": {"dtype": "F32", "shape": [2], "data_offsets": [2, 10]}},
   struct.pack("<2b", 3, -5) + struct.pack("<2f", 0.5, 0.25))
PY2
    expect 0 "int4: cast of an empty [3, 2^40, 0] tensor ends" \
        $T_OUT "$M" cast e4.safetensors e4-out.safetensors --policy f32 --quiet
    "$M" inspect e4-out.safetensors > ei.txt 2>&1
    has ei.txt "^w  *F32  *\[3, 1099511627776, 0\]  *0$" "int4: empty tensor of the original shape"
    expect 1 "int4: an X_shape overflowing 64 bits is refused" \
        "$M" cast e4ov.safetensors e4ov-out.safetensors --policy f32 --dry-run
    has err.txt "e4ov.safetensors: tensor 'w_shape'.*rule: quantized-shape" \
        "int4: the overflow names the input and the rule"
    expect 0 "int8: cast of a 5000-dimension tensor with its scale" \
        "$M" cast ehd.safetensors ehd-out.safetensors --policy f32 --quiet
    "$M" inspect --json ehd-out.safetensors > ei.txt 2>&1
    has ei.txt '"shape":\[2,1,1,' "int8: the 5000-dimension shape is kept"
    # the values, by the file's own bytes: 3 * 0.5 = 1.5 (0x3FC00000), -5 * 0.25 = -1.25 (0xBFA00000)
    if [ "$(tail -c 8 ehd-out.safetensors | od -An -tx4 | tr -d ' \n')" = 3fc00000bfa00000 ]; then
        ok "int8: 5000-dimension values dequantized"
    else
        bad "int8: 5000-dimension values dequantized"
    fi
fi

# ---- names from files: control characters as '?', cut after 150 bytes ------------------------------
# A name with a newline, ESC and BEL, a C1 control (U+009B, CSI on some terminals), then 300 '0's.
# mkst takes the name from its argument: no '[' or '=' in it (the spec's separators).
esc=$(printf '\033')
evil=$(printf 'evil\n\033]0;RED\007\302\233%0300d' 0)
# shown: the first 150 bytes (15 + 135 '0's), each control character as one '?', then "..."
shown="evil??]0;RED??$(printf '%0135d' 0)..."
clean_out() { # clean_out FILE DESC: no terminal control byte (ESC, BEL, C1) in FILE
    if grep -q "$esc\|$(printf '\007')\|$(printf '\302\233')" "$1"; then
        bad "$2: control bytes printed"; od -c "$1" | head -5
    else ok "$2: no control bytes"; fi
}
"$K" write evil.safetensors "$evil=F32[2,4]:nan" "ok.w=F32[2,4]:rand" || exit 1
expect 0 "inspect a file with a hostile name" "$M" inspect evil.safetensors
clean_out out.txt "inspect"
if grep -qF -- "$shown  " out.txt; then ok "inspect: the name cut after 150 bytes, controls as '?'"
else bad "inspect: name not shown as promised"; cat out.txt; fi
[ "$(wc -l < out.txt)" = 10 ] && ok "inspect: the name adds no line" ||
    { bad "inspect: $(wc -l < out.txt) lines, want 10"; cat out.txt; }
expect 0 "inspect --json with a hostile name" "$M" inspect --json evil.safetensors
clean_out out.txt "inspect --json"
has out.txt '"evil\\n\\u001b\]0;RED\\u0007\\u009b000' "inspect --json escapes the control characters"
if [ -n "$PY" ]; then
    if EVIL="$evil" $PY -c 'import json,os; d=json.load(open("out.txt"))
assert [t for t in d["tensors"] if t["name"] == os.environ["EVIL"]]' 2>err.txt
    then ok "inspect --json gives the whole name back"; else bad "inspect --json name"; cat err.txt; fi
fi
expect 0 "report --dtype with a hostile name" "$M" report evil.safetensors --dtype f16
clean_out out.txt "report"
has out.txt "$shown" "report: the name shown as promised"
expect 0 "report --json with a hostile name" "$M" report evil.safetensors --dtype f16 --json
clean_out out.txt "report --json"
expect 0 "cast --dry-run with a hostile name" "$M" cast evil.safetensors evil-out.safetensors --policy bf16 --dry-run
clean_out out.txt "cast --dry-run"
has out.txt "$shown" "cast --dry-run: the name shown as promised"
printf 'evil.* = bf16\n.*0 = f16\n' > evil.map
expect 2 "ambiguous map on a hostile name" "$M" cast evil.safetensors evil-out.safetensors --map evil.map
clean_out err.txt "map lookup error"
[ "$(wc -l < err.txt)" = 1 ] && ok "map lookup error: one line" ||
    { bad "map lookup error: $(wc -l < err.txt) lines"; cat err.txt; }
if [ -n "$PY" ]; then
    $PY - <<'PY2'
import json, struct
h = json.dumps({"__metadata__": {"k\x1bey": "v\nal\x07ue" + "y" * 200},
                "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
open("evilmeta.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + b"\0" * 4)
PY2
    expect 0 "inspect hostile metadata" "$M" inspect evilmeta.safetensors
    clean_out out.txt "inspect metadata"
    # the value's first 150 bytes: 7 then 143 'y's
    has out.txt "^  k?ey = v?al?ue$(printf '%0143d' 0 | tr 0 y)\.\.\.$" \
        "metadata shown with '?' and cut after 150 bytes"
    expect 0 "inspect --json hostile metadata" "$M" inspect --json evilmeta.safetensors
    if $PY -c 'import json; d=json.load(open("out.txt"))
assert d["metadata"]["k\x1bey"] == "v\nal\x07ue" + "y" * 200' 2>err.txt
    then ok "inspect --json gives the whole metadata back"; else bad "inspect --json metadata"; cat err.txt; fi
fi

# ---- OUT rules -----------------------------------------------------------------------------------
cp m16.safetensors keep.copy
expect 2 "existing OUT without --force" "$M" cast model.safetensors m16.safetensors --policy f16
has err.txt "already exists" "message says it exists"
cmp -s m16.safetensors keep.copy && ok "existing OUT untouched" || bad "existing OUT changed"
# a dry run writes nothing, so an existing OUT is no error: the plan, then a note (docs/cli.md)
expect 0 "dry run onto an existing OUT without --force" \
    "$M" cast model.safetensors m16.safetensors --policy f16 --dry-run
has out.txt "^total: 7 tensors" "dry run onto an existing OUT: the plan"
has out.txt "^note: m16.safetensors already exists; the run without --dry-run needs --force to overwrite it$" \
    "dry run onto an existing OUT: the note"
cmp -s m16.safetensors keep.copy && ok "dry run: existing OUT byte-identical" || bad "dry run changed the existing OUT"
no_temps . "dry run onto an existing OUT"
expect 0 "quantize dry run onto an existing OUT without --force" \
    "$M" quantize model.safetensors m16.safetensors --scheme int8 --dry-run
has out.txt "^note: m16.safetensors already exists" "quantize dry run: the note"
cmp -s m16.safetensors keep.copy && ok "quantize dry run: existing OUT byte-identical" ||
    bad "quantize dry run changed the existing OUT"
expect 2 "dry run: OUT naming IN is still refused" "$M" cast model.safetensors model.safetensors --policy f16 --dry-run
expect 0 "existing OUT with --force" "$M" cast model.safetensors m16.safetensors --policy f16 --force --quiet
expect 2 "OUT == IN refused" "$M" cast model.safetensors model.safetensors --policy f16 --force
ln model.safetensors hard.safetensors
expect 2 "OUT == IN through a hard link refused" "$M" cast model.safetensors hard.safetensors --policy f16 --force
ln -s model.safetensors sym.safetensors
expect 2 "OUT == IN through a symlink refused" "$M" cast sym.safetensors ./model.safetensors --policy f16 --force
cmp -s model.safetensors hard.safetensors && ok "input untouched" || bad "input changed"
expect 2 "OUT is a directory" "$M" cast model.safetensors . --policy f16 --force

# ---- atomic output under failures ------------------------------------------------------------------
"$K" write big.safetensors 'w=F32[512,1024]:rand' || exit 1
( ulimit -f 64; "$M" cast big.safetensors limited.safetensors --policy f32 --quiet --force ) >out.txt 2>err.txt
rc=$?
[ "$rc" = 3 ] && ok "file size limit: exit 3" || { bad "file size limit: exit $rc, want 3"; cat err.txt; }
has err.txt "limited.safetensors" "disk-full message names the file"
[ -e limited.safetensors ] && bad "file size limit left OUT" || ok "file size limit left no OUT"
no_temps . "file size limit"

"$K" write sig.safetensors 'w=F32[4096,8192]:ramp' || exit 1   # 128 MiB
killed=0
for delay in 0.3 0.15 0.05; do
    "$M" cast sig.safetensors sigout.safetensors --policy f16 --threads 1 --quiet --force &
    pid=$!
    sleep $delay
    kill -INT $pid 2>/dev/null
    wait $pid
    rc=$?
    if [ "$rc" -gt 128 ]; then killed=1; break; fi
    rm -f sigout.safetensors
done
if [ $killed = 1 ]; then
    ok "SIGINT mid-way killed the cast (exit $rc)"
    # A signal that lands after the final rename (possible when the machine is slow, e.g.
    # under ASan) finds a complete OUT: then it must be the whole, valid result.
    if [ -e sigout.safetensors ]; then
        "$M" cast sig.safetensors sigref.safetensors --policy f16 --threads 1 --quiet --force &&
            cmp -s sigout.safetensors sigref.safetensors && ok "SIGINT after the rename left a complete OUT" ||
            bad "SIGINT left a partial OUT"
        rm -f sigref.safetensors
    else
        ok "SIGINT left no OUT"
    fi
    no_temps . "SIGINT"
else
    echo "skip SIGINT: the cast always finished before the signal"
fi
rm -f sig.safetensors sigout.safetensors

# ---- a file larger than 4 GiB (sparse: a 5 GiB U8 tensor of zeros, then two floats) ----------
if [ -n "$PY" ] && $PY - <<'PY'
import json, struct
h = json.dumps({"big": {"dtype": "U8", "shape": [5 << 30], "data_offsets": [0, 5 << 30]},
                "tail": {"dtype": "F32", "shape": [2], "data_offsets": [5 << 30, (5 << 30) + 8]}},
               separators=(",", ":")).encode()
with open("huge.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    f.seek(8 + len(h) + (5 << 30))
    f.write(struct.pack("<2f", 1.5, -2.25))
PY
then
    expect 0 "a 5 GiB file validates" "$M" validate huge.safetensors
    "$K" dump huge.safetensors tail > tail.txt
    printf '1.5\n-2.25\n' > tail.want
    cmp -s tail.txt tail.want && ok "a tensor past 4 GiB reads back" || bad "tensor past 4 GiB"
    expect 0 "report reads past 4 GiB" "$M" report huge.safetensors --dtype bf16 --json
    has out.txt '"tail".*"sqnr_db":"inf"' "report of the tensor past 4 GiB (exact in bf16)"
    rm -f huge.safetensors
fi

# ---- sharded checkpoints ----------------------------------------------------------------------
mkdir -p sh
expect 2 "--max-shard-size without a unit" "$M" cast model.safetensors sh/model.safetensors.index.json --policy bf16 --max-shard-size 1000
expect 2 "--max-shard-size with a single-file OUT" "$M" cast model.safetensors x.safetensors --policy bf16 --max-shard-size 1KB
expect 0 "cast to shards" "$M" cast model.safetensors sh/model.safetensors.index.json --policy bf16 --max-shard-size 1KB --quiet
n=$(ls sh | grep -c 'model-0000[0-9]-of-0000[0-9].safetensors')
[ "$n" -ge 2 ] && ok "several shards written ($n)" || bad "shards: $n"
expect 0 "validate the sharded checkpoint (strict)" "$M" validate --strict sh/model.safetensors.index.json
expect 0 "inspect the sharded checkpoint" "$M" inspect sh/model.safetensors.index.json
has out.txt "7 tensors" "all tensors listed"
expect 0 "shards -> one file" "$M" cast sh/model.safetensors.index.json joined.safetensors --policy bf16 --quiet
expect 0 "direct cast" "$M" cast model.safetensors direct.safetensors --policy bf16 --quiet
cmp -s joined.safetensors direct.safetensors && ok "sharded round trip equals the direct cast" || bad "sharded round trip differs"
expect 2 "existing shards refused without --force" "$M" cast model.safetensors sh/model.safetensors.index.json --policy bf16 --max-shard-size 1KB
# a dry run onto them: the plan, a note per existing file, exit 0, nothing touched
cksum sh/* > sh.before
expect 0 "dry run onto existing shards without --force" \
    "$M" cast model.safetensors sh/model.safetensors.index.json --policy bf16 --max-shard-size 1KB --dry-run
has out.txt "^total: 7 tensors" "dry run onto existing shards: the plan"
has out.txt "^note: sh/model.safetensors.index.json already exists; the run without --dry-run needs --force" \
    "dry run onto existing shards: the index noted"
has out.txt "^note: sh/model-00001-of-0000[0-9].safetensors already exists" \
    "dry run onto existing shards: a shard noted"
cksum sh/* | cmp -s - sh.before && ok "dry run onto existing shards: every file untouched" ||
    bad "dry run onto existing shards changed a file"
expect 2 "dry run: an index OUT naming IN is still refused" \
    "$M" cast sh/model.safetensors.index.json sh/model.safetensors.index.json --policy bf16 --dry-run
expect 2 "a shard as OUT of its own checkpoint" "$M" cast sh/model.safetensors.index.json "sh/$(ls sh | grep -m1 'of-')" --policy bf16 --force
no_temps sh "sharded"
# break the index: a tensor mapped to the wrong shard
$PY - <<'PY' 2>/dev/null && { expect 1 "wrong shard in the index: exit 1" "$M" validate sh/model.safetensors.index.json; has err.txt "rule: index" "index rule named"; }
import json
p = 'sh/model.safetensors.index.json'
d = json.load(open(p))
names = sorted(set(d['weight_map'].values()))
k = sorted(d['weight_map'])[0]
d['weight_map'][k] = [n for n in names if n != d['weight_map'][k]][0]
json.dump(d, open(p, 'w'))
PY

# ---- report -------------------------------------------------------------------------------------
"$K" write rep.safetensors 'big.w=F32[4,8]:big' 'tiny.w=F32[4,8]:tiny' 'ok.w=F32[4,8]:rand' || exit 1
expect 0 "report --dtype f16" "$M" report rep.safetensors --dtype f16
head -2 out.txt | tail -1 > first.txt
has first.txt "big.w" "worst tensor first"
expect 0 "report --json" "$M" report rep.safetensors --dtype f16 --json
if [ -z "$PY" ] || $PY - <<'PY'
import json
r = json.load(open('out.txt'))
by = {x['tensor']: x for x in r}
assert r[0]['tensor'] == 'big.w'
assert by['big.w']['overflow'] > 0 and by['big.w']['sqnr_db'] == '-inf'
assert by['tiny.w']['flushed_to_zero'] == 32, by['tiny.w']
assert by['ok.w']['overflow'] == 0 and by['ok.w']['flushed_to_zero'] == 0
assert 40 < by['ok.w']['sqnr_db'] < 90
PY
then ok "report numbers: overflow, flush to zero, SQNR"; else bad "report numbers"; cat out.txt; fi
expect 2 "report needs --dtype or --scheme" "$M" report rep.safetensors
expect 2 "report --dtype int8 is not floating" "$M" report rep.safetensors --dtype int8
# the columns line up whatever the dtype names: F8_E4M3 / F8_E5M2 once pushed the rest of their
# row one column right. Every row as long as the header, the target starting where its header does.
"$K" write f8rep.safetensors 'a=F8_E4M3[4,4]:rand' 'b=F32[4,4]:rand' 'c=F8_E5M2[8]:rand' || exit 1
for tg in f16 e4m3; do
    expect 0 "report --dtype $tg of F8_E4M3, F8_E5M2 and F32 tensors" "$M" report f8rep.safetensors --dtype $tg
    if [ "$(wc -l < out.txt)" = 4 ] && awk 'NR == 1 { len = length($0); match($0, /^[^ ]+ +[^ ]+ +/); col = RLENGTH }
        { match($0, /^[^ ]+ +[^ ]+ +/); if (length($0) != len || RLENGTH != col) bad = 1 }
        END { exit bad }' out.txt
    then ok "report --dtype $tg: the columns line up"
    else bad "report --dtype $tg: the columns line up"; cat out.txt; fi
done
expect 0 "inspect of F8_E4M3, F8_E5M2 and F32 tensors" "$M" inspect f8rep.safetensors
if sed -n '/^totals:/,$p' out.txt |
    awk 'NR > 1 { c = index($0, " tensor"); e = index($0, " element"); b = index($0, " byte")
                  if (NR == 2) { w = c; we = e; wb = b } else if (c != w || e != we || b != wb) bad = 1 }
         END { exit bad || NR != 5 }'
then ok "inspect totals: the 'tensors', 'elements' and 'bytes' words in the same column on every row"
else bad "inspect totals: the 'tensors', 'elements' and 'bytes' words in the same column on every row"; cat out.txt; fi
# each column as wide as its widest cell: two spaces between the dtype and the count column
has out.txt "^  F8_E4M3  1 tensor " "inspect totals: the name column as wide as its widest name"

# ---- tables: every column at the same offset on every line, the header's included ---------------
# Each of these once pushed the columns after it right: a 90-character name (names were padded to
# 60 characters, 50 in the plan), F8_E4M3FNUZ (dtypes to 7 in the plan), a long shape (shapes to
# 14 in the plan, 20 in inspect), a non-ASCII name (padded by bytes, not characters), a CJK name
# (two terminal columns a character, counted as one).
ea=$(printf '\303\251') # U+00E9, one character of two bytes: counted as one below
wd=$(printf '\345\261\244') # U+5C64, a CJK character of three bytes: two columns, counted as two
long=model.layers.0.self_attn.q_proj.$(printf '%058d' 0 | tr 0 x)
"$K" write cols.safetensors "$long=F32[4,8]:rand" 'b=F32[3]:rand' 'f8=F8_E4M3FNUZ[8]:ramp' \
    'empty=F32[4096,11008,3,0]:ramp' "$ea.w=BF16[2,4]:rand" "$wd$wd.w=F32[2]:rand" || exit 1
# fields SPEC < TABLE: per line, where each field N of SPEC (whitespace-separated, N < 0 counted
# from the last) starts, or ends for "N$" (right-aligned numbers)
fields() {
    sed "s/$ea/e/g; s/$wd/WW/g" | LC_ALL=C awk -v spec="$1" '{
        m = 0
        for (i = 1; i <= length($0); i++) {
            if (substr($0, i, 1) == " ") continue
            if (i == 1 || substr($0, i - 1, 1) == " ") s[++m] = i
            e[m] = i
        }
        n = split(spec, f, " "); sig = ""
        for (k = 1; k <= n; k++) {
            j = f[k] + 0; if (j < 0) j += m + 1
            sig = sig " " (f[k] ~ /\$$/ ? e[j] : s[j])
        }
        print sig }'
}
# plan_cols < PLAN: the same for a dry-run plan (shapes hold blanks): where the source dtype, the
# first arrow, the target shape, the second arrow, "byte" and the rule start; the source shape's
# start on lines of its own ("S"), as the lines of a quantized tensor's scale and shape have none
plan_cols() {
    grep -v '^total: ' | sed "s/$ea/e/g; s/$wd/WW/g" | LC_ALL=C awk '{
        a = index($0, " -> "); r = substr($0, a + 4); match($0, /^[^ ]+ +/)
        if ($2 != "-") print "S", index($0, "[")
        print RLENGTH, a, a + 3 + index(r, "["), a + 3 + index(r, " -> "), index($0, " byte"), index($0, "  (")
    }'
}
aligned() { # aligned SIGS TABLE DESC [N]: SIGS holds at most N (1) distinct lines
    if [ "$(sort -u "$1" | wc -l)" -le "${4:-1}" ]; then ok "$3"; else bad "$3"; cat "$2" "$1"; fi
}
expect 0 "inspect of long names, dtypes and shapes" "$M" inspect cols.safetensors
sed -n '/^tensor /,/^totals:/p' out.txt | sed '$d' > table.txt
fields '2 3 -1' < table.txt > sig.txt
aligned sig.txt table.txt "inspect: dtype, shape and bytes at the same offset on every line"
expect 0 "report of long names and shapes" "$M" report cols.safetensors --dtype f16
fields '2 3 4$ 5$ 6$ 7$ 8$' < out.txt > sig.txt
aligned sig.txt out.txt "report: every column at the same offset on every line"
if [ "$(wc -l < out.txt)" = 6 ]; then ok "report: a line per floating tensor"; else bad "report: lines"; cat out.txt; fi
expect 0 "cast --dry-run of long names, dtypes and shapes" "$M" cast cols.safetensors c.safetensors --policy bf16 --dry-run
plan_cols < out.txt > sig.txt
aligned sig.txt out.txt "cast --dry-run: every column at the same offset on every line" 2
has out.txt "^f8 .*F8_E4M3FNUZ .* -> F8_E4M3FNUZ " "cast --dry-run: F8_E4M3FNUZ copied"
if "$M" quantize --help >/dev/null 2>&1 &&
    "$M" quantize cols.safetensors q.safetensors --scheme int4 --dry-run >out.txt 2>err.txt; then
    plan_cols < out.txt > sig.txt
    aligned sig.txt out.txt "quantize --dry-run (with scales and shapes): every column at the same offset" 2
    has out.txt "^${long}_scale  *-  *-> F32 " "quantize --dry-run: the scale of the long name listed"
fi

# ---- quantize -------------------------------------------------------------------------------------
if "$M" quantize --help >/dev/null && "$M" quantize model.safetensors qprobe.safetensors --scheme int8 --dry-run >/dev/null 2>&1; then
    for s in int8 int4 fp8 mxfp8; do
        expect 0 "quantize --scheme $s" "$M" quantize model.safetensors q$s.safetensors --scheme $s --quiet
        expect 0 "quantize $s output is valid" "$M" validate --strict q$s.safetensors
        "$M" inspect q$s.safetensors > qi.txt
        has qi.txt "fc.weight_scale" "$s: X_scale written"
        has qi.txt "layer_norm.weight  *F32" "$s: norm kept"
        has qi.txt "fc.bias  *F32" "$s: 1-D kept"
        expect 0 "cast $s back to floats" "$M" cast q$s.safetensors d$s.safetensors --policy f32 --quiet
        "$M" inspect d$s.safetensors > di.txt
        has di.txt "fc.weight  *F32  *\[16, 40\]" "$s: dequantized to the original shape"
        if grep -q weight_scale di.txt; then bad "$s: scale left after dequantization"; else ok "$s: scales consumed"; fi
        "$K" dump model.safetensors fc.weight > x.txt
        "$K" dump d$s.safetensors fc.weight > y.txt
        # error bound per scheme, relative to the tensor's max |x| (rows share a scale)
        case $s in int8) tol=0.0040;; int4) tol=0.072;; fp8) tol=0.07;; mxfp8) tol=0.07;; esac
        if paste x.txt y.txt | awk -v tol=$tol '{a=$1<0?-$1:$1; if(a>m)m=a; d=$1-$2; if(d<0)d=-d; if(d>e)e=d} END{ if (e <= tol*m) exit 0; print "max err", e, "amax", m; exit 1}'
        then ok "$s: dequantized values within the scheme's bound"; else bad "$s: error bound"; fi
    done
    "$K" dump qint8.safetensors fc.weight_scale > s.txt
    # amax / 127 for weights of magnitude < 1: every scale positive and below 0.01
    if awk '{ if (!($1 > 0 && $1 < 0.01)) bad = 1 } END { exit bad || NR == 0 }' s.txt
    then ok "int8 scales are dequantization multipliers (small)"; else bad "int8 scales are dequantization multipliers (small)"; fi
    expect 0 "quantize --keep" "$M" quantize model.safetensors qk.safetensors --scheme int8 --keep 'fc\..*' --dry-run
    has out.txt "fc.weight.*kept: matches fc" "--keep names the regex"
    "$K" write nan.safetensors 'a.w=F32[4,4]:rand' 'b.w=F32[4,4]:nan' 'c.w=F32[4,4]:rand' || exit 1
    expect 1 "a NaN weight in the middle: exit 1" "$M" quantize nan.safetensors qnan.safetensors --scheme int8
    has err.txt "b.w" "the bad tensor is named"
    [ -e qnan.safetensors ] && bad "bad tensor left OUT" || ok "bad tensor left no OUT"
    no_temps . "bad tensor"
    # errors of quantize name the tensor as shown, never raw
    "$K" write evilq.safetensors "$evil=F32[2,4]:nan" || exit 1
    expect 1 "quantize: a NaN in a hostile-named tensor" \
        "$M" quantize evilq.safetensors evilq-out.safetensors --scheme fp8
    clean_out err.txt "rule: finite error"
    has err.txt "tensor '$shown'.*(rule: finite)" "rule: finite error: the name shown as promised"
    "$K" write evils.safetensors "$evil=F32[2,4]:rand" "${evil}_scale=F32[1]:ones" || exit 1
    expect 1 "quantize: a hostile name with its _scale taken" \
        "$M" quantize evils.safetensors evils-out.safetensors --scheme int8
    clean_out err.txt "quantize-name error"
    has err.txt "tensor '$shown'.*(rule: quantize-name)" "quantize-name error: the name shown as promised"
    # report --scheme: non-finite inputs counted apart and left out of the errors (docs/cli.md)
    "$K" write rnan.safetensors 'a.w=F32[4,40]:nan' 'b.w=BF16[3,40]:nan' 'c.w=F32[4,40]:rand' || exit 1
    for s in int8 int4 fp8 mxfp8; do
        expect 0 "report --scheme $s with a NaN input" "$M" report rnan.safetensors --scheme $s --json
        has out.txt '"a.w".*"nonfinite_inputs":1}' "report --scheme $s: the NaN counted apart"
        has out.txt '"b.w".*"nonfinite_inputs":1}' "report --scheme $s: the NaN in bfloat16 counted apart"
        if [ -n "$PY" ]; then
            # the other values are 1.0: a NaN taken into the scales would make every error NaN
            if $PY - "$s" <<'PY2'
import json, sys
by = {x['tensor']: x for x in json.load(open('out.txt'))}
for t in ('a.w', 'b.w'):
    r = by[t]
    assert r['elements'] in (160, 120) and r['overflow'] == 0, r
    assert r['sqnr_db'] == 'inf' or r['sqnr_db'] > 40, r
    assert r['max_abs_err'] != 'nan' and r['max_abs_err'] < 0.01, r
assert by['c.w']['nonfinite_inputs'] == 0 and by['c.w']['sqnr_db'] > 10
PY2
            then ok "report --scheme $s: errors of the finite values"
            else bad "report --scheme $s numbers"; cat out.txt; fi
        fi
    done
    expect 0 "report --scheme text with a NaN input" "$M" report rnan.safetensors --scheme int8
    has out.txt "^a.w  *F32  *int8" "report --scheme text lists the tensor"
else
    echo "skip quantize: this build has no quantization"
fi

echo "$fails failure(s)"
[ "$fails" = 0 ]
