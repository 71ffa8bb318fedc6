#!/bin/sh
# run.sh: the benchmarks available so far: GGUF open time and reference dequantization speed
# per tensor type, on the shared llama models (one per type).
set -eu
build="$1"
testdata="$2"
echo "oxidize $(git rev-parse --short HEAD 2>/dev/null || echo '?') on $(nproc) cores:" \
     "$("$build/apps/oxidize/oxidize" --version 2>/dev/null || true)"
"$build/bench/bench_dequant" "$testdata"/models/llama-*.gguf
