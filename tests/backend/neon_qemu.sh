#!/bin/sh
# neon_qemu.sh: the AArch64 NEON kernels, checked on an x86 machine: cross-compiles the CPU
# backend (core, quant, backend/cpu and its arm/ kernels) with test_qmatmul.c for AArch64 and
# runs it under qemu-aarch64, whose CPU has the dot-product extension.
# usage: neon_qemu.sh SOURCE_DIR WORK_DIR
set -eu
src=$1
work=$2
cc=aarch64-linux-gnu-gcc
rm -rf "$work" && mkdir -p "$work"
flags="-std=c11 -O2 -Wall -Wextra -Werror -I$src/src -I$src/include -I$src/tests"
for f in "$src"/src/core/*.c "$src"/src/quant/*.c "$src"/src/backend/cpu/*.c; do
  $cc $flags -DOX_HAVE_ARM_KERNELS=1 -c "$f" -o "$work/$(basename "$f" .c).o" &
done
for f in "$src"/src/backend/cpu/arm/*_neon.c; do
  $cc $flags -march=armv8.2-a+dotprod -c "$f" -o "$work/$(basename "$f" .c).o" &
done
$cc $flags -DOX_SOURCE_DIR="\"$src\"" -c "$src/tests/backend/test_qmatmul.c" -o "$work/test_qmatmul.o" &
wait
$cc -static "$work"/*.o -lm -lpthread -o "$work/test_qmatmul"
qemu-aarch64 "$work/test_qmatmul" | tee "$work/out.txt"
grep -q "neon-dotprod" "$work/out.txt" # the NEON set must have been the one checked
