// oxidize.js: oxidize in the browser, as an ES module. An Oxidize object owns a Web Worker
// (worker.js) that runs the WebAssembly build, so the page stays responsive while it decodes;
// every call is a message to it. Generations are async iterators of {text, token} pieces.
//
//   import { Oxidize } from './oxidize.js';
//   const ox = await Oxidize.create({ threads: 4 });
//   await ox.load('https://example.org/model.gguf', { onProgress: (p) => console.log(p) });
//   for await (const piece of ox.chat([{ role: 'user', content: 'Hi' }], { temperature: 0 }))
//     out.textContent += piece.text;

const here = new URL('.', import.meta.url);

export class Oxidize {
  #worker;
  #next = 1;
  #pending = new Map(); // id -> {resolve, reject, onMessage}
  #threads;

  constructor(worker, threads) {
    this.#worker = worker;
    this.#threads = threads;
    worker.onmessage = (e) => this.#receive(e.data);
    worker.onerror = (e) => this.#failAll(new Error(e.message || 'the worker failed'));
  }

  /** A worker with the module loaded. threads: decoding threads (default: the cores, at most 8);
   * base: where oxidize-core.js, .wasm and worker.js are (default: this module's folder). */
  static async create(options = {}) {
    if (typeof SharedArrayBuffer === 'undefined' || !globalThis.crossOriginIsolated)
      throw new Error('oxidize needs a cross-origin isolated page (COOP/COEP headers) for threads');
    const base = new URL(options.base || here, location.href);
    const threads = options.threads ||
      Math.max(1, Math.min(8, navigator.hardwareConcurrency || 4));
    const ox = new Oxidize(new Worker(new URL('worker.js', base)), threads);
    await ox.#call({ op: 'init', coreUrl: new URL('oxidize-core.js', base).href, threads });
    return ox;
  }

  get threads() {
    return this.#threads;
  }

  #receive(msg) {
    const p = this.#pending.get(msg.id);
    if (!p) return;
    if ('result' in msg || 'error' in msg) {
      this.#pending.delete(msg.id);
      if ('error' in msg) p.reject(new Error(msg.error));
      else p.resolve(msg.result);
    } else if (p.onMessage) {
      p.onMessage(msg);
    }
  }

  #failAll(err) {
    for (const p of this.#pending.values()) p.reject(err);
    this.#pending.clear();
  }

  #call(msg, onMessage) {
    return this.#send(msg, onMessage).promise;
  }

  // The request's id (for an abort of it alone) and the promise of its answer.
  #send(msg, onMessage) {
    const id = this.#next++;
    const promise = new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject, onMessage });
      this.#worker.postMessage({ ...msg, id });
    });
    return { id, promise };
  }

  /** Loads a GGUF model from a URL (downloaded once, then read from the browser's storage; a
   * download cut short resumes) or a File. A model split by llama.cpp's gguf-split: its first
   * part's URL (NAME-00001-of-0000N.gguf; the others are fetched beside it) or all its Files.
   * Options: nCtx (context tokens; default the model's, at
   * most 4096), cache (false: no copy kept), onProgress({loaded, total, cached}). */
  load(source, options = {}) {
    const msg = { op: 'load', nCtx: options.nCtx || 0, threads: this.#threads, cache: options.cache };
    if (typeof source === 'string' || source instanceof URL)
      msg.url = new URL(source, location.href).href;
    else if (source instanceof Blob)
      msg.files = [source];
    else if (Array.isArray(source) && source.length && source.every((f) => f instanceof Blob))
      msg.files = source;
    else
      return Promise.reject(new TypeError('load: a URL, a File or the Files of a split model'));
    const onProgress = options.onProgress;
    return this.#call(msg, (m) => { if (m.progress && onProgress) onProgress(m.progress); });
  }

  unload() {
    return this.#call({ op: 'unload' });
  }

  tokenize(text, options = {}) {
    return this.#call({ op: 'tokenize', text, addSpecial: options.addSpecial,
                        parseSpecial: options.parseSpecial });
  }

  detokenize(tokens, options = {}) {
    return this.#call({ op: 'detokenize', tokens: Array.from(tokens), special: options.special });
  }

  /** The conversation as the model's chat template renders it, the assistant's turn opened. */
  applyChatTemplate(messages) {
    return this.#call({ op: 'applyChatTemplate', messages });
  }

  /** A completion of prompt: an async iterator of {text, token}; its result (finish reason,
   * token counts, times) is the promise `.result`. Options: the sampling settings of `oxidize
   * run` by their llama.cpp /completion names (temperature, top_k, top_p, min_p, typical_p,
   * repeat_penalty, repeat_last_n, presence_penalty, frequency_penalty, seed, mirostat, ...),
   * max_tokens, stop (a string or a list), grammar (GBNF), signal (an AbortSignal). */
  complete(prompt, options = {}) {
    return this.#generate({ op: 'complete', prompt }, options);
  }

  /** The same for a conversation ([{role, content}]) in the model's chat template. */
  chat(messages, options = {}) {
    return this.#generate({ op: 'chat', messages }, options);
  }

  /** Stops what runs: a generation (its iterator ends; its result's finishReason is 'abort') or
   * a model's download. */
  abort() {
    this.#worker.postMessage({ op: 'abort' });
  }

  /** Deletes the downloaded models this origin keeps. */
  clearCache() {
    return this.#call({ op: 'clearCache' });
  }

  /** Ends the worker; the object cannot be used afterwards. */
  terminate() {
    this.#worker.terminate();
    this.#failAll(new Error('terminated'));
  }

  #generate(msg, options) {
    const { signal, ...rest } = options;
    const queue = [];
    let wake = null, finished = false, failure = null;
    const push = () => { if (wake) { wake(); wake = null; } };
    const { id, promise: result } = this.#send({ ...msg, options: rest }, (m) => {
      queue.push({ text: m.text, token: m.token });
      push();
    });
    // an abort of this generation only: a signal or a loop left early stops nothing else
    const abortThis = () => this.#worker.postMessage({ op: 'abort', target: id });
    if (signal) {
      if (signal.aborted) abortThis();
      else signal.addEventListener('abort', abortThis, { once: true });
    }
    const done = () => {
      finished = true;
      if (signal) signal.removeEventListener('abort', abortThis);
      push();
    };
    result.then(done, (e) => { failure = e; done(); });
    return {
      result,
      async *[Symbol.asyncIterator]() {
        let completed = false;
        try {
          for (;;) {
            if (queue.length) { yield queue.shift(); continue; }
            if (finished) break;
            await new Promise((r) => { wake = r; });
          }
          completed = true;
          if (failure) throw failure;
        } finally {
          if (!completed) abortThis(); // the loop was left early: stop generating
        }
      },
    };
  }
}
