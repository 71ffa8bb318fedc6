#!/bin/sh
# bench/gpu_split.sh: a model over the GPUs of one machine (issue 27), side by side with
# llama.cpp on the same files: the split modes' GPU tests, then for each model `oxidize bench`
# (pp512, tg128) with -sm none, layer and row against `llama-bench -fa 1` with the same -sm,
# alternating run by run, and aggregate decode (--batch) against llama-batched-bench.
#
#   LLAMACPP=DIR bench/gpu_split.sh [PRESET:TYPE ...]
#
# Models (gen-model, in bench/models): default llama-3-8b:f16 llama-3-8b:q4_k_m; llama-3-70b
# shapes too (its f16 needs two GPUs: -sm none is left out where the model is larger than a
# GPU's memory). LLAMACPP: a folder with llama.cpp's CUDA llama-bench and llama-batched-bench
# (../shared/tools/llamacpp-cuda-build.sh builds them on the machine); without it only oxidize's
# numbers. NCCL_NVLS_ENABLE=0 is set: the lent H100/H200 hosts need NVLink multicast off.
# Logs and JSON go to $OUT (or bench/results/split-<time>); the last lines are the table.
set -e
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
MODELS=${*:-"llama-3-8b:f16 llama-3-8b:q4_k_m"}
LOG=${OUT:-bench/results/split-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$LOG" bench/models
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$LOG/gpus.txt"
lscpu | grep -E "Model name" | tee -a "$LOG/gpus.txt"
cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DOX_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" >"$LOG/cmake.log"
cmake --build build-cuda -j "$(nproc)" --target oxidize_cli gen-model test_split_modes test_shard \
  >"$LOG/build.log" 2>&1 || { grep -E "error" "$LOG/build.log" | head; exit 1; }
for t in test_split_modes test_shard; do
  build-cuda/tests/model/$t >"$LOG/$t.log" 2>&1 && echo "$t: passed" || echo "$t: FAILED"
  grep -E "GPU|CUDA|checks" "$LOG/$t.log" | tail -8
done

gpu_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
O=build-cuda/apps/oxidize/oxidize
for m in $MODELS; do
  preset=${m%%:*} type=${m##*:} f=bench/models/${m%%:*}-${m##*:}.gguf
  [ -f "$f" ] || build-cuda/tools/gen-model --preset "$preset" --type "$type" "$f" >>"$LOG/gen.log" 2>&1
  modes="none layer row"
  [ $(($(stat -c %s "$f") / 1048576)) -gt $((gpu_mib * 9 / 10)) ] && modes="layer row"
  for sm in $modes; do
    for r in 1 2; do # alternating, so neither engine has the machine's better minutes
      $O bench -m "$f" -ngl 99 -sm "$sm" -p 512 -n 128 -r 2 -o json \
        >"$LOG/ox-$preset-$type-$sm-$r.json" 2>>"$LOG/bench.log" || echo "oxidize $m $sm: failed"
      [ -n "${LLAMACPP:-}" ] && { "$LLAMACPP/llama-bench" -m "$f" -ngl 99 -fa 1 -sm "$sm" -p 512 \
        -n 128 -r 2 -o json >"$LOG/ll-$preset-$type-$sm-$r.json" 2>>"$LOG/llama.log" ||
        echo "llama-bench $m $sm: failed"; }
    done
    [ "$sm" = row ] && { OX_SPLIT_GRAPHS=1 $O bench -m "$f" -ngl 99 -sm row -p 0 -n 128 -r 2 -o json \
      >"$LOG/oxg-$preset-$type-row.json" 2>>"$LOG/bench.log" || echo "oxidize $m row graphs: failed"; }
    $O bench -m "$f" -ngl 99 -sm "$sm" -p 0 -n 128 --batch "${BATCHES:-1,8,32,128}" -r 2 -o json \
      >"$LOG/oxb-$preset-$type-$sm.json" 2>>"$LOG/bench.log" || echo "oxidize $m $sm batched: failed"
    [ -n "${LLAMACPP:-}" ] && "$LLAMACPP/llama-batched-bench" -m "$f" -ngl 99 -fa 1 -sm "$sm" \
      -c 65536 -npp 128 -ntg 128 -npl "${BATCHES:-1,8,32,128}" \
      >"$LOG/llb-$preset-$type-$sm.txt" 2>>"$LOG/llama.log" || true
  done
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
print("row split with its steps recorded as CUDA graphs (OX_SPLIT_GRAPHS=1), tg128:")
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
