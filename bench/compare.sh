#!/usr/bin/env bash
# compare.sh: oxidize and llama.cpp side by side on the same GGUF files, both measured the way
# llama-bench does (pp<P>: one batch of P random tokens from an empty cache; tg<N>: N single-
# token decodes), printed as a markdown table of tokens/s and their ratio.
#
# usage: bench/compare.sh [-t THREADS] [-r REPS] [-p 512] [-n 128] [--no-build] [MODEL ...]
#   MODEL is a .gguf path, or PRESET:TYPE (e.g. llama-3.2-1b:q4_k_m), which is generated with
#   build/tools/gen-model into bench/models/PRESET-TYPE.gguf when missing.
#   Default models: llama-3.2-1b:q4_0 llama-3.2-1b:q8_0 llama-3.2-1b:q4_k_m.
# llama.cpp comes from the npm package node-llama-cpp (prebuilt CPU binaries), installed on first
# use into bench/node_modules (git-ignored). Raw JSON goes to bench/results/<time>/.
set -euo pipefail

NODE_LLAMA_CPP_VERSION="${NODE_LLAMA_CPP_VERSION:-3.22.1}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
build="${BUILD:-build}"
threads="$(nproc)"
reps=5
n_prompt=512
n_gen=128
do_build=1
models=()

usage() {
    sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-0}"
}

while [ $# -gt 0 ]; do
    case "$1" in
        -t) threads="$2"; shift 2 ;;
        -r) reps="$2"; shift 2 ;;
        -p) n_prompt="$2"; shift 2 ;;
        -n) n_gen="$2"; shift 2 ;;
        --no-build) do_build=0; shift ;;
        -h|--help) usage 0 ;;
        -*) echo "compare.sh: unknown option '$1'" >&2; usage 2 ;;
        *) models+=("$1"); shift ;;
    esac
done
[ ${#models[@]} -gt 0 ] || models=(llama-3.2-1b:q4_0 llama-3.2-1b:q8_0 llama-3.2-1b:q4_k_m)

oxidize="$build/apps/oxidize/oxidize"
gen_model="$build/tools/gen-model"
if [ "$do_build" = 1 ]; then
    echo "building release ($build) ..." >&2
    make --no-print-directory release BUILD="$build" >&2
fi
if [ ! -x "$oxidize" ] || [ ! -x "$gen_model" ]; then
    echo "compare.sh: build $build first (make)" >&2
    exit 1
fi

# llama.cpp through node-llama-cpp: only the Linux x64 CPU binaries (its CUDA/Vulkan/ARM
# optional packages are skipped); nothing is built or downloaded at run time.
if [ ! -d bench/node_modules/node-llama-cpp ]; then
    echo "installing node-llama-cpp@$NODE_LLAMA_CPP_VERSION into bench/node_modules ..." >&2
    NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm install --prefix bench --no-save --no-package-lock \
        --no-audit --no-fund --omit=optional "node-llama-cpp@$NODE_LLAMA_CPP_VERSION" \
        "@node-llama-cpp/linux-x64@$NODE_LLAMA_CPP_VERSION" >&2
fi

# PRESET:TYPE -> bench/models/PRESET-TYPE.gguf (generated when missing); a path stays a path.
resolve_model() {
    case "$1" in
        *.gguf) [ -f "$1" ] || { echo "compare.sh: no such file: $1" >&2; exit 1; }
                echo "$1" ;;
        *:*) local preset="${1%%:*}" type="${1#*:}"
             local f="bench/models/$preset-$(echo "$type" | tr 'A-Z' 'a-z').gguf"
             if [ ! -f "$f" ]; then
                 mkdir -p bench/models
                 "$gen_model" --preset "$preset" --type "$type" "$f" >&2
             fi
             echo "$f" ;;
        *) echo "compare.sh: '$1' is neither a .gguf file nor PRESET:TYPE" >&2; exit 1 ;;
    esac
}

has_oxidize_bench=1
"$oxidize" bench --help >/dev/null 2>&1 || has_oxidize_bench=0

out="bench/results/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
cpu="$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)"
ox_commit="$(git rev-parse --short HEAD 2>/dev/null || echo '?')"
git diff --quiet HEAD 2>/dev/null || ox_commit="$ox_commit+dirty"
ox_version="$("$oxidize" --version 2>/dev/null | head -1) ($ox_commit)"
lc_version="$(node bench/llamacpp_bench.mjs --version)"
{
    echo "date:      $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "cpu:       $cpu ($(nproc) online CPUs), $threads threads, $reps repetitions"
    echo "oxidize:   $ox_version"
    echo "llama.cpp: $lc_version"
    echo "load:      $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min, before the runs)"
} | tee "$out/env.txt"
echo
load1="$(cut -d' ' -f1 /proc/loadavg)"
if awk -v l="$load1" 'BEGIN { exit !(l > 1) }'; then
    echo "warning: the machine is busy (load $load1): numbers will be noisy" >&2
fi
[ "$has_oxidize_bench" = 1 ] || echo "warning: '$oxidize bench' is missing: llama.cpp only" >&2

