// web_bench.mjs: oxidize's browser build and wllama (llama.cpp for WebAssembly, npm
// @wllama/wllama) side by side in one headless Chromium (bench/web.sh serves both and runs this):
// the same GGUF file, the same threads, CPU only; a prompt of about PP tokens read, then TG tokens
// generated greedily with the end-of-generation token ignored, engines alternating, ROUNDS times.
// Prints JSON: per engine and round, prompt and generation tokens/s as each engine times itself
// (oxidize: its worker's clock around the prompt and the tokens; wllama: llama.cpp's timings) and
// the wall time of the whole call as the page sees it.
//   node web_bench.mjs NODE_MODULES BASE_URL MODEL_URL THREADS PP TG ROUNDS
import { createRequire } from 'node:module';
import path from 'node:path';

const [modules, base, model, threads, pp, tg, rounds] = process.argv.slice(2);
const require = createRequire(path.join(modules, 'x.js'));
const { chromium } = require('playwright-core');
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium', headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
         '--disable-component-update', '--disable-sync'] });
const page = await browser.newPage();
page.on('pageerror', (e) => console.error('page error:', String(e)));
await page.goto(`${base}/demo.css`);
const out = await page.evaluate(async ({ model, threads, pp, tg, rounds }) => {
  const { Oxidize } = await import('./oxidize.js');
  const { Wllama } = await import('./wllama/esm/index.js');
  const blob = await (await fetch(model)).blob();
  // a prompt of about pp tokens in both tokenizers (the same vocabulary)
  const prompt = Array.from({ length: pp }, (_, i) => ['the', 'of', 'and', 'to', 'in'][i % 5]).join(' ');
  const ox = await Oxidize.create({ threads });
  const info = await ox.load(new File([blob], 'model.gguf'), { nCtx: 2048 });
  const wl = new Wllama({ default: './wllama/esm/wasm/wllama.wasm' }, { suppressNativeLog: true });
  await wl.loadModel([new File([blob], 'model.gguf')],
                     { n_threads: threads, n_ctx: 2048, n_batch: 512, n_gpu_layers: 0 });
  const rows = [];
  for (let r = 0; r < rounds; r++) {
    let t0 = performance.now();
    const run = ox.complete(prompt, { temperature: 0, max_tokens: tg, ignore_eos: true,
                                      cache_prompt: false });
    for await (const piece of run) void piece;
    const o = await run.result;
    rows.push({ engine: 'oxidize', round: r, promptTokens: o.promptTokens, tokens: o.tokens,
                pp: o.promptTokens / (o.promptMs / 1000), tg: o.tokens / (o.genMs / 1000),
                wallMs: performance.now() - t0 });
    await wl.kvClear?.();
    t0 = performance.now();
    const w = await wl.createCompletion({ prompt, n_predict: tg, temperature: 0, ignore_eos: true,
                                          cache_prompt: false });
    const tm = w.timings || {};
    rows.push({ engine: 'wllama', round: r, promptTokens: tm.prompt_n, tokens: tm.predicted_n,
                pp: tm.prompt_per_second, tg: tm.predicted_per_second,
                wallMs: performance.now() - t0 });
  }
  ox.terminate();
  await wl.exit?.();
  return { model: info.description, threads, rows };
}, { model, threads: Number(threads), pp: Number(pp), tg: Number(tg), rounds: Number(rounds) });
await browser.close();
console.log(JSON.stringify(out));
