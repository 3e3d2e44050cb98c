#!/bin/sh
# deps.sh build|demo|bench|ci - make sure the Debian packages a target needs are installed.
# Installs them with apt-get when running as root (or with password-less sudo); otherwise
# prints the exact command to run and fails.
set -e
what=${1:-build}
pkgs=""
need() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed' || pkgs="$pkgs $1"; }

need cmake; need make; need gcc; need pkg-config; need libcmocka-dev; need zlib1g-dev
# jansson: the JSON header of safetensors files (the mixprec tool, tools/)
need libjansson-dev
# locales: the de_DE source tests/CMakeLists.txt builds a decimal-comma locale from (localedef,
# into the build tree) for the locale-independence tests; they skip without it
need locales
# SIMDe: portable AVX-512 intrinsics for the emulated-AVX-512 tests (headers only, tests only)
[ "$(uname -m)" = x86_64 ] && need libsimde-dev
case "$what" in
  # Open MPI: train_mlp_mpi (data-parallel train_mlp, the demo's mpirun row, ctest -L mpi)
  # gnuplot-nox: the demo's plot of the curves (build/demo/curves.png)
  demo) need dataset-fashion-mnist; need openmpi-bin; need libopenmpi-dev; need gnuplot-nox ;;
  # optional: bench_qmatmul's OpenBLAS cblas_sgemm baseline (the benchmarks build without it)
  bench) need libopenblas-dev ;;
  ci) need dataset-fashion-mnist; need clang; need gcc-aarch64-linux-gnu; need libc6-dev-arm64-cross
      # scan-build: the static analyzer step (scripts/analyze.sh)
      need clang-tools
      need openmpi-bin; need libopenmpi-dev
      need qemu-user
      # scripts/bochs_avx512.sh: the AVX-512 machine code in an emulator (x86-64 only)
      if [ "$(uname -m)" = x86_64 ]; then
        need bochs; need bochs-term; need bochsbios; need vgabios; need isolinux; need syslinux-common
        need xorriso; need cpio
        need busybox-static
      fi ;;
esac
[ -z "$pkgs" ] && exit 0

if [ "$(id -u)" = 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO="sudo -n"
else
  echo "mixprec: missing Debian packages:$pkgs" >&2
  echo "install them with:  sudo apt-get install -y$pkgs" >&2
  exit 1
fi
echo "mixprec: installing$pkgs" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y $pkgs >/dev/null 2>&1 || { $SUDO apt-get update >/dev/null && $SUDO apt-get install -y $pkgs; }
