// worker.js: the Web Worker that runs oxidize (oxidize-core.js, the library built for WebAssembly)
// for oxidize.js, so the page never waits on a decode. Requests come as {id, op, ...} messages and
// are answered with {id, result} or {id, error}; a generation streams {id, token, text} messages
// first. Between a prompt's chunks and between tokens the worker returns to its event loop, where
// an {op: 'abort'} message is seen. Models downloaded from a URL are kept in the origin's private
// file system (OPFS): a reload reads them from there, and a download cut short continues with a
// Range request from where it stopped.
/* global importScripts, createOxidizeCore, FileReaderSync */
'use strict';

let core = null;        // the module (createOxidizeCore's), made by 'init'
let session = 0;        // the loaded model's session pointer (0: none)
let aborted = false;    // set by an 'abort' message, read between steps
let busy = false;       // a generation is running
let current = 0;        // the id of the running load or generation (0: none)

const ready = (id, result) => postMessage({ id, result });
const failed = (id, error) => postMessage({ id, error: String(error && error.message || error) });
// A return to the event loop (where an abort message is read) that costs no more than that: a
// message to ourselves. setTimeout(0) would do, but browsers stretch nested timeouts to 4 ms,
// which would be a floor under every token's time.
const yieldPort = new MessageChannel();
const waiting = [];
yieldPort.port1.onmessage = () => waiting.shift()();
const nextTask = () => new Promise((resolve) => {
  waiting.push(resolve);
  yieldPort.port2.postMessage(0);
});

// ---- strings and arrays through the module's heap ----

function withString(text, fn) {
  const n = core.lengthBytesUTF8(text) + 1;
  const p = core._malloc(n);
  try {
    core.stringToUTF8(text, p, n);
    return fn(p);
  } finally {
    core._free(p);
  }
}

function lastError() {
  return core.UTF8ToString(core._oxw_last_error());
}

function tokenize(text, addSpecial, parseSpecial) {
  return withString(text, (p) => {
    let cap = Math.max(16, text.length + 8);
    for (;;) {
      const buf = core._malloc(cap * 4);
      try {
        const n = core._oxw_tokenize(session, p, addSpecial ? 1 : 0, parseSpecial ? 1 : 0, buf, cap);
        if (n < 0) throw new Error(lastError());
        if (n <= cap) return Array.from(new Int32Array(core.HEAP32.buffer, buf >>> 0, n));
        cap = n;
      } finally {
        core._free(buf);
      }
    }
  });
}

function detokenize(tokens, special) {
  const buf = core._malloc(Math.max(1, tokens.length) * 4);
  try {
    new Int32Array(core.HEAP32.buffer, buf >>> 0, tokens.length).set(tokens);
    const p = core._oxw_detokenize(session, buf, tokens.length, special ? 1 : 0);
    if (!p) throw new Error(lastError());
    return core.UTF8ToString(p);
  } finally {
    core._free(buf);
  }
}

// ---- getting the model file ----

async function opfsDir() {
  const root = await navigator.storage.getDirectory();
  return root.getDirectoryHandle('oxidize-models', { create: true });
}

