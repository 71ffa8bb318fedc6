// llamacpp_bench.mjs: llama-bench's pp<P> / tg<N> measurement, run on llama.cpp through the
// prebuilt CPU binaries of the npm package node-llama-cpp, printed as `oxidize bench -o json`.
//
// usage: node bench/llamacpp_bench.mjs -m MODEL.gguf [-p 512] [-n 128] [-b 512] [-t THREADS]
//                                      [-r 5] [--fa 0|1] [--seed N] [--perf] [--version]
//
// What is timed (as llama-bench does, see bench/README.md):
//   pp<P>: the sequence is cleared, then P tokens (BOS first when the model adds one, then
//          random) are decoded in batches of -b (one llama_decode for P <= b), logits kept for
//          the last token only.
//   tg<N>: the sequence is cleared, then N single-token llama_decode calls, each on the
//          previous position + 1, logits kept (BOS first when the model adds one, then random
//          tokens; nothing is sampled, as in llama-bench).
// Each test gets its own context of P (or N) cells, runs once to warm up (pp: the whole test,
// tg: one token, like llama-bench), then -r timed repetitions; tokens/s = tokens / seconds.
// The calls go straight to node-llama-cpp's native addon (initBatch / addToBatch /
// decodeBatch: llama_batch_init + common_batch_add + llama_decode + llama_synchronize on a
// libuv worker thread), bypassing its JS batching queue; the remaining overhead per decode
// call is one worker-thread hop and one promise (tens of microseconds), included in the time.
import { performance } from "node:perf_hooks";
import { createRequire } from "node:module";
import path from "node:path";
import fs from "node:fs";

function usage(code) {
    (code ? process.stderr : process.stdout).write(
        "usage: node bench/llamacpp_bench.mjs -m MODEL.gguf [-p 512] [-n 128] [-b 512] [-t N]\n" +
        "                                     [-r 5] [--fa 0|1] [--seed N] [--perf] [--version]\n" +
        "  -p / -n take comma-separated lists (0 skips). --fa 1 (default) turns flash attention\n" +
        "  on, as llama-bench's default 'auto' resolves on CPU. --perf prints llama.cpp's own\n" +
        "  timings to stderr after each test. --version prints the llama.cpp build and exits.\n");
    process.exit(code);
}

function parseArgs(argv) {
    const o = { model: null, prompts: [512], gens: [128], batch: 512, threads: 0, reps: 5,
                fa: true, seed: 1234, perf: false, version: false };
    const list = (s) => s.split(",").map((x) => {
        const v = Number(x);
        if (!Number.isInteger(v) || v < 0) throw new Error(`bad number '${x}'`);
        return v;
    });
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i], val = () => {
            if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
            return argv[++i];
        };
        switch (a) {
            case "-m": case "--model": o.model = val(); break;
            case "-p": case "--n-prompt": o.prompts = list(val()); break;
            case "-n": case "--n-gen": o.gens = list(val()); break;
            case "-b": case "--batch-size": o.batch = list(val())[0]; break;
            case "-t": case "--threads": o.threads = list(val())[0]; break;
            case "-r": case "--repetitions": o.reps = list(val())[0]; break;
            case "--fa": o.fa = val() !== "0"; break;
            case "--seed": o.seed = list(val())[0]; break;
            case "--perf": o.perf = true; break;
            case "--version": o.version = true; break;
            case "-h": case "--help": usage(0); break;
            default: throw new Error(`unknown option '${a}'`);
        }
    }
    if (!o.version && !o.model) throw new Error("need -m MODEL.gguf");
    if (o.reps < 1 || o.batch < 1) throw new Error("-r and -b must be at least 1");
    return o;
}

// llama-bench draws tokens with std::rand() % n_vocab; any fixed-seed uniform source will do.
function makeRng(seed) {
    let s = BigInt(seed) | 1n;
    return (n) => {
        s ^= s << 13n; s &= 0xFFFFFFFFFFFFFFFFn;
        s ^= s >> 7n;
        s ^= s << 17n; s &= 0xFFFFFFFFFFFFFFFFn;
        return Number(s % BigInt(n));
    };
}

