#!/bin/sh
# bench/gpu_split.sh: a model over the GPUs of one machine (issue 27), side by side with
# llama.cpp on the same files: the split modes' GPU tests, then for each model `oxidize bench`
# (pp512, tg128) with -sm none, layer and row against `llama-bench -fa 1` with the same -sm
# (`-sm tensor` for row, below), alternating run by run, aggregate decode (--batch) against
# llama-batched-bench, the row split's decode with NCCL's all-reduce instead of the one-shot
# sums and without CUDA graphs, and rows over two processes (row2p).
#
#   LLAMACPP=DIR bench/gpu_split.sh [--tests-only | --bench-only | --report DIR] [PRESET:TYPE ...]
#
# The tests (each under a time limit, so a hung collective ends the test rather than the lease)
# are test_cuda_group (the sums themselves), test_split_modes and test_shard on the GPUs
# (test_split_modes again with OX_SPLIT_LL=0 and with OX_SPLIT_ONE_SHOT=0, for the sums' other
# paths), and one model served by two processes
# (rank 1 following rank 0 over --dist-addr on GPU 1); --bench-only skips them and the build.
# TESTS: those to run, ';' between them (an environment word may come first).
#
# Models (gen-model, in $MODELDIR, default bench/models): default llama-3-8b:f16
# llama-3-8b:q4_k_m; llama-3-70b shapes too (its f16 needs two GPUs: -sm none is left out where
# the model is larger than a GPU's memory). LLAMACPP: a folder with llama.cpp's CUDA llama-bench
# and llama-batched-bench (../shared/tools/llamacpp-cuda-build.sh builds them on the machine);
# without it only oxidize's numbers. NCCL_NVLS_ENABLE=0 is set: the lent H100/H200 hosts need
# NVLink multicast off. Knobs: ROUNDS (default 2) alternations of the two engines, REPS (2)
# repetitions within a run, MODES ("none layer row"), BATCHES ("1,8,32,128"; none skips the
# batched rows), CTX (65536: llama-batched-bench's context), EXTRA (1: the NCCL-sums, no-graphs
# and two-process rows; 0 skips them). Logs and JSON go to $OUT (or
# bench/results/split-<time>); the last lines are the tables (--report DIR prints them again).
set -e
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
MODE=all
case "${1:-}" in
--tests-only) MODE=tests; shift ;;
--bench-only) MODE=bench; shift ;;
--report) MODE=report; LOG=$2; shift 2 ;;
esac
MODELS=${*:-"llama-3-8b:f16 llama-3-8b:q4_k_m"}
MODELDIR=${MODELDIR:-bench/models}
LOG=${LOG:-${OUT:-bench/results/split-$(date +%Y%m%d-%H%M%S)}}
mkdir -p "$LOG" "$MODELDIR"
R=${REPS:-2}
if [ $MODE != report ]; then
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$LOG/gpus.txt"
lscpu | grep -E "Model name" | tee -a "$LOG/gpus.txt"
fi
if [ $MODE = all ] || [ $MODE = tests ]; then
cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DOX_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" >"$LOG/cmake.log"
cmake --build build-cuda -j "$(nproc)" --target oxidize_cli gen-model test_split_modes test_shard test_cuda_group \
  >"$LOG/build.log" 2>&1 || { grep -E "error" "$LOG/build.log" | head; exit 1; }
