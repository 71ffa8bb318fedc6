#!/bin/sh
# bench/gpu.sh: the CUDA backend in one go on a GPU machine: build, GPU tests, benchmarks.
#
#   bench/gpu.sh [--tests-only | --bench-only | --serve-only] [PRESET:TYPE ...]
#
# Builds build-cuda (-DOX_CUDA=ON, sm_90), prints the GPU, runs the CUDA op test and the model
# tests on the GPU (test_reference compares every reference model in $OX_TESTDATA with
# llama.cpp's logits, test_encoder the encoders' pooled vectors, run on the GPU since models go
# there by default; then again with only the last layer on the GPU, OX_TEST_GPU_LAYERS=1), then
# `oxidize bench -ngl 99` (pp512, tg128) on random-weight real-shape models made by gen-model in
# bench/models (the shapes of ../shared/testdata/anchors/llama-bench-cuda-h200.json). Logs go to $OUT (or
# bench/results/gpu-<time>); the last lines are the benchmark table.
#
# LLAMACPP=DIR (a folder holding llama.cpp's CUDA llama-bench and llama-batched-bench, as
# ../shared/tools/llamacpp-cuda-build.sh makes them on the same machine): llama.cpp runs on
# the same files right after oxidize, model by model, and the tables' ratios are against
# those runs; without it they are against the stored anchors (another machine and day:
# context, not a comparison).
#
# LLAMACPP_SRC=TARBALL (bench/device_prep.sh's llama-src.tar.xz): llama.cpp's llama-bench,
# llama-batched-bench and llama-server are built from it in the background (a session of their
# own, about 7 minutes on 16 cores) while oxidize builds and its tests run, and LLAMACPP points
# at them once they are done; with llama-server there, the serving benchmark runs last
# (serve_bench.py, SERVE_CLIENTS streams, on the 8B Q4_K_M).
set -e
cd "$(dirname "$0")/.."
MODE=all
case "$1" in
  --tests-only) MODE=tests; shift ;; --bench-only) MODE=bench; shift ;; --serve-only) MODE=serve; shift ;;
