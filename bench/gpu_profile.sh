#!/bin/sh
# bench/gpu_profile.sh: where a decode token's GPU time goes, kernel by kernel.
#
#   bench/gpu_profile.sh MODEL.gguf [TOKENS]
#   BATCH=128 bench/gpu_profile.sh MODEL.gguf [TOKENS]   # steps of 128 sequences' next tokens
#
# Runs `oxidize bench -p 0 -n TOKENS` (default 3) under Nsight Compute, which times every kernel
# on its own (caches left warm, clocks not locked), and prints per kernel: launches per token,
# microseconds per launch, and the share of the GPU time. Kernels run one at a time under ncu,
# so the sum is kernel time without launch gaps; set it beside `oxidize bench`'s tokens/s to
# see what the gaps cost. Then one layer of the last token, kernel by kernel (from after the
# first layer's attention to after the second's). With BATCH=B every step decodes B sequences'
# next tokens (`--batch B`), and "per token" reads per step. Needs ncu and the build-cuda build
# (bench/gpu.sh makes it).
set -e
cd "$(dirname "$0")/.."
MODEL=${1:?usage: bench/gpu_profile.sh MODEL.gguf [TOKENS]}
TOKENS=${2:-3}
CSV=${TMPDIR:-/tmp}/ox-profile-$$.csv
ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
  build-cuda/apps/oxidize/oxidize bench -m "$MODEL" -ngl 99 -p 0 -n "$TOKENS" -r 1 ${BATCH:+--batch "$BATCH"} \
  >"$CSV" 2>/dev/null
python3 - "$CSV" <<'EOF'
import csv, re, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 14]
head, rows = rows[0], rows[1:]
name, unit, value = head.index("Kernel Name"), head.index("Metric Unit"), head.index("Metric Value")
scale = {"ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "nsecond": 1e-3}
kern = []
for r in rows:
    n = re.sub(r"^void ", "", r[name])
    n = n[:n.index(">(") + 1] if ">(" in n else n.split("(")[0]  # drop the parameters
    n = n.replace("(ox_dtype)", "type ")
    kern.append((n, float(r[value].replace(",", "")) * scale.get(r[unit], 1e-3)))
# a token starts at each embedding lookup (get_rows of the token embeddings into floats; the
# cuBLAS path's get_rows into halves dequantizes weights)
starts = [i for i, (n, _) in enumerate(kern) if n.startswith("rows_kernel") and n.endswith("float>")]
tokens = max(len(starts), 1)
total = sum(t for _, t in kern)
agg = {}
for n, t in kern:
    c, s = agg.get(n, (0, 0.0))
    agg[n] = (c + 1, s + t)
print("tokens profiled: %d, kernels per token: %.0f, GPU time per token: %.1f us"
      % (tokens, len(kern) / tokens, total / tokens))
print("| kernel | launches/token | us/launch | share |")
print("| --- | ---: | ---: | ---: |")
for n, (c, s) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
    print("| %s | %.0f | %.2f | %.1f%% |" % (n[:60], c / tokens, s / c, 100 * s / total))
# the second layer of the last token, in order: which matmul of a layer takes what
if starts:
    first = [i for i in range(starts[-1], len(kern)) if "attention" in kern[i][0]]
    if len(first) > 2:
        print("\n| a layer, in order | us |\n| --- | ---: |")
        for n, t in kern[first[1] + 1:first[2] + 1]:
            print("| %s | %.2f |" % (n[:60], t))
EOF
rm -f "$CSV"
