#!/usr/bin/env bash
# compare.sh: oxidize and llama.cpp side by side on the same GGUF files, both measured the way
# llama-bench does (pp<P>: one batch of P random tokens from an empty cache; tg<N>: N single-
# token decodes), printed as a markdown table of tokens/s and their ratio.
#
# usage: bench/compare.sh [-t THREADS[,THREADS]] [-r REPS] [-p 512] [-n 128] [--isa LEVEL[,LEVEL]]
#                         [--node-llama-cpp] [--no-build] [MODEL ...]
#   MODEL is a .gguf path, or PRESET:TYPE (e.g. llama-3.2-1b:q4_k_m), which is generated with
#   build/tools/gen-model into bench/models/PRESET-TYPE.gguf when missing.
#   Default models: llama-3.2-1b:q4_0 llama-3.2-1b:q8_0 llama-3.2-1b:q4_k_m.
#   -t: thread counts, comma separated (default: online CPUs); one table per count, so -t 1,2
#   shows whether a second thread pays.
#   --isa: the x86 levels to compare (avx2, avx2-vnni, avx512; default: every one this CPU has),
#   one table each: oxidize with OX_CPU_ISA=LEVEL against llama.cpp's llama-bench built for the
#   same level (bench/llama.cpp/LEVEL, made by bench/llamacpp_build.sh; set LLAMACPP_SRC to a
#   llama.cpp tree or mirror to have missing levels built).
#   --node-llama-cpp: instead, llama.cpp from the npm package node-llama-cpp (prebuilt binaries
#   that pick the CPU's best level), installed into bench/node_modules on first use.
# The engines take turns at every repetition of every test, and bench_membw reads the memory
# bandwidth before each tg pair (the table gives each engine's share of it).
# Raw JSON goes to bench/results/<time>/ (git-ignored).
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
levels=""
use_node=0

usage() {
    sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-0}"
}

while [ $# -gt 0 ]; do
    case "$1" in
        -t) threads="$(echo "$2" | tr ',' ' ')"; shift 2 ;;
        -r) reps="$2"; shift 2 ;;
        -p) n_prompt="$2"; shift 2 ;;
        -n) n_gen="$2"; shift 2 ;;
        --no-build) do_build=0; shift ;;
        --isa) levels="$(echo "$2" | tr ',' ' ')"; shift 2 ;;
        --node-llama-cpp) use_node=1; shift ;;
        -h|--help) usage 0 ;;
        -*) echo "compare.sh: unknown option '$1'" >&2; usage 2 ;;
        *) models+=("$1"); shift ;;
    esac
done
[ ${#models[@]} -gt 0 ] || models=(llama-3.2-1b:q4_0 llama-3.2-1b:q8_0 llama-3.2-1b:q4_k_m)

oxidize="$build/apps/oxidize/oxidize"
gen_model="$build/tools/gen-model"
membw="$build/bench/bench_membw"
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
if [ "$use_node" = 1 ] && [ ! -d bench/node_modules/node-llama-cpp ]; then
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

out_root="bench/results/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out_root"
out="$out_root"
cpu="$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)"
flags="$(lscpu | sed -n 's/^Flags:[[:space:]]*//p' | head -1)"
ox_commit="$(git rev-parse --short HEAD 2>/dev/null || echo '?')"
git diff --quiet HEAD 2>/dev/null || ox_commit="$ox_commit+dirty"
ox_version="$("$oxidize" --version 2>/dev/null | head -1) ($ox_commit)"

# The levels to compare: each x86 level this CPU has, unless --isa names them.
if [ "$use_node" = 0 ] && [ -z "$levels" ]; then
    for l in avx2 avx2-vnni avx512; do
        OX_CPU_ISA="$l" "$oxidize" --version | grep -qx "isa: $l" && levels="$levels $l"
    done
fi
# llama-bench of a level: built when missing and LLAMACPP_SRC says where the source is.
llama_bench() {
    local bin="bench/llama.cpp/$1/bin/llama-bench"
    if [ ! -x "$bin" ]; then
        [ -n "${LLAMACPP_SRC:-}" ] || { echo "compare.sh: no $bin: run bench/llamacpp_build.sh SRC $1, or set LLAMACPP_SRC" >&2; exit 1; }
        bench/llamacpp_build.sh "$LLAMACPP_SRC" "$1" >&2
    fi
    echo "$bin"
}
if [ "$use_node" = 1 ]; then
    lc_version="$(node bench/llamacpp_bench.mjs --version)"
else
    for l in $levels; do llama_bench "$l" >/dev/null; done
    lc_version="llama-bench built from source per level ($(cat bench/llama.cpp/src/VERSION 2>/dev/null || echo 'version unknown'))"
fi
{
    echo "date:      $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "cpu:       $cpu ($(nproc) online CPUs), $(echo $threads | tr ' ' ',') threads, $reps repetitions"
    echo "flags:     $flags"
    echo "oxidize:   $ox_version"
    echo "llama.cpp: $lc_version"
    echo "levels:    ${levels:-node-llama-cpp, which picks the best level of the CPU}"
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
        # both counters tick every 10 ms: under 2 s of run the share is not worth a verdict
        printf "%s: %.1f s, other processes used %.1f%% of the CPUs%s\n", n, w, o,
               (w < 2 ? "  (too short to tell)" : o > 5 ? "  <- NOISY" : "") }' |
        tee -a "$out/noise.txt" >&2
    rm -f "$out/.times0" "$out/.times1"
}

files=()
for m in "${models[@]}"; do files+=("$(resolve_model "$m")"); done

# One engine, one test (pp or tg), one timed repetition (after the engine's own warm-up run),
# as JSON on stdout.
bench_once() {
    local engine="$1" level="$2" t="$3" f="$4" test="$5" p=0 n=0
    [ "$test" = pp ] && p="$n_prompt" || n="$n_gen"
    case "$engine" in
        oxidize) env ${level:+OX_CPU_ISA=$level} "$oxidize" bench -m "$f" -p "$p" -n "$n" -t "$t" \
                     -r 1 -o json 2>/dev/null ;;
        llama.cpp) if [ -n "$level" ]; then
                       "$(llama_bench "$level")" -m "$f" -p "$p" -n "$n" -t "$t" -r 1 -o json
                   else
                       node bench/llamacpp_bench.mjs -m "$f" -p "$p" -n "$n" -t "$t" -r 1
                   fi ;;
    esac
}

