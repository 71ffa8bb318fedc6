#!/bin/sh
# tests/data/lora/make.sh LLAMA_SRC LLAMA_BUILD: how this folder's files were made. The adapters
# by build/tools/gen-lora over the shared llama-f16 model; llama.cpp's logits with them by
# reference.c, compiled against a llama.cpp build (its static libllama and ggml), over the
# prompt of ../shared/testdata/reference/llama-f16.json.
set -eu
cd "$(dirname "$0")"
SRC=$1 BUILD=$2 TD=${OX_TESTDATA:-../../../../shared/testdata}
M=$TD/models/llama-f16.gguf
../../../build/tools/gen-lora "$M" llama-lora-f32.gguf --rank 8 --alpha 16 --seed 1
../../../build/tools/gen-lora "$M" llama-lora-f16.gguf --rank 4 --alpha 0 --type f16 --seed 2 \
  --targets attn_q,attn_v,ffn_down,output
../../../build/tools/gen-lora "$M" llama-lora-embd.gguf --rank 4 --alpha 8 --seed 3 \
  --targets token_embd,attn_output
# for the split models' shares of fused and delta-net matrices (test_split_modes)
../../../build/tools/gen-lora "$TD/models/phi3-f16.gguf" phi3-lora-f32.gguf --rank 8 --alpha 16 \
  --seed 4 --targets attn_qkv,attn_output,ffn_up,ffn_down
../../../build/tools/gen-lora ../arch/models/qwen35-f16.gguf qwen35-lora-f32.gguf --rank 4 \
  --alpha 8 --seed 5 --targets attn_qkv,attn_gate,ssm_out,ffn_up,ffn_down
cc -O2 -o /tmp/lora-reference reference.c -I"$SRC/include" -I"$SRC/ggml/include" \
  "$BUILD/src/libllama.a" "$BUILD/ggml/src/libggml.a" "$BUILD/ggml/src/libggml-cpu.a" \
  "$BUILD/ggml/src/libggml-base.a" -lstdc++ -lm -lpthread -fopenmp
P=$(python3 -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['prompt'])))" \
  "$TD/reference/llama-f16.json")
/tmp/lora-reference "$M" llama-f16.lora-f32.logits.f32 "$P" llama-lora-f32.gguf 1.0
/tmp/lora-reference "$M" llama-f16.lora-mix.logits.f32 "$P" llama-lora-f32.gguf 0.5 \
  llama-lora-f16.gguf 1.0
/tmp/lora-reference "$M" llama-f16.lora-embd.logits.f32 "$P" llama-lora-embd.gguf 1.0