esac
MODELS=${*:-"llama-3.2-1b:q4_0 llama-3.2-1b:q4_k_m llama-3.2-1b:q8_0 llama-3.2-1b:f16
             llama-3-8b:q4_0 llama-3-8b:q4_k_m llama-3-8b:f16"}
LOG=${OUT:-bench/results/gpu-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$LOG"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
JOBS=$(nproc)
if [ -n "${LLAMACPP_SRC:-}" ] && [ -z "${LLAMACPP:-}" ]; then
  LLAMA_DIR=${TMPDIR:-/tmp}/ox-llama
  if [ ! -f "$LLAMA_DIR/started" ]; then # a later call on the same machine finds it going
    rm -rf "$LLAMA_DIR" && mkdir -p "$LLAMA_DIR" && tar xJf "$LLAMACPP_SRC" -C "$LLAMA_DIR"
    touch "$LLAMA_DIR/started"
    # its own session, so it outlives this call; a file says when it is done
    setsid sh -c "cmake -S '$LLAMA_DIR/llama.cpp' -B '$LLAMA_DIR/build' -DCMAKE_BUILD_TYPE=Release \
        -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF &&
      cmake --build '$LLAMA_DIR/build' -j $((JOBS * 3 / 4)) --target llama-bench \
        llama-batched-bench llama-server; echo \$? > '$LLAMA_DIR/done'" \
      </dev/null >"$LLAMA_DIR/build.log" 2>&1 &
  fi
  # oxidize's build shares the cores while it runs
  [ -f "$LLAMA_DIR/done" ] || JOBS=$((JOBS / 4 > 2 ? JOBS / 4 : 2))
fi
# LLAMACPP once the background build is done (up to 20 minutes), or unset if it failed
wait_llamacpp() {
  [ -n "${LLAMA_DIR:-}" ] && [ -z "${LLAMACPP:-}" ] || return 0
  t=0
  while [ ! -f "$LLAMA_DIR/done" ] && [ $t -lt 1200 ]; do sleep 5; t=$((t + 5)); done
  if [ "$(cat "$LLAMA_DIR/done" 2>/dev/null)" = 0 ]; then LLAMACPP=$LLAMA_DIR/build/bin
  else echo "llama.cpp's build failed or timed out:"; grep -iE "error" "$LLAMA_DIR/build.log" | head -5
  fi
}

cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DOX_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC" \
  >"$LOG/cmake.log"
# --bench-only builds what the benchmarks run, not the tests
TARGETS=; [ "$MODE" = bench ] || [ "$MODE" = serve ] && TARGETS="--target oxidize_cli gen-model bench_cuda_matmul"
cmake --build build-cuda -j "$JOBS" $TARGETS >"$LOG/build.log" 2>&1 || { tail -30 "$LOG/build.log"; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader \
  | tee "$LOG/gpu.txt"

if [ "$MODE" = all ] || [ "$MODE" = tests ]; then
  (cd build-cuda && ctest -V -R "${TESTS:-cuda|reference|decode|arch|encoder|lora|speculative}") \
    >"$LOG/tests.log" 2>&1 && echo "tests: passed" || echo "tests: FAILED"
  grep -E "checks|tests passed|Failed|FAIL|relative|prompt KL|weight types" "$LOG/tests.log" | tail -70
  # partial offload: the model tests again with only the last layer (and the output) on the GPU
  (cd build-cuda && OX_TEST_GPU_LAYERS=1 ctest -V -R "${SPLIT_TESTS:-reference|decode|arch|encoder|lora|speculative}") \
    >"$LOG/tests-split.log" 2>&1 && echo "split tests: passed" || echo "split tests: FAILED"
  grep -E "checks|tests passed|Failed|FAIL|prompt KL" "$LOG/tests-split.log" | tail -40
fi

if [ "$MODE" = all ] || [ "$MODE" = bench ]; then
  wait_llamacpp
  build-cuda/bench/bench_cuda_matmul >"$LOG/matmul.md" 2>&1 || echo "bench_cuda_matmul: failed"
  grep -E "copy|\| 1 \|" "$LOG/matmul.md"
  mkdir -p bench/models
  for m in $MODELS; do
    preset=${m%%:*} type=${m##*:}
    f=bench/models/$preset-$type.gguf
    [ -f "$f" ] || build-cuda/tools/gen-model --preset "$preset" --type "$type" "$f" \
      >>"$LOG/gen.log" 2>&1
    build-cuda/apps/oxidize/oxidize bench -m "$f" -ngl 99 -p 512 -n 128 -r "${REPS:-3}" \
      -o json >"$LOG/bench-$preset-$type.json" 2>>"$LOG/bench.log" || echo "bench $m: failed"
    [ -n "${LLAMACPP:-}" ] && { "$LLAMACPP/llama-bench" -m "$f" -ngl 99 -fa 1 -p 512 -n 128 \
      -r "${REPS:-3}" -o json >"$LOG/llama-$preset-$type.json" 2>>"$LOG/llama.log" ||
      echo "llama-bench $m: failed"; }
  done
  # batched decoding side by side: B sequences, 128 tokens each (llama-batched-bench's S_TG
  # after a 128-token prompt per sequence; oxidize from an empty cache)
  if [ -n "${LLAMACPP:-}" ]; then
    for f in ${BATCHED_MODELS:-bench/models/llama-3-8b-q4_k_m.gguf bench/models/llama-3.2-1b-q4_0.gguf}; do
      [ -f "$f" ] || continue
      build-cuda/apps/oxidize/oxidize bench -m "$f" -ngl 99 -p 0 -n 128 \
        --batch "${BATCHES:-1,8,32,128,256}" -r 2 -o json >"$LOG/batched-$(basename "$f" .gguf).json" \
        2>>"$LOG/bench.log"
      "$LLAMACPP/llama-batched-bench" -m "$f" -ngl 99 -fa on -c 65536 -b 2048 -ub 512 \
        -npp 128 -ntg 128 -npl "${BATCHES:-1,8,32,128,256}" \
        >"$LOG/llama-batched-$(basename "$f" .gguf).md" 2>&1
    done
    python3 bench/batched_table.py "$LOG"
  fi
  # batched decoding: aggregate tokens/s of N sequences at once, on the 8B Q4_K_M shape
  f=bench/models/llama-3-8b-q4_k_m.gguf
  [ -f "$f" ] && build-cuda/apps/oxidize/oxidize bench -m "$f" -ngl 99 -p 0 -n 128 \
    --batch "${BATCHES:-1,8,32,128}" -r 2 >"$LOG/batched.md" 2>>"$LOG/bench.log" &&
    cat "$LOG/batched.md"
  # partial offload: half of the 8B Q4_K_M's layers on the GPU, the rest on the CPU
  [ -f "$f" ] && build-cuda/apps/oxidize/oxidize bench -m "$f" -ngl 16 -p 512 -n 32 -r 1 \
    >"$LOG/split.md" 2>>"$LOG/bench.log" && cat "$LOG/split.md"
  # MoE routing on the device: the reference set's small MoE model against its dense sibling
  td=${OX_TESTDATA:-../shared/testdata}/models
  for m in llama-moe-f16 llama-f16; do
    [ -f "$td/$m.gguf" ] && build-cuda/apps/oxidize/oxidize bench -m "$td/$m.gguf" -ngl 99 \
      -p 64 -n 128 -r 3 2>>"$LOG/bench.log" | tail -n +3
  done | tee "$LOG/moe.md"
  grep "GPU memory" "$LOG/bench.log"
  python3 - "$LOG" "${ANCHORS:-${OX_TESTDATA:-../shared/testdata}/anchors/llama-bench-cuda-h200.json}" <<'EOF'
import glob, json, os, re, sys
# llama-bench's names for the presets and types gen-model makes
SIZE = {"llama-3.2-1b": "1B", "llama-3-8b": "8B"}
TYPE = {"q4_0": "Q4_0", "q8_0": "Q8_0", "q4_k_m": "Q4_K - Medium", "f16": "F16"}
anchor = {}
# llama-bench's runs in this lease (LLAMACPP) when there are any, else the stored anchors
same_run = glob.glob(os.path.join(sys.argv[1], "llama-*.json"))
for path in same_run or ([sys.argv[2]] if os.path.exists(sys.argv[2]) else []):
    try:
        rows = json.load(open(path))
    except ValueError:
        continue
    for r in rows:
        anchor[(r["model_type"], r["n_prompt"], r["n_gen"])] = r["avg_ts"]
print("llama.cpp: %s" % ("this run's llama-bench (same machine, same files)" if same_run else
                         "stored anchors (another machine and day: context only)"))
print("| model | test | oxidize t/s | llama.cpp t/s | ratio |")
print("| --- | --- | ---: | ---: | ---: |")
for f in sorted(glob.glob(os.path.join(sys.argv[1], "bench-*.json"))):
    preset, typ = re.match(r"bench-(.*)-([^-]*)\.json", os.path.basename(f)).groups()
    try:
        rows = json.load(open(f))
    except ValueError:
        continue
    for r in rows:
        ref = anchor.get(("llama %s %s" % (SIZE.get(preset), TYPE.get(typ)), r["n_prompt"],
                          r["n_gen"]))
        print("| %s %s | %s | %.1f | %s | %s |" % (
            preset, typ, r["test"], r["avg_ts"], "%.1f" % ref if ref else "-",
            "%.2f" % (r["avg_ts"] / ref) if ref else "-"))
EOF
fi

# serving under load (SERVE_CLIENTS=none: not here), both servers on the same file, taking turns
# round by round; --serve-only runs this alone, after a --bench-only call made the file
if [ "$MODE" != tests ] && [ "${SERVE_CLIENTS:-}" != none ]; then
  wait_llamacpp
  f=bench/models/llama-3-8b-q4_k_m.gguf
  [ -f "$f" ] || build-cuda/tools/gen-model --preset llama-3-8b --type q4_k_m "$f" >>"$LOG/gen.log" 2>&1
  if [ -n "${LLAMACPP:-}" ] && [ -x "$LLAMACPP/llama-server" ] && [ -f "$f" ]; then
    PYTHONUNBUFFERED=1 python3 bench/serve_bench.py "$f" --oxidize build-cuda/apps/oxidize/oxidize \
      --llama-server "$LLAMACPP/llama-server" --clients "${SERVE_CLIENTS:-1,8,32,128}" \
      --rounds "${SERVE_ROUNDS:-1}" -ngl 99 --log "$LOG/serve-servers.log" | tee "$LOG/serve.md"
  fi
fi
