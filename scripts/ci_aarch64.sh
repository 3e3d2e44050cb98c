#!/bin/sh
# ci_aarch64.sh [BUILD_DIR] - cross-build mixprec for AArch64 with Debian's gcc-aarch64-linux-gnu
# and check the NEON kernels against the scalar reference under qemu-user.
#
# cmocka is not installed for arm64, so the library is built without the cmocka tests and the
# dependency-free checker tests/isa_check.c is compiled against it: every NEON entry at sizes
# 0..300 (unaligned, special values, index0 across 2^32), every float16/bfloat16/float8 decode,
# a strided sample of 2^MXP_AARCH64_SAMPLES float32 patterns per target and mode (default 23),
# all again with FPCR.FZ/FZ16 set, and MIXPREC_ISA dispatch. Exits non-zero on any failure.
# When run as root without the tools, it installs them with apt-get.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-aarch64}
samples=${MXP_AARCH64_SAMPLES:-23}
sysroot=/usr/aarch64-linux-gnu
cc=aarch64-linux-gnu-gcc

have() { command -v "$1" >/dev/null 2>&1; }
if ! have "$cc" || ! have qemu-aarch64; then
  if [ "$(id -u)" = 0 ] && have apt-get; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
  else
    echo "ci_aarch64: need $cc and qemu-aarch64 (apt-get install gcc-aarch64-linux-gnu qemu-user)" >&2
    exit 1
  fi
fi

echo "== configure + build (AArch64, -Werror)"
cmake -S "$root" -B "$build" -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-toolchain.cmake" \
  -DCMAKE_BUILD_TYPE=Release -DMIXPREC_WERROR=ON -DMIXPREC_BUILD_TESTS=OFF \
  -DMIXPREC_BUILD_EXAMPLES=OFF -DMIXPREC_BUILD_BENCH=OFF -DMIXPREC_BUILD_TOOLS=OFF >/dev/null
cmake --build "$build" -j2

echo "== isa_check (NEON vs scalar under qemu-aarch64)"
"$cc" -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Wpedantic -Wshadow \
  -Wstrict-prototypes -Wmissing-prototypes -Wdouble-promotion -Wvla -Werror \
  -I"$root/include" -I"$root/src" -I"$root/src/kernels" \
  "$root/tests/isa_check.c" "$build/libmixprec.a" -lpthread -lm -o "$build/isa_check"
qemu-aarch64 -L "$sysroot" "$build/isa_check" "$samples"

echo "== finite_check (NEON all_finite / unscale_check / unscale_into vs scalar under qemu-aarch64)"
"$cc" -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Wpedantic -Wshadow \
  -Wstrict-prototypes -Wmissing-prototypes -Wdouble-promotion -Wvla -Werror \
  -I"$root/include" -I"$root/src" -I"$root/src/kernels" \
  "$root/tests/finite_check.c" "$build/libmixprec.a" -lpthread -lm -o "$build/finite_check"
qemu-aarch64 -L "$sysroot" "$build/finite_check"

echo "== quant_check (quantization on the neon and scalar tables, default and hostile FP environment)"
"$cc" -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Wpedantic -Wshadow \
  -Wstrict-prototypes -Wmissing-prototypes -Wdouble-promotion -Wvla -Werror \
  -I"$root/include" -I"$root/src" -I"$root/src/kernels" \
  "$root/tests/quant_check.c" "$build/libmixprec.a" -lpthread -lm -o "$build/quant_check"
qemu-aarch64 -L "$sysroot" "$build/quant_check"

echo "== dispatch: default and MIXPREC_ISA"
out=$(qemu-aarch64 -L "$sysroot" "$build/isa_check" 16 | head -n 1)
case "$out" in *"active path neon"*) ;; *) echo "expected neon by default, got: $out" >&2; exit 1 ;; esac
out=$(MIXPREC_ISA=scalar qemu-aarch64 -L "$sysroot" "$build/isa_check" 16 | head -n 1)
case "$out" in *"active path scalar"*) ;; *) echo "MIXPREC_ISA=scalar: got: $out" >&2; exit 1 ;; esac
out=$(MIXPREC_ISA=avx512 qemu-aarch64 -L "$sysroot" "$build/isa_check" 16 | head -n 1)
case "$out" in *"active path scalar"*) ;; *) echo "MIXPREC_ISA=avx512 on Arm should fall back to scalar: $out" >&2; exit 1 ;; esac
echo "ci_aarch64: OK"