function mean(xs) { return xs.reduce((a, b) => a + b, 0) / xs.length; }
function stddev(xs) { // sample standard deviation, as llama-bench reports
    if (xs.length < 2) return 0;
    const m = mean(xs);
    return Math.sqrt(xs.reduce((a, b) => a + (b - m) * (b - m), 0) / (xs.length - 1));
}

// A package's folder: bench/node_modules first (where compare.sh installs), then Node's lookup.
function packageDir(name) {
    const local = path.join(path.dirname(new URL(import.meta.url).pathname), "node_modules", name);
    if (fs.existsSync(path.join(local, "package.json"))) return local;
    let dir = path.dirname(createRequire(import.meta.url).resolve(name));
    while (!fs.existsSync(path.join(dir, "package.json")) && dir !== path.dirname(dir))
        dir = path.dirname(dir);
    return dir;
}

// llama.cpp's release as node-llama-cpp records it, plus what the binaries say of themselves:
// ggml_version() / ggml_commit() sit side by side in libggml-base.so as "<x.y.z>\0<commit>\0".
// The commit is that of the git checkout the binaries were built in, which for these prebuilt
// binaries is node-llama-cpp's own repository, not llama.cpp's (its LLAMA_BUILD_NUMBER is 1).
function llamaCppVersion(llama) {
    const rel = llama.llamaCppRelease;
    let ggml = "?", commit = "?", pkgVersion = "?";
    try {
        pkgVersion = JSON.parse(fs.readFileSync(path.join(packageDir("node-llama-cpp"),
                                                          "package.json"))).version;
        const bins = path.join(packageDir(`@node-llama-cpp/${process.platform}-${process.arch}`),
                               "bins", `${process.platform}-${process.arch}`);
        const lib = fs.readFileSync(path.join(bins, "libggml-base.so")).toString("latin1");
        const m = lib.match(/\0([0-9]+\.[0-9]+\.[0-9]+)\0([0-9a-f]{7,40}|unknown)\0/);
        if (m) [ggml, commit] = [m[1], m[2]];
    } catch { /* another layout: what is unknown stays "?" */ }
    return `${rel.repo} ${rel.release}, ggml ${ggml} (build commit ${commit}; node-llama-cpp ` +
           `${pkgVersion} ${llama.buildType} CPU binaries)`;
}

// One decode of tokens at positions pos.. with the logits of the last one kept.
async function decode(ctx, seqId, pos, tokens) {
    ctx.initBatch(tokens.length);
    ctx.addToBatch(seqId, pos, tokens, Uint32Array.of(tokens.length - 1));
    await ctx.decodeBatch();
}

// llama-bench's test_prompt: BOS first when the model adds one, then random tokens.
async function runPrompt(ctx, seqId, nPrompt, nBatch, nVocab, rng, bos) {
    const tokens = new Uint32Array(nPrompt);
    for (let i = 0; i < nPrompt; i++) tokens[i] = i === 0 && bos >= 0 ? bos : rng(nVocab);
    ctx.disposeSequence(seqId); // llama_memory_seq_rm(seq, -1, -1): an empty cache
    const t0 = performance.now();
    for (let i = 0; i < nPrompt; i += nBatch)
        await decode(ctx, seqId, i, tokens.subarray(i, Math.min(nPrompt, i + nBatch)));
    return (performance.now() - t0) / 1e3;
}

async function runGen(ctx, seqId, nGen, first, nVocab, rng) {
    ctx.disposeSequence(seqId);
    const tok = new Uint32Array(1);
    tok[0] = first;
    const t0 = performance.now();
    for (let i = 0; i < nGen; i++) {
        await decode(ctx, seqId, i, tok);
        tok[0] = rng(nVocab);
    }
    return (performance.now() - t0) / 1e3;
}

