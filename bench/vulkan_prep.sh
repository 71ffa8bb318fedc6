#!/bin/sh
# bench/vulkan_prep.sh: here, before a lent GPU machine's lease: what bench/gpu_vulkan.sh needs
# there and cannot fetch, into .device/ (git-ignored; carry it: run's carry [".device"]). Run
# bench/device_prep.sh first (the libraries and test data); this adds:
#
#   bench/vulkan_prep.sh [LLAMACPP_GIT_DIR [BASE_REV]]
#
#   .device/gl/*.deb        Debian 12's Vulkan loader and headers, and the GL dispatch libraries
#                           NVIDIA's Vulkan ICD (libGLX_nvidia) loads: the machines have the
#                           driver but neither (without them: "no Vulkan driver")
#   .device/glslc.tar.xz    Debian 13's glslc (GL_KHR_cooperative_matrix: gemm_cm.comp) with the
#                           C library it runs on, started through that library's own loader, and
#                           Debian 13's Vulkan and SPIR-V headers for llama.cpp's build
#   .device/llvk.tar.xz     llama.cpp's Vulkan llama-bench, llama-batched-bench and llama-server
#                           with their shared libraries, built here from LLAMACPP_GIT_DIR (a
#                           fetched mirror's git dir): about 25 minutes on 2 cores; kept across
#                           calls in /tmp/llvk
#   .device/base.tar.xz     the tree at BASE_REV (default: none), which gpu_vulkan.sh builds
#                           beside the working tree for a same-lease A/B of decode
#
# The tree's tests/data/arch must not travel (bench/device_prep.sh says how to leave it out).
set -eu
cd "$(dirname "$0")/.."
mkdir -p .device/gl
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd .device/gl && apt-get download libvulkan1 libvulkan-dev libegl1 libglvnd0 libopengl0 libgl1 \
   libglx0 libgles2 >/dev/null 2>&1)

# Debian 13's packages, through a list of their own (this machine's apt sources are untouched)
mkdir -p "$tmp/lists/partial" "$tmp/debs" "$tmp/root"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
  >"$tmp/sources.list"
apt_trixie="-oDir::Etc::SourceList=$tmp/sources.list -oDir::Etc::SourceParts=/dev/null
  -oDir::State::Lists=$tmp/lists -oAPT::Architecture=amd64 -oAPT::Architectures=amd64"
# shellcheck disable=SC2086
apt-get $apt_trixie update >/dev/null 2>&1
# shellcheck disable=SC2086
(cd "$tmp/debs" && apt-get $apt_trixie download glslc libshaderc1 libvulkan-dev libc6 \
   libstdc++6 libgcc-s1 spirv-headers >/dev/null 2>&1)
for f in "$tmp"/debs/*.deb; do dpkg -x "$f" "$tmp/root"; done
L=usr/lib/x86_64-linux-gnu
tar cJf .device/glslc.tar.xz -C "$tmp/root" usr/bin/glslc $L/ld-linux-x86-64.so.2 $L/libc.so.6 \
  $L/libm.so.6 $L/libgcc_s.so.1 $L/libshaderc.so.1 $L/libstdc++.so.6 $L/libstdc++.so.6.0.33 \
  usr/include/vulkan usr/include/vk_video usr/include/spirv usr/share/cmake/SPIRV-Headers

if [ $# -ge 1 ]; then
  if [ ! -x /tmp/llvk/bin/llama-server ]; then
    rm -rf /tmp/llvk-src /tmp/trixie-root && mkdir -p /tmp/llvk-src /tmp/trixie-root
    tar xJf .device/glslc.tar.xz -C /tmp/trixie-root
    cat >"$tmp/glslc" <<'W'
#!/bin/sh
R=/tmp/trixie-root
exec $R/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --library-path $R/usr/lib/x86_64-linux-gnu $R/usr/bin/glslc "$@"
W
    chmod +x "$tmp/glslc" && cp "$tmp/glslc" /tmp/trixie-glslc
    git -C "$1" ls-tree -r --name-only HEAD | grep -vE '^(docs|examples|tests|media|tools/server/public|ggml/src/ggml-(sycl|cuda|opencl|metal|hexagon|cann|et|openvino|webgpu|virtgpu|musa|zdnn|zendnn|blas|kompute|rpc)/)|\.gguf$' \
      >"$tmp/files"
    # shellcheck disable=SC2046
    git -C "$1" archive --format=tar HEAD $(cat "$tmp/files") | tar -xf - -C /tmp/llvk-src
    cmake -S /tmp/llvk-src -B /tmp/llvk -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
      -DGGML_VULKAN=ON -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
      -DVulkan_INCLUDE_DIR=/tmp/trixie-root/usr/include -DVulkan_GLSLC_EXECUTABLE=/tmp/trixie-glslc \
      -DSPIRV-Headers_DIR=/tmp/trixie-root/usr/share/cmake/SPIRV-Headers \
      -DCMAKE_BUILD_RPATH='$ORIGIN' >/dev/null
    cmake --build /tmp/llvk -j "$(nproc)" --target llama-bench llama-batched-bench llama-server \
      >/dev/null
  fi
  # the libraries beside the programs ($ORIGIN), with the OpenMP, TLS ones the machines lack
  cp -L /usr/lib/x86_64-linux-gnu/libgomp.so.1 /usr/lib/x86_64-linux-gnu/libssl.so.3 \
    /usr/lib/x86_64-linux-gnu/libcrypto.so.3 /tmp/llvk/bin/
  (cd /tmp/llvk && tar cJf "$OLDPWD/.device/llvk.tar.xz" bin/llama-bench bin/llama-batched-bench \
     bin/llama-server $(cd /tmp/llvk && ls bin/*.so*))
  git -C "$1" log -1 --format='llama.cpp %h %cd' --date=short >.device/llvk.version
fi
if [ $# -ge 2 ]; then
  git archive "$2" -- . ':!tests/data/arch' | xz -1 >.device/base.tar.xz
  git rev-parse --short "$2" >.device/base.version
fi
du -sh .device/* | sed 's/^/vulkan_prep: /'
