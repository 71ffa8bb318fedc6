#!/bin/sh
# bench/gpu_vulkan.sh: the Vulkan backend on a lent NVIDIA machine in one go, after
# bench/device_prep.sh and bench/vulkan_prep.sh made .device/ here: the Vulkan loader set up,
# oxidize built with -DOX_VULKAN=ON (Debian 13's glslc: cooperative matrices) and with
# -DOX_CUDA=ON, its Vulkan tests on the GPU, then the engines taking turns model by model:
# oxidize on Vulkan, llama.cpp's Vulkan llama-bench (after a warm-up run per file: its first run
# compiles its pipelines), oxidize's CUDA backend, and the base tree (the same tests: a
# same-lease A/B) where .device/base.tar.xz is there. Then batched decode against
# llama-batched-bench, the last model's profiles (OX_VK_PROFILE), and, with SERVE=1,
# serve_bench.py against llama-server (two rounds: the first compiles its pipelines). Results under
# bench/results/vulkan-<time> (on a lent machine, packed into $OUT: see LOG), the table last.
#
#   bench/gpu_vulkan.sh [PRESET:TYPE ...]   (default: llama-3.2-1b:q4_k_m llama-3.2-1b:f16
#                                            llama-3-8b:q4_k_m)
#
# Environment: REPS (3) runs a round, ROUNDS (2: the engines take turns model by model, round
# after round, and the table pools every round's runs, so a slow spell of the machine falls on
# all of them), PP (512) and TG (128) tokens, BATCHES (1,8,32), TESTS=0 (skip the tests), CUDA=0
# (no CUDA build: also where there is no nvcc), SERVE=1, SERVE_CLIENTS.
set -eu
cd "$(dirname "$0")/.."
R=$(pwd)
MODELS=${*:-"llama-3.2-1b:q4_k_m llama-3.2-1b:f16 llama-3-8b:q4_k_m"}
# On a lent machine ($OUT set) only 8 files come back: the results are written to a folder of
# their own and packed into $OUT/vulkan-results.tgz at the end (also after a failure), beside
# table.md and tests.txt.
if [ -n "${OUT:-}" ]; then
  LOG=/tmp/gpu-vulkan-results
  rm -rf "$LOG"
  trap 'tar czf "$OUT/vulkan-results.tgz" -C "$LOG" . 2>/dev/null;
        cp "$LOG/table.md" "$LOG/tests.txt" "$OUT/" 2>/dev/null || true' EXIT
else
  LOG=bench/results/vulkan-$(date +%Y%m%d-%H%M%S)
fi
mkdir -p "$LOG" bench/models
J=$(nproc)

