#!/bin/sh
# web.sh: oxidize's browser build against wllama (llama.cpp for WebAssembly, npm @wllama/wllama)
# in one headless Chromium, on the kjv model and a gen-model Qwen2.5-0.5B-shape Q4_0, the same
# threads (bench/web_bench.mjs; method in bench/README.md). Needs make web and the release build
# (for gen-model); fetches wllama and playwright-core from the npm registry once.
#   bench/web.sh [THREADS] [ROUNDS]       (from the repository root)
set -eu
threads=${1:-2}
rounds=${2:-3}
root=$(pwd)
data=${OX_TESTDATA:-$root/../shared/testdata}
work=$root/build-web/bench
mkdir -p "$work/site" "$work/npm"
[ -f build-web/site/oxidize-core.wasm ] || { echo "web.sh: make web first"; exit 1; }
[ -d "$work/npm/node_modules/@wllama/wllama" ] && [ -d "$work/npm/node_modules/playwright-core" ] ||
  npm install --prefix "$work/npm" --no-audit --no-fund --no-save @wllama/wllama playwright-core@1 \
    >/dev/null
qwen=$work/qwen2.5-0.5b-q4_0.gguf
[ -f "$qwen" ] || build/tools/gen-model --preset qwen2.5-0.5b --type Q4_0 "$qwen" >/dev/null
# the site: oxidize's files, wllama's, the two models (links)
for f in build-web/site/*; do ln -sf "$root/$f" "$work/site/"; done
ln -sfn "$work/npm/node_modules/@wllama/wllama" "$work/site/wllama"
ln -sf "$data/models/kjv-15m-q4_k_m.gguf" "$work/site/kjv-15m-q4_k_m.gguf"
ln -sf "$qwen" "$work/site/qwen2.5-0.5b-q4_0.gguf"
port=8095
node web/serve.mjs "$work/site" --port $port >/dev/null &
server=$!
trap 'kill $server' EXIT
sleep 1
echo "lscpu: $(lscpu | sed -n 's/^Model name: *//p'); flags: $(grep -o -w 'avx2\|avx512f\|avx512_vnni\|avx_vnni' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "chromium: $(chromium --version 2>/dev/null); wllama $(sed -n 's/.*"version": "\(.*\)".*/\1/p' "$work/npm/node_modules/@wllama/wllama/package.json")"
for model in kjv-15m-q4_k_m.gguf qwen2.5-0.5b-q4_0.gguf; do
  node bench/web_bench.mjs "$work/npm/node_modules" "http://127.0.0.1:$port" "$model" "$threads" \
    128 64 "$rounds" > "$work/$model.json"
  python3 - "$work/$model.json" "$model" <<'EOF'
import json, statistics, sys
d = json.load(open(sys.argv[1]))
def med(engine, key):
    return statistics.median(r[key] for r in d["rows"] if r["engine"] == engine)
print("%s (%s), %d threads, %d rounds:" % (sys.argv[2], d["model"], d["threads"], len(d["rows"]) // 2))
print("| engine | prompt tokens | pp t/s | tg t/s | wall ms |")
print("| --- | ---: | ---: | ---: | ---: |")
for e in ("oxidize", "wllama"):
    print("| %s | %d | %.1f | %.1f | %.0f |" % (e, med(e, "promptTokens"), med(e, "pp"), med(e, "tg"), med(e, "wallMs")))
print("ratio oxidize / wllama: pp %.2fx, tg %.2fx" % (med("oxidize", "pp") / med("wllama", "pp"),
                                                    med("oxidize", "tg") / med("wllama", "tg")))
EOF
done
