#!/bin/sh
# bench/device_prep.sh: here, before a lent GPU machine's lease: what bench/gpu.sh needs there
# and cannot fetch, into .device/ (git-ignored; carry it: run's carry [".device"], under 64 MiB).
#
#   bench/device_prep.sh [LLAMACPP_GIT_DIR]
#
#   .device/sysroot.tar.xz  the Debian libraries the build links (PCRE2, utf8proc, jansson,
#                           libmicrohttpd and its GnuTLS, libcurl's headers are not needed there),
#                           their pkg-config files made relocatable
#   .device/td.tar.xz       the shared test data the GPU tests read (the reference models that fit,
#                           their logits, the vocabulary gen-model takes)
#   .device/llama-src.tar.xz  a trimmed llama.cpp tree (../shared/tools/llamacpp-source.sh, with
#                           vendor/miniaudio back for its server), from LLAMACPP_GIT_DIR (a fetched
#                           mirror's git dir, e.g. /work/.mirror/unslothai+llama.cpp/repo)
#   .device/env.sh          sourced there: the sysroot and test data unpacked under /tmp, nvcc on PATH
#
# There: `. .device/env.sh && LLAMACPP_SRC=.device/llama-src.tar.xz bench/gpu.sh`. The tree's
# tests/data/arch (about 62 MiB) must not travel with it: before the run, `git rm -r --cached -q
# tests/data/arch; echo /tests/data/arch/ >> .git/info/exclude`, and after it undo both
# (delete that line, `git reset -q -- tests/data/arch`).
set -eu
cd "$(dirname "$0")/.."
TD=${OX_TESTDATA:-../shared/testdata}
mkdir -p .device
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the libraries, as Debian packs them (the lent machines' glibc is newer than bookworm's)
(cd "$tmp" && apt-get download libpcre2-dev libpcre2-8-0 libutf8proc-dev libutf8proc2 \
   libmicrohttpd-dev libmicrohttpd12 libjansson-dev libjansson4 libgnutls30 libnettle8 \
   libhogweed6 libgmp10 libp11-kit0 libtasn1-6 libidn2-0 libunistring2 libffi8 >/dev/null 2>&1)
mkdir -p "$tmp/sysroot"
for f in "$tmp"/*.deb; do dpkg -x "$f" "$tmp/sysroot"; done
rm -rf "$tmp/sysroot/usr/share" "$tmp/sysroot/usr/bin"
pc=$tmp/sysroot/usr/lib/x86_64-linux-gnu/pkgconfig
sed -i 's|^prefix=/usr$|prefix=${pcfiledir}/../../..|; /^Requires.private/d' "$pc"/*.pc
tar cJf .device/sysroot.tar.xz -C "$tmp" sysroot

# the test data: a set of reference models that fits beside the rest (OX_DEVICE_MODELS, names
# without .gguf; test_reference and the others check those present), their logits
models=$(for m in ${OX_DEVICE_MODELS:-llama-q4_0 llama-q4_k_m llama-q8_0 llama-q6_k llama-q4_k \
           llama-iq4_xs llama-q2_k llama-q5_0 llama-f32 llama-f16 qwen3-f16 gemma3-f16}; do
           echo "models/$m.gguf"; done)
refs=$(for m in $models; do b=$(basename "$m" .gguf); ls "$TD"/reference/"$b".* 2>/dev/null | sed "s|^$TD/||"; done)
(cd "$TD" && tar cJf - README.md vocab/ggml-vocab-llama-bpe.gguf $models $refs) > .device/td.tar.xz

if [ $# -ge 1 ]; then
  sh ../shared/tools/llamacpp-source.sh "$1" "$tmp/llama.cpp" >/dev/null
  mkdir -p "$tmp/llama.cpp/vendor/miniaudio" # its server's mtmd library wants it
  git -C "$1" show HEAD:vendor/miniaudio/miniaudio.h >"$tmp/llama.cpp/vendor/miniaudio/miniaudio.h"
  tar cJf .device/llama-src.tar.xz -C "$tmp" llama.cpp
fi

cat > .device/env.sh <<'ENV'
# .device/env.sh (bench/device_prep.sh): the carried libraries and test data, nvcc.
R=$(pwd)
[ -d /tmp/sysroot ] || tar xJf "$R/.device/sysroot.tar.xz" -C /tmp
S=/tmp/sysroot/usr/lib/x86_64-linux-gnu
export PKG_CONFIG_PATH=$S/pkgconfig CPATH=/tmp/sysroot/usr/include LIBRARY_PATH=$S
export LD_LIBRARY_PATH=$S${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# (a /tmp/td an earlier run on a warm machine left, with only part of the data, is filled in)
[ -f /tmp/td/.whole ] ||
  { mkdir -p /tmp/td && tar xJf "$R/.device/td.tar.xz" -C /tmp/td && touch /tmp/td/.whole; }
export OX_TESTDATA=/tmp/td PATH=/usr/local/cuda/bin:$PATH NCCL_NVLS_ENABLE=0
ENV
du -sh .device/* | sed 's/^/device_prep: /'
total=$(du -sm .device | cut -f1)
[ "$total" -lt 56 ] || echo "device_prep: .device is ${total} MiB: with the tree, over the 64 MiB a run carries"