async function runTest(model, o, info, test) {
    const nCtx = test.nPrompt + test.nGen;
    const context = await model.createContext({
        contextSize: nCtx, batchSize: Math.min(o.batch, Math.max(nCtx, 1)), sequences: 1,
        threads: o.threads, flashAttention: o.fa, performanceTracking: o.perf,
    });
    const seq = context.getSequence();
    const ctx = context._ctx, seqId = seq._sequenceId; // the native addon's context
    const rng = makeRng(o.seed);
    const bos = model.tokens.bos != null && model.tokens.shouldPrependBosToken
        ? model.tokens.bos : -1;
    const first = bos >= 0 ? bos : rng(info.nVocab);
    const run = () => test.nPrompt > 0
        ? runPrompt(ctx, seqId, test.nPrompt, o.batch, info.nVocab, rng, bos)
        : runGen(ctx, seqId, test.nGen, first, info.nVocab, rng);
    if (test.nPrompt > 0) await run(); // warm-up, as llama-bench: the whole prompt test
    else await runGen(ctx, seqId, 1, first, info.nVocab, rng); // ... or one token
    const samples = [];
    for (let r = 0; r < o.reps; r++) {
        const secs = await run();
        samples.push((test.nPrompt + test.nGen) / secs);
        process.stderr.write(`llama.cpp ${test.name} rep ${r + 1}/${o.reps}: ` +
                             `${samples.at(-1).toFixed(2)} t/s\n`);
    }
    if (o.perf) { // llama.cpp's own clock (warm-up included); its log reaches JS a tick later
        process.stderr.write(`llama.cpp's timings for ${test.name}, warm-up included:\n`);
        ctx.printTimings();
        await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const threads = context.currentThreads;
    await seq.dispose();
    await context.dispose();
    return { test: test.name, n_prompt: test.nPrompt, n_gen: test.nGen, avg_ts: mean(samples),
             stddev_ts: stddev(samples), samples_ts: samples, model_type: info.desc,
             model_size: info.size, model_n_params: info.nParams, n_threads: threads,
             n_batch: o.batch, load_ms: info.loadMs,
             peak_rss_mib: process.resourceUsage().maxRSS / 1024, flash_attn: o.fa,
             backend: "llama.cpp", build: info.version };
}

async function main() {
    let o;
    try { o = parseArgs(process.argv.slice(2)); } catch (e) {
        process.stderr.write(`llamacpp_bench: ${e.message}\n`);
        usage(2);
    }
    const { getLlama, LlamaLogLevel } = await import("node-llama-cpp");
    const llama = await getLlama({ gpu: false, build: "never",
                                   logLevel: o.perf ? LlamaLogLevel.debug : LlamaLogLevel.error,
                                   logger: (level, message) => process.stderr.write(message + "\n"),
                                   maxThreads: o.threads || undefined });
    const version = llamaCppVersion(llama);
    if (o.version) { process.stdout.write(version + "\n"); return; }
    if (!fs.existsSync(o.model)) throw new Error(`no such model: ${o.model}`);
    const t0 = performance.now();
    const model = await llama.loadModel({ modelPath: o.model, gpuLayers: 0, useMmap: true });
    const loadMs = performance.now() - t0;
    const embd = model.fileInfo.tensorInfo?.find((t) => t.name === "token_embd.weight");
    const nVocab = embd ? Number(embd.dimensions[1]) : model.tokens.eos + 1;
    const info = { nVocab, loadMs, version, desc: model.typeDescription, size: model.size,
                   nParams: model._model.getTotalParameters() };
    const tests = [ // llama-bench's order: every prompt length, then every generation length
        ...o.prompts.filter((p) => p > 0).map((p) => ({ name: `pp${p}`, nPrompt: p, nGen: 0 })),
        ...o.gens.filter((n) => n > 0).map((n) => ({ name: `tg${n}`, nPrompt: 0, nGen: n }))];
    const results = [];
    for (const t of tests) results.push(await runTest(model, o, info, t));
    await model.dispose();
    const rows = results.map((r) => "  " + JSON.stringify(r));
    process.stdout.write("[\n" + rows.join(",\n") + "\n]\n");
    const rss = process.resourceUsage().maxRSS / 1024; // KiB -> MiB, whole process (node too)
    process.stderr.write(`llama.cpp: ${version}; peak RSS ${rss.toFixed(0)} MiB (node included)\n` +
                         `llama.cpp ${llama.systemInfo.trim()}\n`);
}

main().catch((e) => {
    process.stderr.write(`llamacpp_bench: ${e && e.stack ? e.stack : e}\n`);
    process.exit(1);
});