// A file name for a URL: its last path part, made safe, and a hash of the whole URL.
function cacheName(url) {
  let h = 2166136261;
  for (let i = 0; i < url.length; i++) h = Math.imul(h ^ url.charCodeAt(i), 16777619) >>> 0;
  const base = url.split(/[?#]/)[0].split('/').pop().replace(/[^A-Za-z0-9._-]/g, '_') || 'model';
  return `${h.toString(16)}-${base}`;
}

async function exists(dir, name) {
  try {
    return await dir.getFileHandle(name);
  } catch {
    return null;
  }
}

// Where a download stands: its validator (the server's ETag or Last-Modified, so a resumed
// download does not splice a changed file), beside NAME.part as NAME.meta.
async function readMeta(dir, name) {
  const h = await exists(dir, name + '.meta');
  return h ? (await h.getFile()).text() : '';
}
async function writeMeta(dir, name, text) {
  const h = await dir.getFileHandle(name + '.meta', { create: true });
  const w = await h.createWritable();
  await w.write(text);
  await w.close();
}

// A response for the bytes from `have` on: a Range request (If-Range: the validator, so a
// changed file comes back whole) where part of the file is kept. {res, have}: have is 0 when the
// server sent the whole file; a 416 with the kept size as the file's size means it is complete.
async function fetchFrom(url, have, validator) {
  const headers = have > 0 ? { Range: `bytes=${have}-`, ...(validator ? { 'If-Range': validator } : {}) } : {};
  const res = await fetch(url, { headers });
  if (res.status === 416 && have > 0) {
    const size = /\/(\d+)$/.exec(res.headers.get('Content-Range') || '');
    if (size && Number(size[1]) === have) return { res: null, have };
    return fetchFrom(url, 0, '');
  }
  if (res.status === 206) {
    const start = /^bytes (\d+)-/.exec(res.headers.get('Content-Range') || '');
    if (!start || Number(start[1]) !== have) return fetchFrom(url, 0, ''); // not where we stopped
    return { res, have };
  }
  if (res.status !== 200) throw new Error(`${url}: HTTP ${res.status}`);
  return { res, have: 0 };
}

// The file at url as a File kept in OPFS: there already (cached), or downloaded into NAME.part
// (resumed with a Range request where a part is left) and renamed when complete. Without the
// cache the part is removed once the model is read (cleanup).
async function download(id, url, useCache, part, cleanup) {
  const dir = await opfsDir();
  const name = cacheName(url);
  const done = useCache && await exists(dir, name);
  if (done) {
    const file = await done.getFile();
    postMessage({ id, progress: { loaded: file.size, total: file.size, cached: true, ...part } });
    return file;
  }
  const partHandle = await dir.getFileHandle(name + '.part', { create: true });
  const access = await partHandle.createSyncAccessHandle();
  try {
    const kept = access.getSize();
    const { res, have } = await fetchFrom(url, kept, kept ? await readMeta(dir, name) : '');
    if (have !== kept) access.truncate(have);
    if (res) {
      const validator = res.headers.get('ETag') || res.headers.get('Last-Modified') || '';
      if (!have) await writeMeta(dir, name, validator);
      const length = Number(res.headers.get('Content-Length') || 0);
      const total = length ? have + length : 0;
      const reader = res.body.getReader();
      let loaded = have, lastReport = 0;
      for (;;) {
        if (aborted) throw new Error('aborted');
        const { done: end, value } = await reader.read();
        if (end) break;
        access.write(value, { at: loaded });
        loaded += value.length;
        if (loaded - lastReport >= (1 << 20) || loaded === total) {
          lastReport = loaded;
          postMessage({ id, progress: { loaded, total, cached: false, resumed: have, ...part } });
        }
      }
      if (total && loaded !== total) throw new Error(`${url}: ${loaded} of ${total} bytes`);
    }
    access.flush();
  } finally {
    access.close();
  }
  await dir.removeEntry(name + '.meta').catch(() => {});
  if (!useCache) {
    cleanup.push(name + '.part');
    return (await dir.getFileHandle(name + '.part')).getFile();
  }
  await partHandle.move(name);
  return (await dir.getFileHandle(name)).getFile();
}

// Mounts Files where the module reads them (WORKERFS: read in slices as asked, never copied
// whole into the worker's memory), all in one folder; returns the folder.
let mounts = 0;
function mount(files) {
  const dir = `/m${mounts++}`;
  core.FS.mkdir(dir);
  core.FS.mount(core.FS.filesystems.WORKERFS, { blobs: files.map((f) => ({ name: f.name, data: f.file })) }, dir);
  return dir;
}

// llama.cpp's gguf-split names: NAME-00001-of-00003.gguf. The parts of a split model's first
// part, or null.
const SPLIT = /-(\d{5})-of-(\d{5})\.gguf$/;
function splitParts(name) {
  const m = SPLIT.exec(name);
  if (!m) return null;
  const count = Number(m[2]);
  const parts = [];
  for (let i = 1; i <= count; i++)
    parts.push(name.replace(SPLIT, `-${String(i).padStart(5, '0')}-of-${m[2]}.gguf`));
  return parts;
}

const safeName = (name) => String(name || 'model.gguf').replace(/[^A-Za-z0-9._-]/g, '_');

// The model's files as [{name, file}], the first one the one to open: downloaded (every part of a
// split model from its first part's URL) or given.
async function modelFiles(id, msg, cleanup) {
  if (msg.files) {
    const files = msg.files.map((f) => ({ name: safeName(f.name), file: f }));
    const first = files.findIndex((f) => SPLIT.test(f.name) && SPLIT.exec(f.name)[1] === '00001');
    if (first > 0) files.unshift(files.splice(first, 1)[0]);
    return files;
  }
  const url = new URL(msg.url);
  const parts = splitParts(url.pathname) || [url.pathname];
  const files = [];
  for (const [i, part] of parts.entries()) {
    const partUrl = new URL(url);
    partUrl.pathname = part;
    const file = await download(id, partUrl.href, msg.cache !== false,
                                { part: i + 1, parts: parts.length }, cleanup);
    files.push({ name: safeName(part.split('/').pop()), file });
  }
  return files;
}

// Ends a running generation (it stops at its next step) before the session goes away.
async function stopGenerating() {
  while (busy) {
    aborted = true;
    await nextTask();
  }
}

// One load or unload at a time (each awaits downloads): a later one waits for the one before.
let exclusive = Promise.resolve();
function oneAtATime(fn) {
  const run = exclusive.then(fn, fn);
  exclusive = run.catch(() => {});
  return run;
}

// The module reads a file through 32-bit signed offsets (emscripten 3.1.6): 2 GiB per file.
const FILE_MAX = 2 ** 31 - 1;

async function load(id, msg) {
  await stopGenerating();
  if (session) { core._oxw_free(session); session = 0; }
  aborted = false;
  current = id;
  const cleanup = [];
  try {
    const files = await modelFiles(id, msg, cleanup);
    const big = files.find((f) => f.file.size > FILE_MAX);
    if (big)
      throw new Error(`${big.name} is ${big.file.size} bytes: a file over 2 GiB cannot be read ` +
                      'here; split the model (gguf-split --split-max-size 1G) and load its parts');
    const dir = mount(files);
    try {
      session = withString(`${dir}/${files[0].name}`,
                           (p) => core._oxw_load(p, msg.nCtx || 0, msg.threads || 0));
      if (!session) throw new Error(lastError());
    } finally {
      core.FS.unmount(dir);
      core.FS.rmdir(dir);
    }
    return {
      description: core.UTF8ToString(core._oxw_describe(session)),
      nCtx: core._oxw_n_ctx(session), nVocab: core._oxw_n_vocab(session),
      bytes: files.reduce((n, f) => n + f.file.size, 0),
    };
  } finally {
    current = 0;
    if (cleanup.length) {
      const dir = await opfsDir();
      for (const name of cleanup) await dir.removeEntry(name).catch(() => {});
    }
  }
}

// ---- generation ----

function applyOptions(options) {
  core._oxw_sampling_defaults(session);
  const names = { temperature: 'temperature', temp: 'temperature' };
  for (const [key, value] of Object.entries(options || {})) {
    if (['max_tokens', 'stop', 'grammar', 'signal', 'add_special', 'cache_prompt'].includes(key))
      continue;
    const v = typeof value === 'boolean' ? Number(value) : value;
    if (typeof v !== 'number') throw new Error(`option ${key}: not a number`);
    const r = withString(names[key] || key, (p) => core._oxw_sampling_set(session, p, v));
    if (r === -1) throw new Error(`unknown option ${key}`);
    if (r === -2) throw new Error(`option ${key}: ${value} is out of range`);
  }
  const grammar = options && options.grammar || '';
  if (withString(grammar, (p) => core._oxw_sampling_grammar(session, p)) !== 0)
    throw new Error(lastError());
}

// The text to hand out now, holding back what could begin a stop string; {text, rest, stop}:
// where a stop string is complete (the earliest, if several are), text ends before it.
function cutStop(pending, stops, final) {
  let at = -1;
  for (const s of stops) {
    const i = pending.indexOf(s);
    if (i >= 0 && (at < 0 || i < at)) at = i;
  }
  if (at >= 0) return { text: pending.slice(0, at), rest: '', stop: true };
  let keep = 0;
  if (!final)
    for (const s of stops)
      for (let k = Math.min(s.length - 1, pending.length); k > keep; k--)
        if (pending.endsWith(s.slice(0, k))) { keep = k; break; }
  return { text: pending.slice(0, pending.length - keep), rest: pending.slice(pending.length - keep), stop: false };
}

async function generate(id, prompt, options) {
  if (!session) throw new Error('no model is loaded');
  if (busy) throw new Error('a generation is already running');
  busy = true;
  aborted = false;
  current = id;
  try {
    applyOptions(options);
    const tokens = tokenize(prompt, options.add_special !== false, true);
    const maxTokens = options.max_tokens === undefined ? -1 : options.max_tokens;
    const stops = [].concat(options.stop || []).filter((s) => s);
    if (options.cache_prompt === false) core._oxw_forget(session);
    const buf = core._malloc(tokens.length * 4);
    new Int32Array(core.HEAP32.buffer, buf >>> 0, tokens.length).set(tokens);
    const began = core._oxw_begin(session, buf, tokens.length);
    core._free(buf);
    if (began < 0) throw new Error(lastError());
    const t0 = performance.now();
    let left;
    while ((left = core._oxw_prefill(session)) > 0) {
      await nextTask();
      if (aborted) break;
    }
    if (left < 0) throw new Error(lastError());
    const t1 = performance.now();
    let n = 0, reason = 'length', pending = '', stopped = false;
    while (!aborted && (maxTokens < 0 || n < maxTokens)) {
      const t = core._oxw_next(session);
      if (t === -1) { reason = 'stop'; break; }       // the model's end of turn
      if (t === -2) { reason = 'length'; break; }     // the context is full
      if (t < 0) throw new Error(lastError());
      n++;
      pending += core.UTF8ToString(core._oxw_piece(session, 0));
      const cut = cutStop(pending, stops, false);
      pending = cut.rest;
      if (cut.text) postMessage({ id, token: t, text: cut.text });
      if (cut.stop) { reason = 'stop'; stopped = true; break; }
      await nextTask();
    }
    if (aborted) reason = 'abort';
    if (!stopped && !aborted) { // what was held back: a partial character, a stop's prefix
      const cut = cutStop(pending + core.UTF8ToString(core._oxw_piece(session, 1)), stops, true);
      if (cut.text) postMessage({ id, token: -1, text: cut.text });
      if (cut.stop) reason = 'stop';
    }
    const t2 = performance.now();
    return {
      finishReason: reason, promptTokens: tokens.length, cachedTokens: began, tokens: n,
      promptMs: t1 - t0, genMs: t2 - t1,
    };
  } finally {
    busy = false;
    current = 0;
  }
}

function chatPrompt(messages) {
  const p = withString(JSON.stringify(messages), (m) => core._oxw_chat_render(session, m));
  if (!p) throw new Error(lastError());
  return core.UTF8ToString(p);
}

// ---- the message loop ----

const ops = {
  async init(msg) {
    importScripts(msg.coreUrl);
    // the threads' workers load the same script: named here, as a worker cannot find it itself
    core = await createOxidizeCore({
      threads: msg.threads, mainScriptUrlOrBlob: msg.coreUrl,
      locateFile: (f) => new URL(f, msg.coreUrl).href,
    });
    return { threads: msg.threads };
  },
  load: (msg, id) => oneAtATime(() => load(id, msg)),
  tokenize: (msg) => tokenize(msg.text, msg.addSpecial !== false, msg.parseSpecial === true),
  detokenize: (msg) => detokenize(msg.tokens, msg.special === true),
  applyChatTemplate: (msg) => chatPrompt(msg.messages),
  complete: (msg, id) => generate(id, msg.prompt, msg.options || {}),
  chat: (msg, id) => generate(id, chatPrompt(msg.messages), { add_special: false, ...msg.options }),
  unload: () => oneAtATime(async () => {
    await stopGenerating();
    if (session) core._oxw_free(session);
    session = 0;
    return true;
  }),
  async clearCache() {
    const root = await navigator.storage.getDirectory();
    await root.removeEntry('oxidize-models', { recursive: true }).catch(() => {});
    return true;
  },
};

onmessage = async (e) => {
  const msg = e.data;
  if (msg.op === 'abort') { // one request's (target), or whatever runs
    if (msg.target === undefined || msg.target === current) aborted = true;
    return;
  }
  try {
    if (!ops[msg.op]) throw new Error(`unknown request ${msg.op}`);
    if (msg.op !== 'init' && !core) throw new Error('not initialised');
    if (['tokenize', 'detokenize', 'applyChatTemplate'].includes(msg.op) && !session)
      throw new Error('no model is loaded');
    ready(msg.id, await ops[msg.op](msg, msg.id));
  } catch (err) {
    failed(msg.id, err);
  }
};
