#!/bin/sh
# mesa_next.sh: runs a Vulkan test on a second lavapipe, Mesa 26's (Debian 13 backports), beside
# the system's: its compiled shaders run loads that Mesa 22's branched around (a load through a
# null pointer crashed it), so the shaders are checked on two drivers. The packages are fetched
# from the system's Debian mirror once into DIR (unpacked there, not installed) and the test runs
# with Debian 13's C library and Vulkan loader from DIR; without a device there it fails.
#   mesa_next.sh DIR TEST [ARGS...]
# Exits 77 (ctest's skip) where the packages cannot be had: not amd64, no apt-get, no mirror
# within the time allowed (a failed fetch is retried a day later, or after DIR is removed).
set -u
dir=$1
shift
skip() {
    echo "mesa_next: $*: skipped"
    exit 77
}
[ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ] || skip "not amd64"
command -v apt-get >/dev/null || skip "no apt-get"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -f $keyring ] || skip "no Debian archive keyring"

# Mesa's Vulkan drivers from trixie-backports, everything they and the loader link from trixie.
MESA="mesa-vulkan-drivers/trixie-backports"
LIBS="libc6 libgcc-s1 libstdc++6 libvulkan1 libllvm19 libdrm-amdgpu1 libdrm2 libelf1t64 libexpat1
libwayland-client0 libx11-6 libx11-xcb1 libxau6 libxdmcp6 libxcb1 libxcb-dri3-0 libxcb-present0
libxcb-randr0 libxcb-shm0 libxcb-sync1 libxcb-xfixes0 libxshmfence1 libzstd1 zlib1g liblzma5
libedit2 libffi8 libtinfo6 libxml2 libicu76 libz3-4 libbsd0 libmd0 libdisplay-info2
libpng16-16t64"
stamp=$(echo "$MESA $LIBS" | cksum | cut -d' ' -f1) # a changed list fetches again
lib=$dir/root/usr/lib/x86_64-linux-gnu

# The Debian mirror the system's apt uses (its proxy settings apply too), else deb.debian.org.
mirror() {
    m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
        awk '/^URIs:/ && $2 ~ /\/debian\/?$/ {print $2; exit}')
    [ -n "$m" ] || m=$(awk '$1 == "deb" && $2 ~ /\/debian\/?$/ {print $2; exit}' \
        /etc/apt/sources.list 2>/dev/null)
    echo "${m:-http://deb.debian.org/debian}"
}

fetch() {
    rm -rf "$dir/root" "$dir/debs" "$dir/lists" "$dir/cache" "$dir/ready"
    mkdir -p "$dir/lists/partial" "$dir/debs" "$dir/root" || return 1
    m=$(mirror)
    cat >"$dir/sources.list" <<EOF
deb [signed-by=$keyring] $m trixie main
deb [signed-by=$keyring] $m trixie-backports main
EOF
    opts="-o Dir::Etc::SourceList=$dir/sources.list -o Dir::Etc::SourceParts=/dev/null
          -o Dir::State::Lists=$dir/lists -o Dir::State::status=/dev/null
          -o Dir::Cache=$dir/cache -o APT::Sandbox::User=root -q
          -o Acquire::http::Timeout=20 -o Acquire::https::Timeout=20 -o Acquire::Retries=1"
    # shellcheck disable=SC2086
    timeout 180 apt-get $opts update >"$dir/fetch.log" 2>&1 &&
        (cd "$dir/debs" && timeout 240 apt-get $opts download $LIBS $MESA) >>"$dir/fetch.log" 2>&1 ||
        return 1
    for deb in "$dir"/debs/*.deb; do
        dpkg-deb -x "$deb" "$dir/root" || return 1
    done
    # the driver must load with what was fetched (every library it links found)
    [ -x "$lib/ld-linux-x86-64.so.2" ] && [ -f "$lib/libvulkan_lvp.so" ] || return 1
    "$lib/ld-linux-x86-64.so.2" --library-path "$lib" --list "$lib/libvulkan_lvp.so" \
        >"$dir/ldd.log" 2>&1 || return 1
    if grep -q "not found" "$dir/ldd.log"; then
        echo "mesa_next: libvulkan_lvp.so needs more than LIBS:" >>"$dir/fetch.log"
        grep "not found" "$dir/ldd.log" >>"$dir/fetch.log"
        return 1
    fi
    printf '{"file_format_version": "1.0.0", "ICD": {"library_path": "%s", "api_version": "1.4.0"}}\n' \
        "$lib/libvulkan_lvp.so" >"$dir/lvp.json"
    rm -rf "$dir/debs" "$dir/lists" "$dir/cache" # 452 MB with them, 342 without
    echo "$stamp" >"$dir/ready"
}

# one fetch for the tests that run at once (ctest -j); a failed one retried after a day
mkdir -p "$dir" || skip "cannot make $dir"
exec 9>"$dir/.lock"
flock -w 500 9 || skip "another fetch into $dir took too long"
if [ "$(cat "$dir/ready" 2>/dev/null)" != "$stamp" ]; then
    if [ -n "$(find "$dir/failed" -mmin -1440 2>/dev/null)" ]; then
        failed=1 # within a day of the last failure
    elif fetch; then
        rm -f "$dir/failed"
        failed=0
    else
        touch "$dir/failed"
        failed=1
    fi
    [ "$failed" = 0 ] || skip "Mesa 26 could not be had from Debian's archive ($dir/fetch.log)"
fi
flock -u 9

export OX_TEST_DEVICE_REQUIRED=1 # lavapipe is there: not finding it is a failure
VK_DRIVER_FILES=$dir/lvp.json exec "$lib/ld-linux-x86-64.so.2" \
    --library-path "$lib:/usr/lib/x86_64-linux-gnu:/lib/x86_64-linux-gnu" "$@"
