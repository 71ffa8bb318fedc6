// oxidize.d.ts: the types of oxidize.js, the browser API of oxidize.

export interface CreateOptions {
  /** Decoding threads (default: the cores, at most 8). */
  threads?: number;
  /** Where oxidize-core.js, oxidize-core.wasm and worker.js are (default: oxidize.js's folder). */
  base?: string | URL;
}

export interface LoadProgress {
  loaded: number;
  /** 0 when the server did not say. */
  total: number;
  /** True when the file came from the browser's storage, not the network. */
  cached: boolean;
  /** Bytes a download cut short had already kept (it went on from there with a Range request). */
  resumed?: number;
  /** Which file of a split model (1-based) and how many it has. */
  part?: number;
  parts?: number;
}

export interface LoadOptions {
  /** Context size in tokens (default: the model's, at most 4096). */
  nCtx?: number;
  /** False: do not keep the download in the browser's storage (OPFS). */
  cache?: boolean;
  onProgress?: (progress: LoadProgress) => void;
}

export interface ModelInfo {
  description: string;
  nCtx: number;
  nVocab: number;
  bytes: number;
}

/** Sampling settings by their llama.cpp /completion names, as `oxidize run` takes them. */
export interface GenerateOptions {
  temperature?: number;
  top_k?: number;
  top_p?: number;
  min_p?: number;
  typical_p?: number;
  top_n_sigma?: number;
  repeat_penalty?: number;
  repeat_last_n?: number;
  presence_penalty?: number;
  frequency_penalty?: number;
  dry_multiplier?: number;
  dry_base?: number;
  dry_allowed_length?: number;
  dry_penalty_last_n?: number;
  xtc_probability?: number;
  xtc_threshold?: number;
  mirostat?: number;
  mirostat_tau?: number;
  mirostat_eta?: number;
  seed?: number;
  /** False: read the whole prompt again, even the part the cache holds from the last one. */
  cache_prompt?: boolean;
  /** Never end at the model's end-of-turn token (benchmarks: exactly max_tokens tokens). */
  ignore_eos?: boolean;
  /** Most tokens to generate (default: until the model ends its turn or the context is full). */
  max_tokens?: number;
  /** Text that ends the generation (not included). */
  stop?: string | string[];
  /** A GBNF grammar the output keeps to. */
  grammar?: string;
  signal?: AbortSignal;
}

export interface Piece {
  text: string;
  /** The token's id (-1 for text held back until the end). */
  token: number;
}

export interface GenerateResult {
  finishReason: 'stop' | 'length' | 'abort';
  promptTokens: number;
  /** Of those, how many the cache already held (not read again). */
  cachedTokens: number;
  tokens: number;
  promptMs: number;
  genMs: number;
}

export interface Generation extends AsyncIterable<Piece> {
  result: Promise<GenerateResult>;
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | string;
  content: string;
}

export declare class Oxidize {
  static create(options?: CreateOptions): Promise<Oxidize>;
  readonly threads: number;
  /** A URL (a split model: its first part's), a File, or all the Files of a split model. */
  load(source: string | URL | Blob | Blob[], options?: LoadOptions): Promise<ModelInfo>;
  unload(): Promise<boolean>;
  tokenize(text: string, options?: { addSpecial?: boolean; parseSpecial?: boolean }): Promise<number[]>;
  detokenize(tokens: ArrayLike<number>, options?: { special?: boolean }): Promise<string>;
  applyChatTemplate(messages: ChatMessage[]): Promise<string>;
  complete(prompt: string, options?: GenerateOptions): Generation;
  chat(messages: ChatMessage[], options?: GenerateOptions): Generation;
  abort(): void;
  clearCache(): Promise<boolean>;
  terminate(): void;
}