# CPU seconds the whole machine spent busy, and those of this shell's finished children (bash's
# `times`, run in this shell: a subshell would not see them); what other processes took during
# a run is the difference. A busy neighbour ruins a benchmark on a small machine.
busy_s() { awk -v hz="$(getconf CLK_TCK)" '/^cpu / { print ($2+$3+$4+$7+$8+$9) / hz }' /proc/stat; }
children_s() { tail -1 "$1" | awk '{ gsub(/s/, ""); split($1, u, "m"); split($2, s, "m");
                                     print u[1] * 60 + u[2] + s[1] * 60 + s[2] }'; }
# run NAME OUTFILE COMMAND...: run a benchmark, note the share of the CPUs others used meanwhile
run() {
    local name="$1" outfile="$2"; shift 2
    local b0 t0 b1 t1
    times > "$out/.times0"; b0="$(busy_s)"; t0="$(date +%s.%N)"
    "$@" > "$outfile" || echo "[]" > "$outfile"
    times > "$out/.times1"; b1="$(busy_s)"; t1="$(date +%s.%N)"
    awk -v n="$name" -v b0="$b0" -v b1="$b1" -v c0="$(children_s "$out/.times0")" \
        -v c1="$(children_s "$out/.times1")" -v t0="$t0" -v t1="$t1" -v p="$(nproc)" 'BEGIN {
        w = t1 - t0; o = ((b1 - b0) - (c1 - c0)) / (w * p) * 100; if (o < 0) o = 0
        printf "%s: %.0f s, other processes used %.1f%% of the CPUs%s\n", n, w, o,
               (o > 5 ? "  <- NOISY" : "") }' | tee -a "$out/noise.txt" >&2
    rm -f "$out/.times0" "$out/.times1"
}

files=()
for m in "${models[@]}"; do
    f="$(resolve_model "$m")"
    files+=("$f")
    name="$(basename "$f" .gguf)"
    if [ "$has_oxidize_bench" = 1 ]; then
        echo "== oxidize  $name" >&2
        run "oxidize   $name" "$out/$name.oxidize.json" "$oxidize" bench -m "$f" -p "$n_prompt" \
            -n "$n_gen" -t "$threads" -r "$reps" -o json
    fi
    echo "== llama.cpp $name" >&2
    run "llama.cpp $name" "$out/$name.llamacpp.json" node bench/llamacpp_bench.mjs -m "$f" \
        -p "$n_prompt" -n "$n_gen" -t "$threads" -r "$reps"
done
echo "load:      $(cut -d' ' -f1-3 /proc/loadavg) (after the runs)" | tee -a "$out/env.txt"
echo

# The table: one row per model and test; ratio = oxidize t/s / llama.cpp t/s (> 1: faster).
presets="$("$gen_model" --help | sed -n 's/^  --preset NAME *//p' | tr -d ',')"
node - "$out" "$presets" "${files[@]}" <<'EOF' | tee "$out/table.md"
const fs = require("fs"), path = require("path");
const [out, presetList, ...files] = process.argv.slice(2);
const presets = presetList.split(" ");
const read = (f) => { try { return JSON.parse(fs.readFileSync(f, "utf8")); } catch { return []; } };
const fmt = (r) => r ? `${r.avg_ts.toFixed(2)} ± ${r.stddev_ts.toFixed(2)}` : "-";
console.log("| model | type | test | oxidize t/s | llama.cpp t/s | ratio |");
console.log("| --- | --- | --- | ---: | ---: | ---: |");
const bw = [];
for (const f of files) {
    const name = path.basename(f, ".gguf");
    const ox = read(path.join(out, `${name}.oxidize.json`));
    const lc = read(path.join(out, `${name}.llamacpp.json`));
    // PRESET-TYPE names split at the type; other files take llama.cpp's "arch size TYPE"
    const preset = presets.find((p) => name.startsWith(p + "-"));
    const model = preset ?? name;
    const type = preset ? name.slice(preset.length + 1).toUpperCase()
        : (lc[0]?.model_type ?? ox[0]?.model_type ?? "? ? ?").split(" ").slice(2).join(" ");
    const tests = [...new Set([...ox, ...lc].map((r) => r.test))];
    for (const t of tests) {
        const a = ox.find((r) => r.test === t), b = lc.find((r) => r.test === t);
        const ratio = a && b ? (a.avg_ts / b.avg_ts).toFixed(2) : "-";
        console.log(`| ${model} | ${type} | ${t} | ${fmt(a)} | ${fmt(b)} | ${ratio} |`);
        // tg reads every weight once per token: size x t/s is the weight-read bandwidth reached
        const size = (b ?? a).model_size;
        if (t.startsWith("tg") && size)
            bw.push(`${name} ${t}: oxidize ${a ? (size * a.avg_ts / 1e9).toFixed(1) : "-"} GB/s, ` +
                    `llama.cpp ${b ? (size * b.avg_ts / 1e9).toFixed(1) : "-"} GB/s`);
    }
}
if (bw.length) console.log("\nweight bytes read per second during tg (model size x t/s):\n" +
                           bw.map((l) => "- " + l).join("\n"));
EOF
if [ -s "$out/noise.txt" ]; then
    echo
    echo "CPU taken by other processes during each run (over 5%: rerun on an idle machine):"
    sed 's/^/- /' "$out/noise.txt"
fi
echo
echo "raw results: $out/" >&2