# One level (empty: node-llama-cpp) at one thread count, into $out. The engines take turns at
# every repetition of every test (oxidize first on odd repetitions, llama.cpp on even ones),
# rather than one engine running all its repetitions and then the other: this VM's memory
# bandwidth moves between levels tens of seconds apart (26 and 45 GB/s, bench_membw), and a
# test that reads memory must see the same machine on both sides of a ratio. Before each tg
# pair bench_membw reads the bandwidth of the moment, so the table can say what share of it
# each engine reached.
run_level() {
    local level="$1" t="$2" f name tag r test engines e
    # the thread count goes into the run names only when there are several
    [ "$(echo $threads | wc -w)" -gt 1 ] && tag="-t $t " || tag=""
    : > "$out/membw.txt"
    for r in $(seq "$reps"); do
        engines="oxidize llama.cpp"
        [ $((r % 2)) = 0 ] && engines="llama.cpp oxidize"
        [ "$has_oxidize_bench" = 1 ] || engines="llama.cpp"
        for f in "${files[@]}"; do
            name="$(basename "$f" .gguf)"
            for test in pp tg; do
                [ "$test" = pp ] && [ "$n_prompt" = 0 ] && continue
                [ "$test" = tg ] && [ "$n_gen" = 0 ] && continue
                if [ "$test" = tg ] && [ -x "$membw" ]; then
                    "$membw" "$t" | sed -n "s/.*: \([0-9.]*\) GB\/s.*/$name \1/p" >> "$out/membw.txt"
                fi
                for e in $engines; do
                    echo "== rep $r/$reps $e ${level:+$level }$name $test" >&2
                    run "$(printf '%-9s' "$e") ${level:+$level }$tag$name $test rep $r" \
                        "$out/$name.$e.$test.r$r.json" \
                        bench_once "$e" "$level" "$t" "$f" "$test"
                done
            done
        done
    done
}

