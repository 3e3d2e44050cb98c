#!/usr/bin/env bash
# scripts/bochs_avx512.sh - run the native AVX-512 machine code on a CPU that lacks AVX-512.
#
# The library's AVX-512 kernels are checked by `make test` in two ways: natively (test_isa,
# test_isa_exhaustive) on a CPU with AVX-512, and on emulated intrinsics (test_isa_emu512,
# test_isa_exhaustive_emu512) everywhere. The second checks our use of every intrinsic but
# not the machine code gcc emits for it. This script checks that machine code where no
# AVX-512 CPU is at hand: it boots Debian's own Linux kernel in Bochs (an x86 emulator that
# implements AVX-512 instruction by instruction, independently of gcc, SIMDe and us; CPU
# model corei7_skylake_x: AVX-512 F/CD/BW/DQ/VL, no BF16, no FP16), with an initramfs of
# busybox and the test programs, and runs them with MIXPREC_ISA=avx512 and MXP_TEST_ISA=avx512:
#   test_isa             every avx512 kernel against the scalar reference (sizes 0..1000,
#                        unaligned, special values, FTZ/DAZ, mixed data, and the streaming
#                        stores with their threshold lowered to 256 KB: MXP_TEST_NT_BYTES)
#   test_isa_exhaustive  every 2^16 / 2^8 decode in full; float32 sweeps one 2^20 block in
#                        STRIDE (default 256) in every mode
#   test_convert         the public API, dispatched to avx512 (threads included)
# (The avx512 table's finite / unscale kernels are the AVX2 ones, tested natively.)
# It prints each program's result; exit status 0: all passed, 1: a test failed or the guest did
# not finish, 2: the emulator could not be set up (missing packages, kernel download failed);
# CI treats both as failures.
#
# Bochs 2.7 erratum: its VCVTPS2PH rounds float16 ties away from zero instead of to even
# (tests/bochs/f16c_ties.h). tests/bochs/f16c_tie_probe.c detects it inside the guest; only
# then MXP_TEST_F16C_TIES_AWAY=1 makes the tests accept exactly those results (the count is
# printed), and everything else must still match the reference bit for bit.
#
# Usage: scripts/bochs_avx512.sh [build-dir]   (default: build; the tests are built there)
# Env:   STRIDE=N  (power of two; 1 = all 2^32 inputs, days of emulation), TIMEOUT=seconds.
# Needs: Debian packages bochs bochs-term bochsbios vgabios isolinux syslinux-common xorriso cpio
# busybox-static
# (installed when missing and running as root) and linux-image-amd64's kernel (fetched with
# apt-get download, not installed). About 9 minutes on one core (2.5 of them to boot); with the
# streaming checks at their real 24 MB threshold, 10 minutes more. Bochs's emulated skylake_x needs two kernel workarounds, both on the command line:
# clearcpuid=xsaves,xsavec (Bochs reports a compacted XSAVE size the kernel's layout disagrees
# with, and the kernel then turns XSAVE, and with it AVX, off).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
stride=${STRIDE:-256}
timeout_s=${TIMEOUT:-1800}
work=$build/bochs
tests="test_isa test_isa_exhaustive test_convert"

