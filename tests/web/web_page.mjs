// web_page.mjs: the browser build in headless Chromium (Debian's, driven by playwright-core;
// test_web.py runs it and checks what it prints as JSON). Through the JavaScript API on a blank
// page of the demo server: a completion, tokenize/detokenize, an abort, a second load from the
// browser's storage, a download cut short and resumed, a split model, bad files; then the demo
// page: a chat
// sent with Enter, its answer, speed and screenshot.
//   node web_page.mjs NODE_MODULES BASE_URL MODEL_NAME PROMPT SCREENSHOT SPLIT_NAME
import { createRequire } from 'node:module';
import path from 'node:path';

const [modules, base, model, prompt, shot, split] = process.argv.slice(2);
const require = createRequire(path.join(modules, 'x.js'));
const { chromium } = require('playwright-core');
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium', headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
         '--disable-component-update', '--disable-sync'] });
const page = await browser.newPage();
const errors = [];
page.on('pageerror', (e) => errors.push(String(e)));
// the browser reports the test's failed downloads (404, a dropped connection) itself
page.on('console', (m) => {
  if (m.type() === 'error' && !/Failed to load resource|net::ERR_/.test(m.text()))
    errors.push(m.text());
});
const out = {};

// ---- the API, on the demo's origin (a document of its own: the stylesheet, shown as text) ----
await page.goto(`${base}/demo.css`);
out.isolated = await page.evaluate(() => globalThis.crossOriginIsolated);
out.api = await page.evaluate(async ({ model, prompt, split }) => {
  const { Oxidize } = await import('./oxidize.js');
  const r = {};
  window.addEventListener('unhandledrejection', (e) => { r.unhandled = String(e.reason); });
  const ox = await Oxidize.create({ threads: 2 });
  await ox.clearCache();
  const progress = [];
  r.info = await ox.load(`models/${model}`, { onProgress: (p) => progress.push(p) });
  r.firstProgress = progress.at(-1);
  // greedy text, as `oxidize run --temp 0 -n 24` gives
  const run = ox.complete(prompt, { temperature: 0, max_tokens: 24 });
  r.text = '';
  for await (const piece of run) r.text += piece.text;
  r.result = await run.result;
  // the same prompt again reads only its last token; with cache_prompt false, all of it; with
  // ignore_eos, exactly max_tokens tokens
  const again1 = ox.complete(prompt, { temperature: 0, max_tokens: 2 });
  for await (const piece of again1) void piece;
  r.cachedAgain = (await again1.result).cachedTokens;
  const fresh = ox.complete(prompt, { temperature: 0, max_tokens: 40, cache_prompt: false,
                                      ignore_eos: true });
  for await (const piece of fresh) void piece;
  r.freshResult = await fresh.result;
  // the demo's first chat turn, for the page's answer to match
  const chat = ox.chat([{ role: 'user', content: 'Who made the light?' }],
                       { temperature: 0, max_tokens: 16 });
  r.chatText = '';
  for await (const piece of chat) r.chatText += piece.text;
  r.tokens = await ox.tokenize(prompt);
  r.detok = await ox.detokenize(r.tokens);
  // a stop string ends the text before it
  const stopped = ox.complete(prompt, { temperature: 0, max_tokens: 24, stop: ['LORD'] });
  r.stopText = '';
  for await (const piece of stopped) r.stopText += piece.text;
  r.stopResult = await stopped.result;
  // several stop strings: the earliest in the text ends it
  const two = ox.complete(prompt, { temperature: 0, max_tokens: 24, stop: ['LORD', 'unto'] });
  r.twoStopText = '';
  for await (const piece of two) r.twoStopText += piece.text;
  // an abort: leaving the loop early stops the generation
  const long = ox.complete(prompt, { temperature: 0.8, seed: 7, max_tokens: 400 });
  let n = 0;
  for await (const piece of long) { if (++n === 3) break; void piece; }
  r.abortResult = await long.result;
  // ... and an AbortSignal
  const ctl = new AbortController();
  const sig = ox.complete(prompt, { max_tokens: 400, signal: ctl.signal });
  n = 0;
  for await (const piece of sig) { if (++n === 2) ctl.abort(); void piece; }
  r.signalResult = await sig.result;
  // that signal's generation is over: aborting a later one takes a signal of its own
  const later = ox.complete(prompt, { temperature: 0, max_tokens: 8, signal: ctl.signal });
  r.staleSignal = await later.result.then((x) => x.finishReason, (e) => e.message);
  const ctl2 = new AbortController();
  const kept = ox.complete(prompt, { temperature: 0, max_tokens: 8, signal: ctl2.signal });
  const other = new AbortController();
  ox.complete(prompt, { max_tokens: 1, signal: other.signal }).result.catch(() => {});
  other.abort(); // another request's signal: the running one goes on
  r.otherSignal = (await kept.result).finishReason;
  // without the cache, nothing of the download stays in the browser's storage
  await ox.load(`models/${model}`, { cache: false });
  const stored = await navigator.storage.getDirectory().then((d) => d.getDirectoryHandle('oxidize-models'));
  r.partsLeft = [];
  for await (const name of stored.keys()) if (/\.(part|meta)$/.test(name)) r.partsLeft.push(name);
  // a load while a generation runs ends the generation first
  const running = ox.complete(prompt, { max_tokens: 400, ignore_eos: true });
  const reload = ox.load(`models/${model}`);
  for await (const piece of running) void piece;
  r.loadDuringRun = (await running.result).finishReason;
  await reload;
  // bad settings are refused
  try { await ox.complete(prompt, { top_k: -3 }).result; } catch (e) { r.badOption = e.message; }
  // the same model again comes from the browser's storage
  const again = [];
  await ox.load(`models/${model}`, { onProgress: (p) => again.push(p) });
  r.againProgress = again;
  // a download cut short: the first load fails, the second continues where it stopped
  try { await ox.load(`models/cut-once/${model}`); } catch (e) { r.cutError = e.message; }
  const resumed = [];
  await ox.load(`models/cut-once/${model}`, { onProgress: (p) => resumed.push(p) });
  r.resumedFrom = resumed.length ? resumed.at(-1).resumed : -1;
  const run2 = ox.complete(prompt, { temperature: 0, max_tokens: 24 });
  r.resumedText = '';
  for await (const piece of run2) r.resumedText += piece.text;
  // a model split by gguf-split: from its first part's URL (the others fetched beside it), and
  // from its Files in any order
  const splitProgress = [];
  await ox.load(`models/${split}-00001-of-00003.gguf`, { onProgress: (p) => splitProgress.push(p) });
  r.splitParts = [...new Set(splitProgress.map((p) => `${p.part}/${p.parts}`))];
  r.splitText = '';
  for await (const piece of ox.complete(prompt, { temperature: 0, max_tokens: 24 })) r.splitText += piece.text;
  const parts = [];
  for (const i of [2, 3, 1]) {
    const name = `${split}-0000${i}-of-00003.gguf`;
    parts.push(new File([await (await fetch(`models/${name}`)).blob()], name));
  }
  await ox.load(parts);
  r.splitFilesText = '';
  for await (const piece of ox.complete(prompt, { temperature: 0, max_tokens: 24 })) r.splitFilesText += piece.text;
  // a recurrent model, twice on one prompt: the second time its state cannot keep the prefix
  await ox.load('models/qwen35-f16.gguf');
  r.recurrentTokens = [];
  for (let i = 0; i < 2; i++) {
    const ids = [];
    const run = ox.complete(prompt, { temperature: 0, max_tokens: 8, ignore_eos: true });
    for await (const piece of run) if (piece.token >= 0) ids.push(piece.token);
    r.recurrentTokens.push(ids);
  }
  // files that are not models: an error, and the worker goes on
  const junk = new File([new Uint8Array(1000).fill(7)], 'junk.gguf');
  try { await ox.load(junk); } catch (e) { r.junkError = e.message; }
  const blob = await (await fetch(`models/${model}`)).blob();
  const cut = new File([blob.slice(0, blob.size >> 1)], 'half.gguf');
  try { await ox.load(cut); } catch (e) { r.halfError = e.message; }
  try { await ox.load('models/no-such-model.gguf'); } catch (e) { r.missingError = e.message; }
  // a File that is a model loads
  r.fileInfo = await ox.load(new File([blob], model));
  ox.terminate();
  return r;
}, { model, prompt, split });

