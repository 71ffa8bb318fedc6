#!/bin/sh
# web/deps.sh: PCRE2 and utf8proc built for WebAssembly (the two libraries the core library
# needs besides libc; and jansson, which the model tests built for node read their reference
# files with), from Debian's own source packages, so the browser build tokenizes with the
# same code as the native one. apt reads a private list of deb-src entries made from the
# machine's deb entries (nothing under /etc is changed; apt checks the files against the
# archive's signed index, which is why dpkg-source need not), dpkg-source applies Debian's patches,
# and emcmake builds static archives with threads (a shared-memory module needs every object
# built with atomics) into PREFIX, with their pkg-config files.
# usage: web/deps.sh PREFIX        (make web runs it; done once, kept in build-web/deps)
set -eu
export NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH} # Debian's acorn, for emcc's tools
prefix=$(mkdir -p "$1" && cd "$1" && pwd)
[ -f "$prefix/lib/libpcre2-8.a" ] && [ -f "$prefix/lib/libutf8proc.a" ] &&
  [ -f "$prefix/lib/libjansson.a" ] && exit 0
for tool in emcmake emcc dpkg-source apt-get cmake; do
  command -v $tool >/dev/null || { echo "web/deps.sh: $tool is missing (make web-deps)"; exit 1; }
done

apt="$prefix/apt"
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/sources" "$prefix/src"
# deb-src twins of the machine's deb entries, in both of apt's formats
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] && sed -n 's/^deb \(.*debian.*\)/deb-src \1/p' "$f"
done > "$apt/sources/src.list"
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] && sed 's/^Types: deb$/Types: deb-src/' "$f" > "$apt/sources/$(basename "$f")"
done
aptq() {
  apt-get -q -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$apt/sources" \
    -o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache" -o APT::Sandbox::User=root "$@"
}
aptq update >/dev/null
# the newest version first; the release's own where a mirror lacks the newest one's files
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
cd "$prefix/src"
for pkg in pcre2 utf8proc jansson; do
  rm -rf "$pkg" && mkdir "$pkg"
  (cd "$pkg" && { aptq source --download-only "$pkg" >/dev/null 2>&1 ||
                  aptq source --download-only "$pkg/$codename" >/dev/null; } &&
   dpkg-source -x ./*.dsc tree >/dev/null 2>&1)
done

flags="-O3 -pthread -msimd128"
# configure checks compile without linking: each link runs emcc's whole JavaScript pipeline, and
# jansson's checks alone took two minutes that way
checks=-DCMAKE_TRY_COMPILE_TARGET_TYPE=STATIC_LIBRARY
emcmake cmake -S pcre2/tree -B pcre2/build $checks -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DBUILD_SHARED_LIBS=OFF -DPCRE2_BUILD_PCRE2_8=ON \
  -DPCRE2_BUILD_PCRE2GREP=OFF -DPCRE2_BUILD_TESTS=OFF -DPCRE2_SUPPORT_JIT=OFF \
  -DPCRE2_SUPPORT_UNICODE=ON >pcre2/build.log 2>&1
cmake --build pcre2/build -j 2 --target install >>pcre2/build.log 2>&1 ||
  { tail -30 pcre2/build.log; exit 1; }
emcmake cmake -S utf8proc/tree -B utf8proc/build $checks -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_INSTALL_PREFIX="$prefix" -DBUILD_SHARED_LIBS=OFF \
  >utf8proc/build.log 2>&1
cmake --build utf8proc/build -j 2 --target install >>utf8proc/build.log 2>&1 ||
  { tail -30 utf8proc/build.log; exit 1; }
emcmake cmake -S jansson/tree -B jansson/build $checks -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_INSTALL_PREFIX="$prefix" -DJANSSON_BUILD_DOCS=OFF \
  -DJANSSON_EXAMPLES=OFF -DJANSSON_WITHOUT_TESTS=ON >jansson/build.log 2>&1
cmake --build jansson/build -j 2 --target install >>jansson/build.log 2>&1 ||
  { tail -30 jansson/build.log; exit 1; }
ls "$prefix"/lib/pkgconfig
