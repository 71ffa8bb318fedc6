#!/bin/sh
# run.sh: runs a libFuzzer target for N seconds on a fresh seed corpus; fails on any finding.
set -eu
target="$1"
seconds="${2:-20}"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(dirname "$target")/corpus-$(basename "$target")"
mkdir -p "$work/seeds" "$work/found"
python3 "$here/make_seeds.py" "$(basename "$target" | sed 's/^fuzz_//')" "$work/seeds"
# -rss_limit_mb / -timeout: an allocation of >2 GiB or a 2 s input is a finding, not a pass
"$target" "$work/found" "$work/seeds" -max_total_time="$seconds" -max_len=65536 \
    -rss_limit_mb=2048 -timeout=2 -print_final_stats=1 -artifact_prefix="$work/" 2>&1 |
    tee "$work/log.txt" | grep -E "^(#[0-9]+ +DONE|Done|stat::number_of_executed_units|==|SUMMARY:)" || true
# Failure markers at the start of a line only: with the library instrumented, libFuzzer's
# dictionary entries (echoed on its progress lines) can quote words like ">>SUMMARY<<".
if grep -q -E "^==[0-9]+== ?ERROR|^SUMMARY:|deadly signal|Test unit written" "$work/log.txt"; then
    echo "fuzz: $(basename "$target") found a problem; see $work/log.txt"
    exit 1
fi
# A target that did not run (missing, or dead before its first input) prints no final stats: a
# failure too, not a clean run.
if ! grep -q "stat::number_of_executed_units" "$work/log.txt"; then
    echo "fuzz: $(basename "$target") did not run; see $work/log.txt"
    exit 1
fi
echo "fuzz: $(basename "$target") clean for ${seconds}s: $(grep -o 'stat::number_of_executed_units: [0-9]*' "$work/log.txt")"
