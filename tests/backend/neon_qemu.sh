#!/bin/sh
# neon_qemu.sh: the AArch64 NEON kernels, checked on an x86 machine: cross-compiles the CPU
# backend (core, quant, backend/cpu and its arm/ kernels, each level's files with its own -march)
# with test_qmatmul.c and test_simd_ops.c for AArch64 and runs both under qemu-aarch64 once per
# level (OX_CPU_ISA=neon, neon-dotprod, neon-i8mm; qemu's default CPU has dotprod and i8mm),
# checking that each run's kernels were that level's.
# usage: neon_qemu.sh SOURCE_DIR WORK_DIR
set -eu
src=$1
work=$2
cc=aarch64-linux-gnu-gcc
rm -rf "$work" && mkdir -p "$work/lib"
pids=""
flags="-std=c11 -O2 -Wall -Wextra -Werror -I$src/src -I$src/include -I$src/tests"
for f in "$src"/src/core/*.c "$src"/src/quant/*.c "$src"/src/backend/cpu/*.c; do
  $cc $flags -DOX_HAVE_ARM_KERNELS=1 -c "$f" -o "$work/lib/$(basename "$f" .c).o" & pids="$pids $!"
done
for f in "$src"/src/backend/cpu/arm/*.c; do
  case $f in
    *_i8mm.c) march=armv8.2-a+dotprod+i8mm ;;
    *_dotprod.c) march=armv8.2-a+dotprod ;;
    *) march=armv8-a ;;
  esac
  $cc $flags -march=$march -c "$f" -o "$work/lib/$(basename "$f" .c).o" & pids="$pids $!"
done
for t in test_qmatmul test_simd_ops; do
  $cc $flags -DOX_SOURCE_DIR="\"$src\"" -c "$src/tests/backend/$t.c" -o "$work/$t.o" & pids="$pids $!"
done
for p in $pids; do wait "$p" || { echo "neon_qemu.sh: a cross compile failed" >&2; exit 1; }; done
for t in test_qmatmul test_simd_ops; do
  $cc -static "$work/$t.o" "$work"/lib/*.o -lm -lpthread -o "$work/$t"
done
# run LEVEL TEST OUT: the test under qemu at that level, its output shown; fails with it.
run() {
  status=0
  OX_CPU_ISA=$1 qemu-aarch64 "$work/$2" > "$3" 2>&1 || status=$?
  cat "$3"
  return $status
}
for level in neon neon-dotprod neon-i8mm; do
  echo "== OX_CPU_ISA=$level"
  run $level test_qmatmul "$work/qmatmul-$level.txt"
  run $level test_simd_ops "$work/simd-$level.txt"
  # every integer type must have run on this level's kernels (each type is checked once)
  for t in q4_0 q4_1 q5_0 q5_1 q8_0 iq4_nl q2_K q3_K q4_K q5_K q6_K iq4_xs; do
    if ! grep -q "^  $t $level " "$work/qmatmul-$level.txt"; then
      echo "OX_CPU_ISA=$level: $t was not checked on the $level kernels"
      exit 1
    fi
  done
  grep -q "^neon: bit for bit" "$work/simd-$level.txt"
done
