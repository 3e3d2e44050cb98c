# Cross-compiling for 64-bit Arm Linux with Debian's gcc-aarch64-linux-gnu, running the results
# under qemu-user (CMAKE_CROSSCOMPILING_EMULATOR, so ctest and try_run use it too).
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-toolchain.cmake
# Override the compiler or sysroot with -DMXP_AARCH64_PREFIX=... / -DMXP_AARCH64_SYSROOT=...
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(MXP_AARCH64_PREFIX "aarch64-linux-gnu-" CACHE STRING "Cross tool prefix")
set(MXP_AARCH64_SYSROOT "/usr/aarch64-linux-gnu" CACHE PATH "Target libraries (qemu -L)")

set(CMAKE_C_COMPILER "${MXP_AARCH64_PREFIX}gcc")
set(CMAKE_FIND_ROOT_PATH "${MXP_AARCH64_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

find_program(MXP_QEMU_AARCH64 qemu-aarch64)
if(MXP_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${MXP_QEMU_AARCH64};-L;${MXP_AARCH64_SYSROOT}")
endif()
