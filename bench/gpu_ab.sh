#!/bin/sh
# bench/gpu_ab.sh: the working tree against a base revision on one GPU machine, in one call: both
# built side by side, then taking turns, `bench_cuda_matmul` (one token, per type and shape) and
# `oxidize bench` tg128 on gen-model files. Timings compare within one lease only; this puts
# both sides in the same one.
#
#   here:   BASE=HEAD~1 bench/gpu_ab.sh --pack     # the base tree into .device/base.tar.xz
#   there:  . .device/env.sh && bench/gpu_ab.sh [PRESET:TYPE ...]
#
# (bench/device_prep.sh makes the rest of .device/.) Default models: llama-3-8b:q4_k_m and
# llama-3.2-1b:q4_0 (gen-model writes them from a CPU build while the GPU builds run: about five
# minutes for the 8B on 16 cores). ROUNDS (2), TYPES (bench_cuda_matmul's: q4_0 q4_K q6_K q8_0),
# JOBS (all cores, shared by the two builds). The tree's tests/data stays out of the base.
set -e
cd "$(dirname "$0")/.."
if [ "$1" = --pack ]; then
  mkdir -p .device
  git archive --format=tar "${BASE:-HEAD}" -- . ':!tests/data' | xz -T0 > .device/base.tar.xz
  echo "gpu_ab: .device/base.tar.xz is $(git rev-parse --short "${BASE:-HEAD}") ($(du -h .device/base.tar.xz | cut -f1))"
  exit 0
fi
MODELS=${*:-"llama-3-8b:q4_k_m llama-3.2-1b:q4_0"}
JOBS=${JOBS:-$(nproc)}
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
BASE_DIR=${TMPDIR:-/tmp}/ox-ab-base M=${TMPDIR:-/tmp}/ox-ab-models
[ -f .device/base.tar.xz ] || { echo "gpu_ab: no .device/base.tar.xz (run --pack here first)"; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
t0=$(date +%s)

# the models, from a CPU build of gen-model, in the background
mkdir -p "$M"
(
  [ -x build-cpu/tools/gen-model ] || { cmake -S . -B build-cpu -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build build-cpu -j 4 --target gen-model >"$M/build.log" 2>&1; }
  for pt in $MODELS; do
    f=$M/${pt%%:*}-${pt##*:}.gguf
    [ -f "$f" ] || build-cpu/tools/gen-model --preset "${pt%%:*}" --type "${pt##*:}" "$f"
  done >"$M/gen.log" 2>&1
  touch "$M/done"
) &
gen=$!

# both trees' CUDA builds at once, half the cores each
build() { # build() DIR: its build-cuda, the log in build-cuda/ab.log
  cmake -S "$1" -B "$1/build-cuda" -DCMAKE_BUILD_TYPE=Release -DOX_CUDA=ON \
    -DCMAKE_CUDA_COMPILER="$NVCC" >/dev/null &&
    cmake --build "$1/build-cuda" -j $((JOBS / 2)) --target oxidize_cli bench_cuda_matmul \
      >"$1/build-cuda/ab.log" 2>&1
}
[ -d "$BASE_DIR/src" ] || { mkdir -p "$BASE_DIR" && tar xJf .device/base.tar.xz -C "$BASE_DIR"; }
build "$BASE_DIR" & base=$!
build . || { tail -20 build-cuda/ab.log; exit 1; }
wait $base || { tail -20 "$BASE_DIR/build-cuda/ab.log"; exit 1; }
echo "gpu_ab: built in $(($(date +%s) - t0)) s"

bin() { [ "$1" = base ] && echo "$BASE_DIR/build-cuda" || echo build-cuda; }
for r in $(seq "${ROUNDS:-2}"); do
  for side in base new; do
    echo "== $side, round $r: bench_cuda_matmul -n 1 (type, shape, us, % of copy)"
    "$(bin $side)/bench/bench_cuda_matmul" -n 1 ${TYPES:-q4_0 q4_K q6_K q8_0} |
      grep -E '\| 1 \|' | awk -F'|' '{print $2 $3 $5 $7}'
  done
done
wait $gen
for r in $(seq "${ROUNDS:-2}"); do
  for side in base new; do
    for pt in $MODELS; do
      f=$M/${pt%%:*}-${pt##*:}.gguf
      printf '%s round %s %s tg128: ' "$side" "$r" "$pt"
      "$(bin $side)/apps/oxidize/oxidize" bench -m "$f" -ngl 99 -p 0 -n 128 -r 2 2>/dev/null |
        grep tg128 | awk -F'|' '{print $(NF-1)}'
    done
  done
done
echo "gpu_ab: $(($(date +%s) - t0)) s"
