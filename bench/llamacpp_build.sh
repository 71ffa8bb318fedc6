#!/usr/bin/env bash
# llamacpp_build.sh: builds llama.cpp's llama-bench for one x86 instruction-set level, so that
# compare.sh can measure oxidize at each level against llama.cpp built for the same one.
#
# usage: bench/llamacpp_build.sh SRC LEVEL...
#   SRC:   a llama.cpp source tree, or the git directory of a fetched llama.cpp mirror (its HEAD
#          is extracted into bench/llama.cpp/src)
#   LEVEL: avx2 (AVX2 + FMA + F16C + BMI2), avx2-vnni (+ AVX-VNNI), avx512 (+ AVX-512 F, BW,
#          DQ, VL, VNNI, VBMI, BF16), native (-march=native)
# Each level lands in bench/llama.cpp/<LEVEL>/bin/llama-bench (git-ignored, never committed).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -ge 2 ] || { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
src="$1"; shift
out="$root/bench/llama.cpp"
mkdir -p "$out"
if [ -d "$src/objects" ] || [ -f "$src/HEAD" ]; then # a bare git directory: extract its HEAD
    if [ ! -f "$out/src/CMakeLists.txt" ]; then
        rm -rf "$out/src" && mkdir -p "$out/src"
        # everything but documentation, models, media and the GPU backends' sources
        git -C "$src" ls-tree -r --name-only HEAD \
            | grep -vE '^(docs|media|models|tools/server/public|ggml/src/ggml-(cuda|sycl|vulkan|opencl|metal|hexagon|cann|musa|webgpu|zdnn|kompute)/)|\.gguf$' \
            > "$out/src.files"
        git -C "$src" archive --format=tar HEAD $(cat "$out/src.files") | tar -xf - -C "$out/src"
        rm -f "$out/src.files"
        git -C "$src" log -1 --format='%h %cd' --date=short > "$out/src/VERSION"
    fi
    src="$out/src"
fi
[ -f "$src/CMakeLists.txt" ] || { echo "llamacpp_build.sh: no llama.cpp source in $src" >&2; exit 1; }

for level in "$@"; do
    x86="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
    case "$level" in
        avx2) flags="$x86 -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF" ;;
        avx2-vnni) flags="$x86 -DGGML_AVX_VNNI=ON -DGGML_AVX512=OFF" ;;
        avx512) flags="$x86 -DGGML_AVX_VNNI=OFF -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON
                       -DGGML_AVX512_VBMI=ON -DGGML_AVX512_BF16=ON" ;;
        native) flags="-DGGML_NATIVE=ON" ;;
        *) echo "llamacpp_build.sh: unknown level '$level'" >&2; exit 2 ;;
    esac
    echo "== llama.cpp for $level -> $out/$level" >&2
    # shellcheck disable=SC2086
    cmake -S "$src" -B "$out/$level" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON -DGGML_CUDA=OFF -DGGML_VULKAN=OFF \
        $flags >/dev/null
    cmake --build "$out/$level" -j "$(nproc)" --target llama-bench >/dev/null
    echo "$level: $("$out/$level/bin/llama-bench" --help >/dev/null 2>&1 && echo ok)" >&2
done
