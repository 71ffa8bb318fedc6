# aarch64-toolchain.cmake: cross-builds the library and its tests for AArch64 Linux on an x86
# Debian host (tests/model/neon_models_qemu.sh), static executables that qemu-aarch64 runs with
# no sysroot. Needs gcc/g++-aarch64-linux-gnu and the arm64 multiarch -dev packages of PCRE2,
# utf8proc and jansson (`make deps-arm64`, part of `make test`, installs them when it can).
#
# CMAKE_FIND_LIBRARY_SUFFIXES is reset to ".so;.a" by CMake's platform defaults after this file
# is read, so the file names itself as CMAKE_PROJECT_INCLUDE and, on that second reading (after
# project(), the suffixes then defined), makes find_library take the static archives: with
# -static, pkg-config's imported targets must name .a files, not .so ones.
if(DEFINED CMAKE_FIND_LIBRARY_SUFFIXES)
  set(CMAKE_FIND_LIBRARY_SUFFIXES .a)
  return()
endif()
set(CMAKE_PROJECT_INCLUDE ${CMAKE_CURRENT_LIST_FILE})

set(CMAKE_SYSTEM_NAME Linux)
# aarch64 makes src/backend/CMakeLists.txt build the arm/ kernels, each level with its -march
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
set(CMAKE_EXE_LINKER_FLAGS_INIT -static)
# pkg-config reads the arm64 .pc files only (the cross gcc already searches the multiarch
# include and library folders /usr/{include,lib}/aarch64-linux-gnu)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