IFS=';'
tests=${TESTS:-"test_cuda_group;test_split_modes --gpus;test_shard;OX_SPLIT_LL=0 test_split_modes --gpus;OX_SPLIT_ONE_SHOT=0 test_split_modes --gpus"}
for t in $tests; do
  unset IFS
  name=$(echo "$t" | tr -d '-' | tr ' =' '__')
  case $t in *=*) e=${t%% *} c=${t#* } ;; *) e= c=$t ;; esac
  # shellcheck disable=SC2086 # the environment word, the test and its argument
  dir=build-cuda/tests/model && [ -x "$dir/${c%% *}" ] || dir=build-cuda/tests/backend
  env $e timeout 300 $dir/$c >"$LOG/$name.log" 2>&1 &&
    echo "$t: passed" || echo "$t: FAILED ($?)"
  grep -E "checks" "$LOG/$name.log" | tail -1
done
unset IFS
fi
O="timeout 300 build-cuda/apps/oxidize/oxidize" # a hung collective ends a run, not the lease

# llama.cpp's mode for ours: its CUDA build has no row split buffers any more ("device CUDA0 does
# not support split buffers", 2026-08): its tensor parallelism is `-sm tensor` (LLAMA_ROW_MODE).
ll_mode() { [ "$1" = row ] && echo "${LLAMA_ROW_MODE:-tensor}" || echo "$1"; }

# Two processes, one GPU each: rank 1 follows whatever rank 0's command does with the model.
two_processes() { # MODEL MODE ARGS...: rank 0's `oxidize ARGS` with rank 1 following
  f=$1 sm=$2 && shift 2
  port=$((29500 + ($$ + ${#sm}) % 1000))
  $O bench -m "$f" -ngl 99 -sm "$sm" -mg 1 --dist-addr 127.0.0.1:$port --dist-rank 1 \
    --dist-world 2 >>"$LOG/rank1.log" 2>&1 &
  $O "$@" -ngl 99 -sm "$sm" -mg 0 --dist-addr 127.0.0.1:$port --dist-rank 0 \
    --dist-world 2 2>>"$LOG/rank0.log"
  rc=$?
  wait
  return $rc
}
if [ $MODE = all ] || [ $MODE = tests ]; then
  f=$(ls "${OX_TESTDATA:-../shared/testdata}"/models/llama-q8_0.gguf)
  for sm in row layer; do # the same split in one process: the same kernels, the same text
    out=$(two_processes "$f" $sm run -m "$f" -p "The capital of France is" -n 24 --temp 0) || true
    one=$(timeout 120 $O run -m "$f" -ngl 99 -sm $sm -p "The capital of France is" -n 24 \
      --temp 0 2>/dev/null) || true
    [ -n "$out" ] && [ "$out" = "$one" ] && echo "two processes ($sm): the text of one process" ||
      printf 'two processes (%s): FAILED\n  two: %s\n  one: %s\n' $sm "$out" "$one"
  done
  [ $MODE = tests ] && exit 0
fi
[ $MODE = report ] && MODELS=
gpu_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1)
for m in $MODELS; do
  preset=${m%%:*} type=${m##*:} f=$MODELDIR/${m%%:*}-${m##*:}.gguf
  [ -f "$f" ] || build-cuda/tools/gen-model --preset "$preset" --type "$type" "$f" >>"$LOG/gen.log" 2>&1
  modes=${MODES:-"none layer row"}
  [ $(($(stat -c %s "$f") / 1048576)) -gt $((gpu_mib * 9 / 10)) ] && modes=$(echo "$modes" | sed 's/none//')
  for sm in $modes; do
    for r in $(seq "${ROUNDS:-2}"); do # alternating, so neither engine has the machine's better minutes
      $O bench -m "$f" -ngl 99 -sm "$sm" -p 512 -n 128 -r "$R" -o json \
        >"$LOG/ox-$preset-$type-$sm-$r.json" 2>>"$LOG/bench.log" || echo "oxidize $m $sm: failed"
      [ -n "${LLAMACPP:-}" ] && { timeout 600 "$LLAMACPP/llama-bench" -m "$f" -ngl 99 -fa 1 \
        -sm "$(ll_mode "$sm")" -p 512 -n 128 -r "$R" -o json >"$LOG/ll-$preset-$type-$sm-$r.json" 2>>"$LOG/llama.log" ||
        echo "llama-bench $m $sm: failed"; }
    done
    if [ "$sm" = row ] && [ "${EXTRA:-1}" = 1 ]; then # the sums through NCCL; no CUDA graphs
      OX_SPLIT_ONE_SHOT=0 $O bench -m "$f" -ngl 99 -sm row -p 0 -n 128 -r "$R" -o json \
        >"$LOG/oxn-$preset-$type-row.json" 2>>"$LOG/bench.log" || echo "oxidize $m NCCL sums: failed"
      OX_SPLIT_GRAPHS=0 $O bench -m "$f" -ngl 99 -sm row -p 0 -n 128 -r "$R" -o json \
        >"$LOG/oxg-$preset-$type-row.json" 2>>"$LOG/bench.log" || echo "oxidize $m no graphs: failed"
    fi
    [ "${BATCHES:-}" = none ] && continue
    $O bench -m "$f" -ngl 99 -sm "$sm" -p 0 -n 128 --batch "${BATCHES:-1,8,32,128}" -r 1 -o json \
      >"$LOG/oxb-$preset-$type-$sm.json" 2>>"$LOG/bench.log" || echo "oxidize $m $sm batched: failed"
    [ -n "${LLAMACPP:-}" ] && timeout 600 "$LLAMACPP/llama-batched-bench" -m "$f" -ngl 99 -fa 1 \
      -sm "$(ll_mode "$sm")" -c "${CTX:-65536}" -npp 128 -ntg 128 -npl "${BATCHES:-1,8,32,128}" \
      >"$LOG/llb-$preset-$type-$sm.txt" 2>>"$LOG/llama.log" || true
  done
  [ "${EXTRA:-1}" = 1 ] && { two_processes "$f" row bench -m "$f" -p 512 -n 128 -r "$R" -o json \
    >"$LOG/ox-$preset-$type-row2p-1.json" || echo "oxidize $m row, two processes: failed"; }
done

python3 bench/gpu_split_report.py "$LOG"