presets="$("$gen_model" --help | sed -n 's/^  --preset NAME *//p' | tr -d ',')"
# The table: one row per model and test, each engine's mean and sample standard deviation over
# the repetitions; ratio = oxidize t/s / llama.cpp t/s (> 1: faster).
table() {
node - "$out" "$presets" "${files[@]}" <<'EOF' | tee "$out/table.md"
const fs = require("fs"), path = require("path");
const [out, presetList, ...files] = process.argv.slice(2);
const presets = presetList.split(" ");
// llama-bench's JSON names a test by its token counts; oxidize and the node harness give "test"
const named = (r) => ({...r, test: r.test ?? (r.n_gen > 0 ? `tg${r.n_gen}` : `pp${r.n_prompt}`)});
const read = (f) => { try { return JSON.parse(fs.readFileSync(f, "utf8")).map(named); } catch { return []; } };
// every repetition's result of one engine on one file: $name.$engine.$test.r$rep.json
const results = (name, engine) => fs.readdirSync(out)
    .filter((f) => f.startsWith(`${name}.${engine}.`) && f.endsWith(".json"))
    .flatMap((f) => read(path.join(out, f)));
const stats = (xs) => {
    if (!xs.length) return null;
    const m = xs.reduce((a, b) => a + b, 0) / xs.length;
    const v = xs.length > 1 ? xs.reduce((a, b) => a + (b - m) ** 2, 0) / (xs.length - 1) : 0;
    return { mean: m, sd: Math.sqrt(v) };
};
const fmt = (st) => st ? `${st.mean.toFixed(2)} ± ${st.sd.toFixed(2)}` : "-";
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[(s.length - 1) >> 1]; };
// bench_membw before each tg pair: "name GB/s" lines
const membw = {};
try {
    for (const l of fs.readFileSync(path.join(out, "membw.txt"), "utf8").split("\n").filter(Boolean)) {
        const [n, gb] = l.split(" ");
        (membw[n] ??= []).push(+gb);
    }
} catch {}
console.log("| model | type | test | oxidize t/s | llama.cpp t/s | ratio |");
console.log("| --- | --- | --- | ---: | ---: | ---: |");
const bw = [];
for (const f of files) {
    const name = path.basename(f, ".gguf");
    const ox = results(name, "oxidize"), lc = results(name, "llama.cpp");
    // PRESET-TYPE names split at the type; other files take llama.cpp's "arch size TYPE"
    const preset = presets.find((p) => name.startsWith(p + "-"));
    const model = preset ?? name;
    const type = preset ? name.slice(preset.length + 1).toUpperCase()
        : (lc[0]?.model_type ?? ox[0]?.model_type ?? "? ? ?").split(" ").slice(2).join(" ");
    const tests = [...new Set([...ox, ...lc].map((r) => r.test))];
    for (const t of tests) {
        const a = stats(ox.filter((r) => r.test === t).map((r) => r.avg_ts));
        const b = stats(lc.filter((r) => r.test === t).map((r) => r.avg_ts));
        const ratio = a && b ? (a.mean / b.mean).toFixed(2) : "-";
        console.log(`| ${model} | ${type} | ${t} | ${fmt(a)} | ${fmt(b)} | ${ratio} |`);
        // tg reads every weight once per token: size x t/s is the weight-read bandwidth reached
        const size = [...ox, ...lc].find((r) => r.model_size)?.model_size;
        if (t.startsWith("tg") && size) {
            const gb = (st) => st ? (size * st.mean / 1e9).toFixed(1) : "-";
            const m = membw[name]?.length ? median(membw[name]) : 0;
            const share = (st) => st && m ? ` (${(100 * size * st.mean / 1e9 / m).toFixed(0)}%)` : "";
            bw.push(`${name} ${t}: oxidize ${gb(a)} GB/s${share(a)}, llama.cpp ${gb(b)} GB/s${share(b)}` +
                    (m ? `; bench_membw ${membw[name].map((x) => x.toFixed(1)).join(", ")} GB/s` +
                         ` (median ${m.toFixed(1)})` : ""));
        }
    }
}
if (bw.length) console.log("\nweight bytes read per second during tg (model size x t/s; in brackets, " +
                           "the share of bench_membw's median, read before each tg pair):\n" +
                           bw.map((l) => "- " + l).join("\n"));
EOF
if [ -s "$out/noise.txt" ]; then
    echo
    echo "CPU taken by other processes during the runs (over 5%: rerun on an idle machine):"
    awk '!/too short/ { for (i = 2; i <= NF; i++) if ($(i - 1) == "used") { v = $i; sub(/%/, "", v)
                                                                           if (v + 0 > max) max = v + 0 }
                        n++ }
         END { printf "- %d runs of 2 s or more, at most %.1f%% of the CPUs\n", n, max }' "$out/noise.txt"
    grep 'NOISY' "$out/noise.txt" | sed 's/^/- /' || true
fi
}

# One table per level and thread count; with one count, the layout of a single -t.
several=0
[ "$(echo $threads | wc -w)" -gt 1 ] && several=1
if [ "$use_node" = 1 ]; then
    for t in $threads; do
        out="$out_root"
        [ "$several" = 1 ] && out="$out_root/t$t" && mkdir -p "$out" && echo "### $t threads"
        run_level "" "$t"
        table
        echo
    done
else
    for level in $levels; do
        for t in $threads; do
            out="$out_root/$level"
            [ "$several" = 1 ] && out="$out/t$t"
            mkdir -p "$out"
            echo "### level $level$([ "$several" = 1 ] && echo ", $t threads")"
            run_level "$level" "$t"
            echo
            table
            echo
        done
    done
fi
out="$out_root"
echo "load:      $(cut -d' ' -f1-3 /proc/loadavg) (after the runs)" | tee -a "$out/env.txt"
echo
echo "raw results: $out/" >&2