# the loader (NVIDIA's ICD is on the machine), glslc through its own C library, libraries, data
for f in .device/gl/*.deb; do dpkg -x "$f" /; done
ldconfig
[ -d /tmp/trixie-root ] || { mkdir -p /tmp/trixie-root && tar xJf .device/glslc.tar.xz -C /tmp/trixie-root; }
cat >/tmp/trixie-glslc <<'W'
#!/bin/sh
R=/tmp/trixie-root
exec $R/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --library-path $R/usr/lib/x86_64-linux-gnu $R/usr/bin/glslc "$@"
W
chmod +x /tmp/trixie-glslc
. .device/env.sh
icd=$(ls /usr/share/vulkan/icd.d/*nvidia*.json /etc/vulkan/icd.d/*nvidia*.json \
  /usr/local/nvidia/share/vulkan/icd.d/*.json 2>/dev/null | head -1 || true)
[ -n "$icd" ] && export VK_DRIVER_FILES="$icd"
[ -d /tmp/llvk ] || { mkdir -p /tmp/llvk && tar xJf .device/llvk.tar.xz -C /tmp/llvk; }
LL=/tmp/llvk/bin
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader \
  | tee "$LOG/gpu.txt"
lscpu | grep -E "Model name|Flags" >"$LOG/lscpu.txt"
cat .device/llvk.version 2>/dev/null | tee "$LOG/llama-version.txt" || true

build() { # SRC BUILD CMAKE-OPTION TARGETS...
  s=$1 b=$2 opt=$3; shift 3
  cmake -S "$s" -B "$b" -DCMAKE_BUILD_TYPE=Release "$opt" -DVulkan_GLSLC_EXECUTABLE=/tmp/trixie-glslc \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc >"$b.cfg.log" 2>&1 &&
    cmake --build "$b" -j "$J" --target "$@" >"$b.log" 2>&1 ||
    { echo "build of $b failed:"; grep -iE "error" "$b.log" "$b.cfg.log" | head -20; exit 1; }
}
rm -f /tmp/ox-cuda.done
[ "${CUDA:-1}" != 0 ] && [ -x /usr/local/cuda/bin/nvcc ] &&
  { (build "$R" /tmp/ox-cuda -DOX_CUDA=ON oxidize_cli && touch /tmp/ox-cuda.done) >"$LOG/cuda-build.txt" 2>&1 & }
build "$R" /tmp/ox-vk -DOX_VULKAN=ON oxidize_cli gen-model test_vulkan_ops test_vulkan_graph \
  test_vulkan_recurrent test_vulkan_group_fold test_vulkan_rope_fold test_vulkan_norm_in \
  test_vulkan_attention test_reference test_decode
BASE=
if [ -f .device/base.tar.xz ]; then
  rm -rf /tmp/ox-base-src && mkdir -p /tmp/ox-base-src && tar xJf .device/base.tar.xz -C /tmp/ox-base-src
  build /tmp/ox-base-src /tmp/ox-base -DOX_VULKAN=ON oxidize_cli && BASE=/tmp/ox-base/apps/oxidize/oxidize
fi
for m in $MODELS; do
  f=bench/models/${m%%:*}-${m##*:}.gguf
  [ -f "$f" ] || /tmp/ox-vk/tools/gen-model --preset "${m%%:*}" --type "${m##*:}" "$f" >/dev/null 2>&1 &
done
if [ "${TESTS:-1}" != 0 ]; then
  (cd /tmp/ox-vk && export OX_DEVICE=vulkan &&
    ./tests/backend/test_vulkan_ops | tail -1 && ./tests/backend/test_vulkan_graph | tail -1 &&
    ./tests/backend/test_vulkan_recurrent | tail -1 &&
    ./tests/backend/test_vulkan_group_fold | tail -1 &&
    ./tests/backend/test_vulkan_rope_fold | tail -1 &&
    ./tests/backend/test_vulkan_norm_in | tail -1 &&
    ./tests/backend/test_vulkan_attention | tail -1 &&
    OX_TEST_GPU_LAYERS=99 OX_TEST_SKIP_MODELS=llama-bf16 \
      ./tests/model/test_reference 2>&1 | tail -1) >"$LOG/tests.txt" 2>&1 || true
  cat "$LOG/tests.txt"
fi
wait
[ -f /tmp/ox-cuda.done ] || [ ! -f "$LOG/cuda-build.txt" ] ||
  { echo "the CUDA build failed:"; tail -5 "$LOG/cuda-build.txt"; }

OX=/tmp/ox-vk/apps/oxidize/oxidize
PP=${PP:-512} TG=${TG:-128}
P="-ngl 99 -p $PP -n $TG -r ${REPS:-3} -o json"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for m in $MODELS; do
    b=${m%%:*}-${m##*:} f=bench/models/${m%%:*}-${m##*:}.gguf
    # warm-ups, both engines: a fresh machine's first runs of a file ran at a third of the speed
    # (session 26: oxidize's 1B pp512 read 6-8k then 29k, llama.cpp's compiles its pipelines)
    [ "$round" = 1 ] && {
      OX_DEVICE=vulkan $OX bench -m "$f" -ngl 99 -p "$PP" -n 16 -r 1 >/dev/null 2>&1 || true
      "$LL/llama-bench" -m "$f" -ngl 99 -fa 1 -p "$PP" -n 16 -r 1 >/dev/null 2>&1 || true
    }
    # shellcheck disable=SC2086
    OX_DEVICE=vulkan $OX bench -m "$f" $P >"$LOG/vk-$b.$round.json" 2>>"$LOG/bench.log"
    # shellcheck disable=SC2086
    "$LL/llama-bench" -m "$f" -fa 1 $P >"$LOG/llama-$b.$round.json" 2>>"$LOG/llama.log"
    # shellcheck disable=SC2086
    [ -n "$BASE" ] && OX_DEVICE=vulkan $BASE bench -m "$f" $P >"$LOG/base-$b.$round.json" \
      2>>"$LOG/bench.log"
    # shellcheck disable=SC2086
    [ -f /tmp/ox-cuda.done ] && OX_DEVICE=cuda /tmp/ox-cuda/apps/oxidize/oxidize bench -m "$f" $P \
      >"$LOG/cuda-$b.$round.json" 2>>"$LOG/bench.log"
  done
done
first=bench/models/$(echo "$MODELS" | awk '{print $1}' | sed 's/:/-/').gguf
# a warm-up first, both engines: their first batches compile their pipelines (oxidize's 8
# sequences 2587 +- 1626 t/s without one in session 35, 3752 after one; llama-batched-bench's 1 and
# 8 211 and 1484 without one in session 33, 667 and 2227 after one)
OX_DEVICE=vulkan $OX bench -m "$first" -ngl 99 -p 0 -n 4 --batch "${BATCHES:-1,8,32}" -r 1 \
  >/dev/null 2>>"$LOG/bench.log" || true
OX_DEVICE=vulkan $OX bench -m "$first" -ngl 99 -p 0 -n "$TG" --batch "${BATCHES:-1,8,32}" -r 2 \
  >"$LOG/batched-vk.md" 2>>"$LOG/bench.log"
"$LL/llama-batched-bench" -m "$first" -ngl 99 -fa on -c 16384 -b 2048 -ub 512 -npp 128 -ntg 4 \
  -npl "${BATCHES:-1,8,32}" >/dev/null 2>&1 || true
"$LL/llama-batched-bench" -m "$first" -ngl 99 -fa on -c 16384 -b 2048 -ub 512 -npp 128 -ntg "$TG" \
  -npl "${BATCHES:-1,8,32}" >"$LOG/batched-llama.md" 2>&1
last=bench/models/$(echo "$MODELS" | awk '{print $NF}' | sed 's/:/-/').gguf
OX_VK_PROFILE=1 OX_DEVICE=vulkan $OX bench -m "$last" -ngl 99 -p 0 -n 32 -r 1 >"$LOG/profile.txt" 2>&1
OX_VK_PROFILE=1 OX_DEVICE=vulkan $OX bench -m "$last" -ngl 99 -p "$PP" -n 0 -r 1 \
  >"$LOG/profile-prompt.txt" 2>&1
if [ "${SERVE:-0}" = 1 ]; then
  OX_DEVICE=vulkan PYTHONUNBUFFERED=1 python3 bench/serve_bench.py "$last" --oxidize "$OX" \
    --llama-server "$LL/llama-server" --clients "${SERVE_CLIENTS:-1,8,32}" --rounds 2 -ngl 99 \
    --log "$LOG/serve-servers.log" >"$LOG/serve.md" 2>&1 || true
fi
cat "$LOG/batched-vk.md" "$LOG/batched-llama.md" | grep "|"
python3 - "$LOG" "pp$PP" "tg$TG" <<'EOF' | tee "$LOG/table.md"
import glob, json, os, statistics, sys
# one row per model and test: oxidize Vulkan, llama.cpp Vulkan, oxidize CUDA, the base tree,
# each the mean and spread of every round's runs (ENGINE-MODEL.ROUND.json) and how many
def key(r):
    if "test" in r:
        return r["test"]
    return "pp%d" % r["n_prompt"] if r["n_prompt"] else "tg%d" % r["n_gen"]
def samples(engine, name):
    by_test = {}
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "%s-%s.*.json" % (engine, name)))):
        try:
            for r in json.load(open(path)):
                by_test.setdefault(key(r), []).extend(r["samples_ts"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    return by_test
def ts(v):
    return "%.1f ± %.1f (%d)" % (statistics.mean(v), statistics.pstdev(v), len(v)) if v else "-"
def ratio(a, b):
    return "%.2f" % (statistics.mean(a) / statistics.mean(b)) if a and b else "-"
print("| model | test | oxidize Vulkan | llama.cpp Vulkan | oxidize CUDA | base | Vulkan / llama.cpp | Vulkan / CUDA |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
names = sorted({os.path.basename(p)[3:].rsplit(".", 2)[0]
                for p in glob.glob(os.path.join(sys.argv[1], "vk-*.json"))})
for name in names:
    vk, llama, cu, base = (samples(e, name) for e in ("vk", "llama", "cuda", "base"))
    for test in sys.argv[2:]:
        v, l, c, b = vk.get(test), llama.get(test), cu.get(test), base.get(test)
        print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (name, test, ts(v), ts(l), ts(c), ts(b),
                                                          ratio(v, l), ratio(v, c)))
EOF
