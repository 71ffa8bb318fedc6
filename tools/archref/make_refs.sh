#!/usr/bin/env bash
# make_refs.sh: the architecture reference set in tests/data/arch/: for each architecture a small
# random-weight GGUF (make_model.py, llama.cpp's gguf-py) and llama.cpp's logits on it
# (dump_reference.c against llama.cpp's library), in the shared reference format.
#
# usage: tools/archref/make_refs.sh [ARCH ...]      (default: every one make_model.py knows)
#   LLAMACPP_SRC: a llama.cpp tree or the git directory of a fetched mirror (default: the tree
#   bench/llamacpp_build.sh extracted into bench/llama.cpp/src). llama.cpp is built for the CPU
#   into build-archref/ (git-ignored); nothing of it is committed. Needs Debian's python3-numpy.
# Each architecture gets <arch>-f16 and <arch>-q4_k_m (llama-quantize's mix: its reference and
# reference/<arch>-q4_k_m.quantize, the recipe and FNV-1a hash the tests check their own copy by).
# Encoders' references are their pooled embeddings, in reference/embedding/ (dump_embedding.c).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
src="${LLAMACPP_SRC:-bench/llama.cpp/src}"
if [ -d "$src/objects" ] || [ -f "$src/HEAD" ]; then # a mirror: let bench's script extract it
    [ -f bench/llama.cpp/src/CMakeLists.txt ] || bench/llamacpp_build.sh "$src" avx2
    src=bench/llama.cpp/src
fi
[ -f "$src/CMakeLists.txt" ] || { echo "make_refs.sh: no llama.cpp source in $src" >&2; exit 1; }
/usr/bin/python3 -c 'import numpy' 2>/dev/null || { echo "make_refs.sh: apt-get install python3-numpy" >&2; exit 1; }

lib=build-archref/llama.cpp
if [ ! -f "$lib/src/libllama.a" ]; then
    cmake -S "$src" -B "$lib" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF \
        -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF >/dev/null
fi
[ -x "$lib/bin/llama-quantize" ] || cmake --build "$lib" -j "$(nproc)" --target llama llama-quantize >/dev/null
dump=build-archref/dump_reference
gcc -O2 -std=c11 -I"$src/include" -I"$src/ggml/include" tools/archref/dump_reference.c \
    "$lib/src/libllama.a" "$lib/ggml/src/libggml.a" "$lib/ggml/src/libggml-cpu.a" \
    "$lib/ggml/src/libggml-base.a" -lstdc++ -lm -lpthread -fopenmp -o "$dump"
dump_embd=build-archref/dump_embedding
gcc -O2 -std=c11 -I"$src/include" -I"$src/ggml/include" tools/archref/dump_embedding.c \
    "$lib/src/libllama.a" "$lib/ggml/src/libggml.a" "$lib/ggml/src/libggml-cpu.a" \
    "$lib/ggml/src/libggml-base.a" -lstdc++ -lm -lpthread -fopenmp -o "$dump_embd"

out=tests/data/arch
mkdir -p "$out/models" "$out/reference" "$out/reference/embedding"
archs=("$@")
[ ${#archs[@]} -gt 0 ] || read -r -a archs <<< "$(/usr/bin/python3 -c 'import ast, sys; t = ast.parse(open(sys.argv[1]).read()); print(" ".join(k.value for n in t.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "ARCHS" for k in n.value.keys))' tools/archref/make_model.py)"
for arch in "${archs[@]}"; do
    name="$arch-f16"
    PYTHONPATH="$src/gguf-py" /usr/bin/python3 tools/archref/make_model.py "$arch" \
        "$out/models/$name.gguf" --vocab-from "${OX_TESTDATA:-../shared/testdata}/models/qwen3-f16.gguf"
    # encoders make embeddings (pooled vectors, and a reranker's scores), the rest logits
    case "$arch" in
        bert | modern-bert) dump_one() { "$dump_embd" "$1" "$out/reference/embedding/$2.json" rank; } ;;
        nomic-bert | gemma-embedding) dump_one() { "$dump_embd" "$1" "$out/reference/embedding/$2.json"; } ;;
        *) dump_one() { "$dump" "$1" "$out/reference" "$2"; } ;;
    esac
    dump_one "$out/models/$name.gguf" "$name"
    # and one quantized file, by llama.cpp's own quantizer with its per-tensor choices: not kept,
    # but its recipe and hash, which the tests' own quantization must reproduce byte for byte
    quant="$arch-q4_k_m"
    "$lib/bin/llama-quantize" "$out/models/$name.gguf" "build-archref/$quant.gguf" Q4_K_M >/dev/null 2>&1
    dump_one "build-archref/$quant.gguf" "$quant"
    # the tests check the greedy steps by their tokens (no bound reads their logits, which
    # would only take room: a lent GPU machine takes 64 MiB of the repository)
    for ref in "$name" "$quant"; do
        rm -f "$out/reference/$ref.greedy.f32"
        [ ! -f "$out/reference/$ref.json" ] || sed -i '/"greedy_logits":/d' "$out/reference/$ref.json"
    done
    hash=$(/usr/bin/python3 -c 'import sys
h = 0xcbf29ce484222325
for b in open(sys.argv[1], "rb").read():
    h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
print("%016x" % h)' "build-archref/$quant.gguf")
    echo "$name.gguf 15 $hash" > "$out/reference/$quant.quantize" # 15: Q4_K_M (enum ox_ftype)
done
echo "llama.cpp: $(cat "$src/VERSION" 2>/dev/null || echo "$src")"
