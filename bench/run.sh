#!/bin/sh
# run.sh: the micro-benchmarks: GGUF open time and reference dequantization speed per file;
# bits/weight, round-trip error and quantize speed per type; tokenizer throughput per
# vocabulary; a whole-file `oxidize quantize` run; the matmul kernels against the scalar
# reference; the machine's memory read bandwidth; and serving (bench/serve_bench.py: concurrent
# streams through `oxidize serve`). The side-by-side comparison with llama.cpp is
# bench/compare.sh (make compare).
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
echo
echo "## Matmul kernels (8192 x 2048 matrix, $(nproc) threads; tg: weight GB/s, pp: GOP/s)"
"$build/bench/bench_matmul" "$(nproc)"
echo
echo "## Memory read bandwidth (the ceiling for token generation)"
"$build/bench/bench_membw" "$(nproc)"
echo
echo "## Serving: oxidize serve with 1, 4 and 16 concurrent streams (kjv-15m-q4_k_m, $(nproc) threads)"
python3 bench/serve_bench.py "$testdata/models/kjv-15m-q4_k_m.gguf" --oxidize "$build/apps/oxidize/oxidize" \
    --clients 1,4,16 -t "$(nproc)"
