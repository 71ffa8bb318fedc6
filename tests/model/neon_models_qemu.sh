#!/bin/sh
# neon_models_qemu.sh: the model tests on AArch64, checked on an x86 machine: cross-builds the
# library with test_reference (llama.cpp's logits), test_decode, test_arch_synthetic and
# test_speculative (batches in one-token order, bit for bit) as static
# executables (tests/aarch64-toolchain.cmake) and runs each under qemu-aarch64 at one level
# (OX_CPU_ISA=neon, neon-dotprod or neon-i8mm; qemu's "max" CPU has dotprod and i8mm). The build
# and each level are separate ctest tests (a fixture and three tests that need it), each with its
# own time limit: run one after another they took about 9 minutes on 2 cores, test_speculative
# half of that, before its engine checks ran at neon-i8mm alone.
# Emulation is slow (a minute a level for every model), so test_reference checks every model only
# at neon-i8mm (the level of current Arm servers and Macs; types without i8mm kernels run their
# dotprod ones there) and a representative set at the lower levels: Llama in the main quant
# families (q4_k_m holds q4_K and q6_K) and two other architectures. Speculation itself (drafts,
# prompt lookup: test_speculative's engine checks) runs at neon-i8mm alone; the lower levels check
# their kernels' one-token orders (OX_TEST_ENGINE_CHECKS=0). OX_TEST_MODELS, when set,
# names the models for every level (set and empty: all of them). Exits 77 (skipped) where the
# cross compilers or the arm64 libraries are missing (`make deps-arm64` installs them when root).
# usage: neon_models_qemu.sh SOURCE_DIR WORK_DIR build|neon|neon-dotprod|neon-i8mm
set -eu
src=$1
work=$2
step=$3
default_models="llama-q4_0 llama-q8_0 llama-q4_k_m llama-q6_k llama-iq4_xs llama-f16 qwen3moe-f16
  gemma3-f16"
lower_models=$(echo ${OX_TEST_MODELS-$default_models} | tr , ' ')
best_models=$(echo ${OX_TEST_MODELS-} | tr , ' ')

missing=""
for tool in aarch64-linux-gnu-gcc aarch64-linux-gnu-g++ qemu-aarch64 cmake; do
  command -v $tool >/dev/null || missing="$missing $tool"
done
# Debian multiarch (libpcre2-dev:arm64 libutf8proc-dev:arm64 libjansson-dev:arm64)
for lib in pcre2-8 utf8proc jansson; do
  [ -f /usr/lib/aarch64-linux-gnu/lib$lib.a ] || missing="$missing lib$lib.a(arm64)"
done
if [ -n "$missing" ]; then
  echo "missing$missing: skipped"
  exit 77
fi

tests="test_reference test_decode test_arch_synthetic test_speculative"
# the build folder is kept between runs: CMake rebuilds what changed
if [ "$step" = build ]; then
  mkdir -p "$work"
  if ! { cmake -S "$src" -B "$work" -DCMAKE_TOOLCHAIN_FILE="$src/tests/aarch64-toolchain.cmake" \
         -DCMAKE_BUILD_TYPE=Release &&
         cmake --build "$work" -j 2 --target $tests -- --no-print-directory; } \
       > "$work/build.log" 2>&1; then
    cat "$work/build.log"
    exit 1
  fi
  exit 0
fi

# run LEVEL TEST: the test under qemu at that level (test_reference on $models), its output
# shown and kept; fails with it.
run() {
  status=0
  OX_CPU_ISA=$1 OX_TEST_MODELS=$models OX_TEST_ENGINE_CHECKS=$engine \
    qemu-aarch64 -cpu max "$work/tests/model/$2" \
    > "$work/$2-$1.txt" 2>&1 || status=$?
  cat "$work/$2-$1.txt"
  return $status
}
level=$step
case $level in
  neon | neon-dotprod) models=$lower_models engine=0 ;;
  neon-i8mm) models=$best_models engine=1 ;;
  *) echo "unknown step $level (build, neon, neon-dotprod or neon-i8mm)"; exit 2 ;;
esac
n_models=$(echo $models | wc -w)
echo "== OX_CPU_ISA=$level (models: ${models:-all})"
for t in $tests; do
  run $level $t
done
# the models ran on this level's kernels, and every model asked for was found
if ! grep -qx "isa: $level" "$work/test_reference-$level.txt"; then
  echo "OX_CPU_ISA=$level: test_reference did not run on the $level kernels"
  exit 1
fi
if [ "$n_models" -gt 0 ] && ! grep -qx "$n_models reference models" \
     "$work/test_reference-$level.txt"; then
  echo "OX_TEST_MODELS names $n_models models, not all of them have reference files"
  exit 1
fi