// ---- the demo page: a chat ----
await page.goto(`${base}/index.html?temperature=0&max_tokens=16&threads=2`);
await page.waitForFunction(() => document.getElementById('status').dataset.loaded, null,
                           { timeout: 120000 });
out.status = await page.textContent('#status');
await page.fill('#input', 'Who made the light?');
await page.press('#input', 'Enter');
await page.waitForSelector('.assistant[data-done="1"]', { timeout: 120000 });
out.user = await page.textContent('.user');
out.answer = await page.textContent('.assistant');
out.speed = await page.textContent('#speed');
await page.screenshot({ path: shot });
// the answer is on the screenshot: its box lies in the viewport and holds dark (text) pixels
const box = await page.locator('.assistant').boundingBox();
const vp = page.viewportSize();
out.answerVisible = box && box.y >= 0 && box.y + box.height <= vp.height && box.width > 20;
const png = await page.screenshot({ clip: box });
out.answerInk = await page.evaluate(async (b64) => {
  const img = new Image();
  img.src = `data:image/png;base64,${b64}`;
  await img.decode();
  const c = document.createElement('canvas');
  c.width = img.width; c.height = img.height;
  const g = c.getContext('2d');
  g.drawImage(img, 0, 0);
  const d = g.getImageData(0, 0, c.width, c.height).data;
  let dark = 0;
  for (let i = 0; i < d.length; i += 4) if (d[i] + d[i + 1] + d[i + 2] < 200) dark++;
  return dark;
}, png.toString('base64'));
// a model that is not there: the page says so
await page.goto(`${base}/index.html?model=models/no-such-model.gguf`);
await page.waitForFunction(() => document.getElementById('status').dataset.error !== undefined,
                           null, { timeout: 60000 });
out.badModelStatus = await page.textContent('#status');
out.errors = errors;
await browser.close();
console.log(JSON.stringify(out));
