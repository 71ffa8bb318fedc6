#!/bin/sh
# check_exports.sh: the shared library must export only ox_ symbols (everything else is hidden).
set -eu
lib="$1"
bad=$(nm -D --defined-only "$lib" | awk '{print $NF}' |
      grep -v -E '^(ox_|_init$|_fini$|_edata$|_end$|__bss_start$)' || true)
n=$(nm -D --defined-only "$lib" | awk '{print $NF}' | grep -c '^ox_' || true)
if [ -n "$bad" ] || [ "$n" -lt 10 ]; then
    echo "check_exports: unexpected exports in $lib (ox_ exports: $n):"
    echo "$bad"
    echo "check_exports: 1 checks, 0 passed, 1 failed"
    exit 1
fi
echo "check_exports: $n ox_ symbols, nothing else"
echo "check_exports: 1 checks, 1 passed, 0 failed"