need=()
# bochs-term satisfies bochs's dependency on some GUI package (otherwise apt would pick the
# much larger bochs-wx); the run itself uses the rfb display library with no client.
for p in bochs:bochs bochs-term:/usr/lib/x86_64-linux-gnu/bochs/plugins/libbx_term_gui.so \
    bochsbios:/usr/share/bochs/BIOS-bochs-latest vgabios:/usr/share/vgabios/vgabios.bin \
    isolinux:/usr/lib/ISOLINUX/isolinux.bin \
    syslinux-common:/usr/lib/syslinux/modules/bios/ldlinux.c32 xorriso:xorriso cpio:cpio \
    busybox-static:/bin/busybox; do
    pkg=${p%%:*} what=${p#*:}
    if [[ $what == /* ]]; then [[ -e $what ]] || need+=("$pkg"); else command -v "$what" >/dev/null || need+=("$pkg"); fi
done
if ((${#need[@]})); then
    if [[ $(id -u) == 0 ]]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null
    else
        echo "bochs_avx512: missing Debian packages: ${need[*]}" >&2
        exit 2
    fi
fi
# (no `| grep -q` under pipefail: grep leaving early kills the writer with SIGPIPE)
applets=$'\n'$(/bin/busybox --list 2>/dev/null || true)$'\n'
if [[ $applets != *$'\n'poweroff$'\n'* ]]; then
    echo "bochs_avx512: /bin/busybox is not the static busybox (install busybox-static)" >&2
    exit 2
fi

mkdir -p "$work"
cd "$work"

# The kernel: Debian's, from the package linux-image-amd64 depends on (downloaded once).
if [[ ! -f vmlinuz ]]; then
    kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ && !k {k = $2} END {print k}')
    [[ -n $kpkg ]] || { echo "bochs_avx512: cannot find the kernel package" >&2; exit 2; }
    rm -rf kdeb && mkdir kdeb
    if ! (cd kdeb && apt-get download "$kpkg" >/dev/null 2>&1); then
        # stale package lists name a kernel the mirror no longer has: refresh them once
        if [[ $(id -u) == 0 ]] && apt-get update >/dev/null 2>&1; then
            kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ && !k {k = $2} END {print k}')
            (cd kdeb && apt-get download "$kpkg" >/dev/null 2>&1) ||
                { echo "bochs_avx512: apt-get download $kpkg failed" >&2; exit 2; }
        else
            echo "bochs_avx512: apt-get download $kpkg failed" >&2
            exit 2
        fi
    fi
    dpkg-deb --fsys-tarfile kdeb/*.deb | tar -x -O --wildcards './boot/vmlinuz-*' > vmlinuz.tmp
    mv vmlinuz.tmp vmlinuz
    rm -rf kdeb
fi

# The test programs, built in the given build directory.
cmake --build "$build" --target $tests -- -j"$(nproc)" >/dev/null

# initramfs: busybox, the tests and the shared libraries they load.
rm -rf rootfs && mkdir -p rootfs/bin rootfs/proc rootfs/t
cp /bin/busybox rootfs/bin/
ln -s busybox rootfs/bin/sh
gcc -O1 -static -mf16c -o rootfs/t/f16c_tie_probe "$root/tests/bochs/f16c_tie_probe.c"
for t in $tests f16c_tie_probe; do
    [[ $t == f16c_tie_probe ]] || cp "$build/tests/$t" rootfs/t/
    for lib in $(ldd "rootfs/t/$t" 2>/dev/null | grep -o '/[^ ]*'); do
        mkdir -p "rootfs$(dirname "$lib")"
        cp -L "$lib" "rootfs$lib"
    done
done
{
    echo '#!/bin/sh'
    echo '/bin/busybox mount -t proc proc /proc'
    echo 'export PATH=/bin MIXPREC_ISA=avx512 MXP_TEST_ISA=avx512 MXP_TEST_NT_BYTES=262144 MXP_EXHAUSTIVE_STRIDE='"$stride"
    echo 'cd /t'
    echo 'echo "BXRUN: guest up"'
    echo 'echo "BXRUN: flags: $(/bin/busybox grep -m1 ^flags /proc/cpuinfo | /bin/busybox tr " " "\n" | /bin/busybox grep -E "^(avx512|f16c|avx2)" | /bin/busybox tr "\n" " ")"'
    echo './f16c_tie_probe; p=$?; echo "BXRUN: f16c_tie_probe rc=$p"'
    echo '[ $p = 3 ] && export MXP_TEST_F16C_TIES_AWAY=1'
    for t in $tests; do
        echo "./$t; echo \"BXRUN: $t rc=\$? (guest uptime \$(/bin/busybox cut -d' ' -f1 /proc/uptime) s)\""
    done
    echo 'echo "BXRUN: end"'
    echo '/bin/busybox sleep 1'
    echo '/bin/busybox poweroff -f'
} > rootfs/init
chmod +x rootfs/init
rm -rf iso && mkdir -p iso/isolinux
(cd rootfs && find . | cpio -o -H newc 2>/dev/null | gzip -1) > iso/initrd.gz
cp vmlinuz iso/vmlinuz
cp /usr/lib/ISOLINUX/isolinux.bin /usr/lib/syslinux/modules/bios/ldlinux.c32 iso/isolinux/
cat > iso/isolinux/isolinux.cfg <<'EOF'
DEFAULT linux
PROMPT 0
TIMEOUT 0
LABEL linux
  KERNEL /vmlinuz
  APPEND initrd=/initrd.gz console=ttyS0,115200 rdinit=/init panic=-1 quiet loglevel=1 mitigations=off clearcpuid=xsaves,xsavec tsc=reliable lpj=2000000
EOF
xorriso -as mkisofs -quiet -o boot.iso -b isolinux/isolinux.bin -c isolinux/boot.cat \
    -no-emul-boot -boot-load-size 4 -boot-info-table iso 2>/dev/null

cat > bochsrc <<'EOF'
megs: 1024
cpu: model=corei7_skylake_x, count=1, ips=300000000, reset_on_triple_fault=0
romimage: file=/usr/share/bochs/BIOS-bochs-latest
vgaromimage: file=/usr/share/vgabios/vgabios.bin
ata0-master: type=cdrom, path=boot.iso, status=inserted
boot: cdrom
com1: enabled=1, mode=file, dev=serial.log
display_library: rfb, options="timeout=0"
log: bochs.log
panic: action=fatal
error: action=ignore
info: action=ignore
debug: action=ignore
clock: sync=none, time0=local
EOF
printf 'c\n' > debugger.rc # Debian's bochs has the debugger built in: continue at once

rm -f serial.log bochs.log
echo "bochs_avx512: booting Linux in Bochs (corei7_skylake_x), tests with MXP_EXHAUSTIVE_STRIDE=$stride; log: $work/serial.log"
start=$SECONDS
set +e
timeout "$timeout_s" bochs -q -f bochsrc -rc debugger.rc </dev/null >bochs.out 2>&1
brc=$?
set -e
tr -d '\r' < serial.log > serial.txt 2>/dev/null || : > serial.txt
grep -a -E '^(BXRUN|f16c_tie_probe|MXP_TEST_F16C|\[  (PASSED|FAILED|SKIPPED)|\[  ERROR|.*(float32 sweeps|want 0x))' serial.txt || true
echo "bochs_avx512: bochs exit status $brc (1 after the guest's power-off) after $((SECONDS - start)) s"

fails=0
grep -aq 'BXRUN: end' serial.txt || { echo "bochs_avx512: the guest did not finish (timeout or crash)"; fails=1; }
grep -aq 'BXRUN: flags: .*avx512f' serial.txt || { echo "bochs_avx512: the guest has no AVX-512"; fails=1; }
for t in $tests; do
    grep -aq "BXRUN: $t rc=0" serial.txt || { echo "bochs_avx512: $t failed"; fails=1; }
done
# test_isa must really have checked the avx512 table, not skipped it.
grep -aq '\[       OK \] test_avx512$' serial.txt || { echo "bochs_avx512: test_avx512 did not pass"; fails=1; }
exit $fails
