#!/bin/sh
# run.sh: the benchmarks available so far: GGUF open time and reference dequantization speed
# per file; bits/weight, round-trip error and quantize speed per type; tokenizer throughput per
# vocabulary; and a whole-file `oxidize quantize` run on the shared llama models.
set -eu
build="$1"
testdata="$2"
echo "oxidize $(git rev-parse --short HEAD 2>/dev/null || echo '?') on $(nproc) cores:" \
     "$("$build/apps/oxidize/oxidize" --version 2>/dev/null | tr '\n' ' ')"
echo
echo "## Dequantization (reference kernels, one thread)"
"$build/bench/bench_dequant" "$testdata"/models/llama-*.gguf
echo
echo "## Quantization of llama-f32.gguf's matrices, per type"
"$build/bench/bench_quantize" "$testdata/models/llama-f32.gguf"
echo
echo "## Tokenizers (one thread)"
"$build/bench/bench_tokenize" "$testdata/text/kjv-revelation.txt" "$testdata"/vocab/*.gguf
echo
echo "## oxidize quantize llama-f32.gguf Q4_K_M, $(nproc) threads"
out="$(mktemp -d)"
"$build/apps/oxidize/oxidize" quantize "$testdata/models/llama-f32.gguf" "$out/q.gguf" Q4_K_M
rm -rf "$out"
