# Cross build for 64-bit Arm Linux with Debian's gcc-aarch64-linux-gnu and
# libc6-dev-arm64-cross (scripts/deps.sh installs them):
#
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
#
# The code is compiled for the armv8-a baseline (no -march=native: the build
# machine is not the target), so only the portable kernels exist. ctest runs
# the test binaries through qemu-user (qemu-aarch64 or qemu-aarch64-static)
# with the cross C library as the root of the target's dynamic loader.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(LT_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${LT_CROSS_TRIPLE}-gcc)
set(LT_CROSS_SYSROOT /usr/${LT_CROSS_TRIPLE})

# Headers and libraries come from the cross tree (and from Debian's multiarch
# arm64 directories, where libfoo-dev:arm64 packages install); programs run
# during the build (protoc-c, python3) come from the build machine.
set(CMAKE_FIND_ROOT_PATH ${LT_CROSS_SYSROOT})
set(CMAKE_LIBRARY_ARCHITECTURE ${LT_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

set(LT_NATIVE OFF CACHE BOOL "compile for the build machine's ISA (-march=native)")

find_program(LT_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(LT_QEMU_AARCH64)
  # The cross sysroot's loader with its own libc: where Debian's arm64
  # multiarch libc is installed too (the arm64 PCRE2 pulls it in), the
  # loader would otherwise take /lib/aarch64-linux-gnu's, of another glibc
  # build, and threaded programs hang. Other libraries still come from there.
  set(CMAKE_CROSSCOMPILING_EMULATOR ${LT_QEMU_AARCH64} -L ${LT_CROSS_SYSROOT}
      -E LD_LIBRARY_PATH=${LT_CROSS_SYSROOT}/lib)
endif()
