#!/bin/sh
# bench/gpu_split.sh: a model over the GPUs of one machine (issue 27), side by side with
# llama.cpp on the same files: the split modes' GPU tests, then for each model `oxidize bench`
# (pp512, tg128) with -sm none, layer and row against `llama-bench -fa 1` with the same -sm
# (`-sm tensor` for row, below), alternating run by run, aggregate decode (--batch) against
# llama-batched-bench, the split without CUDA graphs, and rows over two processes (row2p).
#
#   LLAMACPP=DIR bench/gpu_split.sh [--tests-only | --bench-only] [PRESET:TYPE ...]
#
# The tests (each under a time limit, so a hung collective ends the test rather than the lease)
# are test_split_modes and test_shard on the GPUs, and one model served by two processes (rank 1
# following rank 0 over --dist-addr on GPU 1); --bench-only skips them and the build.
#
# Models (gen-model, in bench/models): default llama-3-8b:f16 llama-3-8b:q4_k_m; llama-3-70b
# shapes too (its f16 needs two GPUs: -sm none is left out where the model is larger than a
# GPU's memory). LLAMACPP: a folder with llama.cpp's CUDA llama-bench and llama-batched-bench
# (../shared/tools/llamacpp-cuda-build.sh builds them on the machine); without it only oxidize's
# numbers. NCCL_NVLS_ENABLE=0 is set: the lent H100/H200 hosts need NVLink multicast off.
# ROUNDS (default 2): alternations of the two engines; BATCHES=none skips the batched rows.
# Logs and JSON go to $OUT (or bench/results/split-<time>); the last lines are the table.
set -e
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
MODE=all
case "${1:-}" in --tests-only) MODE=tests; shift ;; --bench-only) MODE=bench; shift ;; esac
MODELS=${*:-"llama-3-8b:f16 llama-3-8b:q4_k_m"}
LOG=${OUT:-bench/results/split-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$LOG" bench/models
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$LOG/gpus.txt"
lscpu | grep -E "Model name" | tee -a "$LOG/gpus.txt"
if [ $MODE != bench ]; then
cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DOX_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" >"$LOG/cmake.log"
cmake --build build-cuda -j "$(nproc)" --target oxidize_cli gen-model test_split_modes test_shard \
  >"$LOG/build.log" 2>&1 || { grep -E "error" "$LOG/build.log" | head; exit 1; }
for t in test_split_modes test_shard; do
  timeout 300 build-cuda/tests/model/$t >"$LOG/$t.log" 2>&1 && echo "$t: passed" ||
    echo "$t: FAILED ($?)"
  grep -E "GPU|CUDA|checks|CHECK" "$LOG/$t.log" | tail -8
done
fi
gpu_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
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
if [ $MODE != bench ]; then
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
for m in $MODELS; do
  preset=${m%%:*} type=${m##*:} f=bench/models/${m%%:*}-${m##*:}.gguf
  [ -f "$f" ] || build-cuda/tools/gen-model --preset "$preset" --type "$type" "$f" >>"$LOG/gen.log" 2>&1
  modes="none layer row"
  [ $(($(stat -c %s "$f") / 1048576)) -gt $((gpu_mib * 9 / 10)) ] && modes="layer row"
  for sm in $modes; do
    for r in $(seq "${ROUNDS:-2}"); do # alternating, so neither engine has the machine's better minutes
      $O bench -m "$f" -ngl 99 -sm "$sm" -p 512 -n 128 -r 2 -o json \
        >"$LOG/ox-$preset-$type-$sm-$r.json" 2>>"$LOG/bench.log" || echo "oxidize $m $sm: failed"
      [ -n "${LLAMACPP:-}" ] && { "$LLAMACPP/llama-bench" -m "$f" -ngl 99 -fa 1 \
        -sm "$(ll_mode "$sm")" -p 512 -n 128 -r 2 -o json >"$LOG/ll-$preset-$type-$sm-$r.json" 2>>"$LOG/llama.log" ||
        echo "llama-bench $m $sm: failed"; }
    done
    [ "$sm" != none ] && { OX_SPLIT_GRAPHS=0 $O bench -m "$f" -ngl 99 -sm "$sm" -p 0 -n 128 -r 2 \
      -o json >"$LOG/oxg-$preset-$type-$sm.json" 2>>"$LOG/bench.log" || echo "oxidize $m $sm no graphs: failed"; }
    [ "${BATCHES:-}" = none ] && continue
    $O bench -m "$f" -ngl 99 -sm "$sm" -p 0 -n 128 --batch "${BATCHES:-1,8,32,128}" -r 2 -o json \
      >"$LOG/oxb-$preset-$type-$sm.json" 2>>"$LOG/bench.log" || echo "oxidize $m $sm batched: failed"
    [ -n "${LLAMACPP:-}" ] && "$LLAMACPP/llama-batched-bench" -m "$f" -ngl 99 -fa 1 \
      -sm "$(ll_mode "$sm")" -c 65536 -npp 128 -ntg 128 -npl "${BATCHES:-1,8,32,128}" \
      >"$LOG/llb-$preset-$type-$sm.txt" 2>>"$LOG/llama.log" || true
  done
  two_processes "$f" row bench -m "$f" -p 512 -n 128 -r 2 -o json \
    >"$LOG/ox-$preset-$type-row2p-1.json" || echo "oxidize $m row, two processes: failed"
done

python3 - "$LOG" <<'EOF'
import glob, json, os, re, sys
log = sys.argv[1]

def avg(pattern, test):
    """The mean t/s of a test ("pp512", "tg128") over the runs' JSON files."""
    vals = []
    for path in glob.glob(os.path.join(log, pattern)):
        try:
            for r in json.load(open(path)):
                name = r.get("test") or ("pp%d" % r["n_prompt"] if r["n_prompt"] else
                                         "tg%d" % r["n_gen"])
                if name == test:
                    vals.append(r["avg_ts"])
        except (ValueError, KeyError):
            pass
    return sum(vals) / len(vals) if vals else None

print(open(os.path.join(log, "gpus.txt")).read().strip())
print("| model | -sm | test | oxidize t/s | llama.cpp t/s | ratio |")
print("| --- | --- | --- | ---: | ---: | ---: |")
keys = sorted({re.match(r"ox-(.*)-(\w+)-\d\.json", os.path.basename(p)).groups()
               for p in glob.glob(os.path.join(log, "ox-*.json"))})
for model, sm in keys:
    for test in ("pp512", "tg128"):
        ox = avg("ox-%s-%s-*.json" % (model, sm), test)
        ll = avg("ll-%s-%s-*.json" % (model, sm), test)
        print("| %s | %s | %s | %s | %s | %s |" % (
            model, sm, test, "%.1f" % ox if ox else "-", "%.1f" % ll if ll else "-",
            "%.2f" % (ox / ll) if ox and ll else "-"))
print()
print("the split without its steps recorded as CUDA graphs (OX_SPLIT_GRAPHS=0), tg128:")
for path in sorted(glob.glob(os.path.join(log, "oxg-*.json"))):
    try:
        print(os.path.basename(path)[4:-5], " ".join("%.1f" % r["avg_ts"] for r in json.load(open(path))))
    except ValueError:
        print(os.path.basename(path)[4:-5], "failed")
print()
print("aggregate decode (oxidize --batch; llama-batched-bench S_TG in llb-*.txt):")
for path in sorted(glob.glob(os.path.join(log, "oxb-*.json"))):
    try:
        rows = json.load(open(path))
    except ValueError:
        continue
    print(os.path.basename(path)[4:-5], " ".join("%s %.0f" % (r.get("test", "?"), r["avg_ts"])
                                               for r in rows))
EOF
