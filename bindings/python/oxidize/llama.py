"""llama.py: Llama, llama-cpp-python's high-level class over liboxidize: a model, one context
(sequence 0), and the completion, chat and embedding calls with the same arguments, defaults
and OpenAI-shaped results."""
from __future__ import annotations

import ctypes
import os
from typing import (Any, Callable, Dict, Generator, Iterator, List, Literal, Optional,
                    Sequence, Union, cast, overload)

import numpy as np
import numpy.typing as npt

from . import _lib
from ._errors import ContextFullError, check
from ._sampling import Sampler
from .llama_grammar import LlamaGrammar
from .llama_types import (CreateCompletionResponse,
                          CreateCompletionStreamResponse, CreateEmbeddingResponse)

LLAMA_DEFAULT_SEED = 0xFFFFFFFF
# llama_cpp's split modes (split_mode=): one GPU, layers over GPUs, rows (heads) over GPUs
LLAMA_SPLIT_MODE_NONE, LLAMA_SPLIT_MODE_LAYER, LLAMA_SPLIT_MODE_ROW = 0, 1, 2

LogitsProcessor = Callable[[npt.NDArray[np.intc], npt.NDArray[np.single]], npt.NDArray[np.single]]
StoppingCriteria = Callable[[npt.NDArray[np.intc], npt.NDArray[np.single]], bool]


class LogitsProcessorList(List[LogitsProcessor]):
    """Processors applied in turn to a row of logits before the sampler sees it."""

    def __call__(self, input_ids: npt.NDArray[np.intc],
                 scores: npt.NDArray[np.single]) -> npt.NDArray[np.single]:
        for processor in self:
            scores = processor(input_ids, scores)
        return scores


class StoppingCriteriaList(List[StoppingCriteria]):
    """Generation stops when any criterion returns True."""

    def __call__(self, input_ids: npt.NDArray[np.intc], logits: npt.NDArray[np.single]) -> bool:
        return any(criterion(input_ids, logits) for criterion in self)


class MinTokensLogitsProcessor:
    """Bans the end token until min_tokens tokens were generated."""

    def __init__(self, min_tokens: int, token_eos: int) -> None:
        self.min_tokens, self.token_eos = min_tokens, token_eos
        self.prompt_tokens: Optional[int] = None

    def __call__(self, input_ids: npt.NDArray[np.intc],
                 scores: npt.NDArray[np.single]) -> npt.NDArray[np.single]:
        if self.prompt_tokens is None:
            self.prompt_tokens = len(input_ids)
        if len(input_ids) - self.prompt_tokens < self.min_tokens:
            scores[self.token_eos] = -np.inf
        return scores


class LlamaState:
    """What save_state keeps: the evaluated tokens, the cache's state (llama_state: the bytes of
    ox_state_seq_save, loaded as they are, so decoding goes on with the same logits), the last
    logits and the seed. Picklable, to keep on disk; a state without llama_state (made by hand)
    is rebuilt on load by evaluating its tokens again."""

    def __init__(self, input_ids: npt.NDArray[np.intc], scores: npt.NDArray[np.single],
                 n_tokens: int, llama_state: bytes, llama_state_size: int, seed: int,
                 last_logits: Optional[npt.NDArray[np.single]] = None) -> None:
        self.input_ids, self.scores, self.n_tokens = input_ids, scores, n_tokens
        self.llama_state, self.llama_state_size, self.seed = llama_state, llama_state_size, seed
        self.last_logits = last_logits


class LlamaTokenizer:
    """The model's tokenizer alone, as llama_cpp.LlamaTokenizer."""

    def __init__(self, llama: "Llama") -> None:
        self._llama = llama

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = True) -> List[int]:
        return self._llama.tokenize(text, add_bos=add_bos, special=special)

    def detokenize(self, tokens: List[int], prev_tokens: Optional[List[int]] = None,
                   special: bool = False) -> bytes:
        return self._llama.detokenize(tokens, prev_tokens, special)

    def encode(self, text: str, add_bos: bool = True, special: bool = True) -> List[int]:
        return self.tokenize(text.encode("utf-8", errors="ignore"), add_bos=add_bos,
                             special=special)

    def decode(self, tokens: List[int]) -> str:
        return self.detokenize(tokens).decode("utf-8", errors="ignore")

    @classmethod
    def from_ggml_file(cls, path: str) -> "LlamaTokenizer":
        return cls(Llama(model_path=path, vocab_only=True, verbose=False))


def _model_exists(path: str) -> None:
    if not os.path.exists(path):
        raise ValueError(f"Model path does not exist: {path}")


class _Model:
    """A loaded model, freed when the last Llama over it goes (AsyncLlama's contexts share one)."""

    def __init__(self, path: str, use_mmap: bool, n_gpu_layers: int, split_mode: int = 0,
                 main_gpu: int = 0, tensor_split: Optional[List[float]] = None) -> None:
        self.handle: Optional[ctypes.c_void_p] = None
        params = _lib.lib.ox_model_params_default()
        params.use_mmap = use_mmap
        params.n_gpu_layers = -1 if n_gpu_layers < 0 else n_gpu_layers
        # llama_cpp's split over GPUs: 0 none, 1 layer (its default), 2 row
        params.split_mode = split_mode
        params.main_gpu = main_gpu
        if len(tensor_split or []) > 16:
            raise ValueError("tensor_split: at most 16 GPUs")
        for i, share in enumerate(tensor_split or []):
            params.tensor_split[i] = float(share)
        handle = ctypes.c_void_p()
        check(_lib.lib.ox_model_load(path.encode(), ctypes.byref(params), ctypes.byref(handle)),
              f"loading {path}")
        self.handle = handle

    def __del__(self) -> None:
        if getattr(self, "handle", None):
            _lib.lib.ox_model_free(self.handle)
            self.handle = None


class Llama:
    """A GGUF model and a context over it, as llama_cpp.Llama."""

    def __init__(self, model_path: str, *, n_gpu_layers: int = 0, split_mode: int = 1,
                 main_gpu: int = 0, tensor_split: Optional[List[float]] = None,
                 vocab_only: bool = False, use_mmap: bool = True, use_mlock: bool = False,
                 kv_overrides: Optional[Dict[str, Any]] = None, seed: int = LLAMA_DEFAULT_SEED,
                 n_ctx: int = 512, n_batch: int = 512, n_ubatch: int = 512,
                 n_threads: Optional[int] = None, n_threads_batch: Optional[int] = None,
                 logits_all: bool = False, embedding: bool = False, last_n_tokens_size: int = 64,
                 chat_format: Optional[str] = None, chat_handler: Any = None,
                 type_k: Optional[int] = None, type_v: Optional[int] = None,
                 lora_base: Optional[str] = None, lora_scale: float = 1.0,
                 lora_path: Optional[str] = None, draft_model: Optional[Any] = None,
                 verbose: bool = True, **kwargs: Any) -> None:
        self._init_args = dict(kwargs, n_gpu_layers=n_gpu_layers, vocab_only=vocab_only,
                               use_mmap=use_mmap, seed=seed, n_ctx=n_ctx, n_batch=n_batch,
                               n_ubatch=n_ubatch, n_threads=n_threads,
                               n_threads_batch=n_threads_batch, logits_all=logits_all,
                               embedding=embedding, last_n_tokens_size=last_n_tokens_size,
                               chat_format=chat_format, type_k=type_k, type_v=type_v,
                               lora_base=lora_base, lora_scale=lora_scale, lora_path=lora_path,
                               verbose=verbose)
        self.verbose = verbose
        self.model_path = model_path
        # speculative decoding: a llama_speculative.LlamaDraftModel's guesses checked in one batch
        self.draft_model = draft_model
        self._seed = seed or LLAMA_DEFAULT_SEED
        self.last_n_tokens_size = last_n_tokens_size
        self._logits_all = logits_all
        self._embedding = embedding
        self._ctx: Optional[ctypes.c_void_p] = None
        _model_exists(model_path)
        loaded = _Model(model_path, use_mmap, n_gpu_layers, split_mode, main_gpu, tensor_split)
        self._loaded: Optional[_Model] = loaded
        model = self._model = loaded.handle
        self._vocab = _lib.lib.ox_model_vocab(model)
        self._n_vocab = int(_lib.lib.ox_model_n_vocab(model))
        self._n_embd = int(_lib.lib.ox_model_n_embd(model))
        if n_ctx == 0:
            n_ctx = int(_lib.lib.ox_model_n_ctx_train(model))
        self.n_batch = min(n_ctx, n_batch)
        self.n_threads = n_threads or max((os.cpu_count() or 2) // 2, 1)
        self.n_threads_batch = n_threads_batch or (os.cpu_count() or 1)
        self._vocab_only = vocab_only
        self._kv_type = type_k if type_k in (_lib.OX_DTYPE_F32, _lib.OX_DTYPE_F16,
                                             _lib.OX_DTYPE_Q8_0) else None
        self._n_ctx = n_ctx
        # a LoRA adapter (GGUF; lora_base, for the old ggml adapters, has no use with these)
        self._lora: Optional[ctypes.c_void_p] = None
        self._lora_scale = float(lora_scale)
        if lora_path is not None and not vocab_only:
            if not os.path.exists(lora_path):
                raise ValueError(f"LoRA path does not exist: {lora_path}")
            lora = ctypes.c_void_p()
            check(_lib.lib.ox_lora_load(model, lora_path.encode(), ctypes.byref(lora)),
                  f"loading the LoRA adapter {lora_path}")
            self._lora = lora  # freed with the model
        if not vocab_only:
            self._make_context(n_ctx)
        self.n_tokens = 0
        self.input_ids: npt.NDArray[np.intc] = np.zeros((self._n_ctx,), dtype=np.intc)
        # the logits of every evaluated token with logits_all, else of the last one
        self.scores: npt.NDArray[np.single] = np.zeros(
            (self._n_ctx if logits_all else 1, self._n_vocab), dtype=np.single)
        self._last_row: Optional[npt.NDArray[np.single]] = None
        self.chat_format = chat_format
        self.chat_handler = chat_handler
        self.metadata: Dict[str, str] = _lib.gguf_metadata(model_path)
        self.cache = None

    def _make_context(self, n_ctx: int) -> None:
        cp = _lib.lib.ox_context_params_default()
        cp.n_ctx, cp.n_batch, cp.n_threads = n_ctx, self.n_batch, self.n_threads
        cp.n_seq_max = 1
        cp.embeddings = self._embedding or not _lib.lib.ox_model_has_logits(self._model)
        if self._kv_type is not None:
            cp.kv_type = self._kv_type
        ctx = ctypes.c_void_p()
        check(_lib.lib.ox_context_create(self._model, ctypes.byref(cp), ctypes.byref(ctx)),
              "creating the context")
        self._ctx = ctx
        self._n_ctx = int(_lib.lib.ox_context_n_ctx(ctx))
        if self._lora is not None:
            check(_lib.lib.ox_context_set_lora(ctx, self._lora, self._lora_scale),
                  "applying the LoRA adapter")

    def _sibling(self) -> "Llama":
        """Another Llama over the same loaded model, with a context of its own (the same
        settings): what AsyncLlama runs concurrent requests on."""
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        other._ctx = None
        other._make_context(self._n_ctx)
        other.n_tokens, other._last_row = 0, None
        other.input_ids = np.zeros_like(self.input_ids)
        other.scores = np.zeros_like(self.scores)
        return other

    # ---- pickling: the arguments, the model loaded again on the other side ----
    def __getstate__(self) -> Dict[str, Any]:
        return dict(self._init_args, model_path=self.model_path, seed=self._seed)

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def tokenizer(self) -> "LlamaTokenizer":
        return LlamaTokenizer(self)

    # ---- lifetime ----
    def close(self) -> None:
        if getattr(self, "_ctx", None):
            _lib.lib.ox_context_free(self._ctx)
            self._ctx = None
        self._loaded = None  # the model goes with the last Llama over it

    def __del__(self) -> None:
        self.close()

    def __enter__(self) -> "Llama":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- sizes and special tokens ----
    def n_ctx(self) -> int:
        return self._n_ctx

    def n_embd(self) -> int:
        return self._n_embd

    def n_vocab(self) -> int:
        return self._n_vocab

    def token_bos(self) -> int:
        return int(_lib.lib.ox_vocab_bos(self._vocab))

    def token_eos(self) -> int:
        return int(_lib.lib.ox_vocab_eos(self._vocab))

    def token_nl(self) -> int:
        return int(_lib.lib.ox_vocab_nl(self._vocab))

    def set_seed(self, seed: int) -> None:
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise TypeError(f"seed: an int, not {type(seed).__name__}")
        self._seed = seed

    def set_cache(self, cache: Any) -> None:
        self.cache = cache

    @property
    def _input_ids(self) -> npt.NDArray[np.intc]:
        return self.input_ids[:self.n_tokens]

    @property
    def _scores(self) -> npt.NDArray[np.single]:
        return self.scores[:self.n_tokens, :] if self._logits_all else self.scores

    # ---- tokens and text ----
    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> List[int]:
        if isinstance(text, str):
            raise TypeError("tokenize takes bytes (text.encode('utf-8')), as llama_cpp's does")
        n = ctypes.c_size_t()
        check(_lib.lib.ox_tokenize(self._vocab, text, len(text), None, 0, ctypes.byref(n),
                                   add_bos, special), "tokenize")
        buf = (_lib.ox_token * max(n.value, 1))()
        check(_lib.lib.ox_tokenize(self._vocab, text, len(text), buf, n.value, ctypes.byref(n),
                                   add_bos, special), "tokenize")
        return list(buf[:n.value])

    def _piece(self, token: int, special: bool = False) -> bytes:
        buf = ctypes.create_string_buffer(64)
        n = _lib.lib.ox_token_to_piece(self._vocab, token, buf, 64, 0, special)
        if n > 64:
            buf = ctypes.create_string_buffer(n)
            n = _lib.lib.ox_token_to_piece(self._vocab, token, buf, n, 0, special)
        if n < 0:
            raise ValueError(f"invalid token id {token}")
        return buf.raw[:n]

    def detokenize(self, tokens: Sequence[int], prev_tokens: Optional[Sequence[int]] = None,
                   special: bool = False) -> bytes:
        """The tokens' text; a leading BOS is dropped with the one space after it, as
        llama_cpp's detokenize does."""
        out = b"".join(self._piece(int(t), special) for t in tokens)
        if tokens and int(tokens[0]) == self.token_bos() and out.startswith(b" "):
            out = out[1:]
        return out

    # ---- evaluation ----
    def reset(self) -> None:
        self.n_tokens = 0

    def _check_ctx(self) -> None:
        if not self._ctx:
            raise RuntimeError("this Llama was made with vocab_only=True (no context)")

    def eval(self, tokens: Sequence[int], rows: int = 1) -> None:
        """Decode tokens after the first n_tokens (the cache beyond them is dropped), n_batch at
        a time; keeps their logits (all with logits_all, else the last `rows`, which must lie in
        the last batch: _row_view)."""
        self._check_ctx()
        L = _lib.lib
        L.ox_kv_seq_rm(self._ctx, 0, self.n_tokens, -1)
        for i in range(0, len(tokens), self.n_batch):
            batch = [int(t) for t in tokens[i:i + self.n_batch]]
            n = len(batch)
            if self.n_tokens + n > self._n_ctx:
                raise ContextFullError(
                    f"Requested tokens ({self.n_tokens + n}) exceed context window of "
                    f"{self._n_ctx}")
            toks = (_lib.ox_token * n)(*batch)
            pos = (ctypes.c_int32 * n)(*range(self.n_tokens, self.n_tokens + n))
            want = (ctypes.c_bool * n)(*([self._logits_all] * n))
            for j in range(max(n - rows, 0), n):
                want[j] = True
            b = _lib.Batch(n, toks, pos, None, want)
            check(L.ox_decode(self._ctx, ctypes.byref(b)), "decode")
            self.input_ids[self.n_tokens:self.n_tokens + n] = batch
            if self._logits_all:
                for j in range(n):
                    self.scores[self.n_tokens + j] = self._logits_view(j)
            self._last_row = self._logits_view(n - 1)
            self.n_tokens += n

    def _logits_view(self, i: int) -> npt.NDArray[np.single]:
        ptr = _lib.lib.ox_get_logits(self._ctx, i)
        if not ptr:
            raise RuntimeError("no logits for this token (a model without a language head?)")
        return np.ctypeslib.as_array(ptr, shape=(self._n_vocab,))

    def _current_logits(self) -> npt.NDArray[np.single]:
        """The last evaluated token's logits: a view of the library's row, no copy."""
        if self._last_row is None:
            raise AssertionError("no token evaluated yet")
        return self._last_row

    def _make_sampler(self, *, temp: float, top_k: int, top_p: float, min_p: float,
                      typical_p: float, repeat_penalty: float, frequency_penalty: float,
                      presence_penalty: float, mirostat_mode: int, mirostat_tau: float,
                      mirostat_eta: float, grammar: Optional[LlamaGrammar],
                      logit_bias: Optional[Dict[int, float]] = None,
                      seed: Optional[int] = None) -> Sampler:
        return Sampler(self._vocab, self._n_vocab, temp=temp, top_k=top_k, top_p=top_p,
                       min_p=min_p, typical_p=typical_p, repeat_penalty=repeat_penalty,
                       frequency_penalty=frequency_penalty, presence_penalty=presence_penalty,
                       last_n=self.last_n_tokens_size, mirostat_mode=mirostat_mode,
                       mirostat_tau=mirostat_tau, mirostat_eta=mirostat_eta,
                       seed=self._seed if seed is None else seed,
                       grammar=grammar._grammar if grammar is not None else None,
                       logit_bias=logit_bias)

    def _draw(self, sampler: Sampler,
              logits_processor: Optional[LogitsProcessorList]) -> int:
        logits = self._current_logits()
        if logits_processor:
            logits = np.ascontiguousarray(logits_processor(self._input_ids, logits.copy()),
                                          dtype=np.single)
        return sampler.sample(logits.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                              self._n_vocab)

    def sample(self, top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05,
               typical_p: float = 1.0, temp: float = 0.80, repeat_penalty: float = 1.0,
               frequency_penalty: float = 0.0, presence_penalty: float = 0.0,
               tfs_z: float = 1.0, mirostat_mode: int = 0, mirostat_eta: float = 0.1,
               mirostat_tau: float = 5.0, penalize_nl: bool = True,
               logits_processor: Optional[LogitsProcessorList] = None,
               grammar: Optional[LlamaGrammar] = None, idx: Optional[int] = None) -> int:
        """One token from the last evaluated token's logits."""
        assert self.n_tokens > 0
        sampler = self._make_sampler(
            temp=temp, top_k=top_k, top_p=top_p, min_p=min_p, typical_p=typical_p,
            repeat_penalty=repeat_penalty, frequency_penalty=frequency_penalty,
            presence_penalty=presence_penalty, mirostat_mode=mirostat_mode,
            mirostat_tau=mirostat_tau, mirostat_eta=mirostat_eta, grammar=grammar)
        for t in self._input_ids[-self.last_n_tokens_size:]:
            sampler.accept(int(t), prompt=True)
        if idx is not None and self._logits_all and idx < self.n_tokens:
            self._last_row = self.scores[idx]
        return self._draw(sampler, logits_processor)

    def generate(self, tokens: Sequence[int], top_k: int = 40, top_p: float = 0.95,
                 min_p: float = 0.05, typical_p: float = 1.0, temp: float = 0.80,
                 repeat_penalty: float = 1.0, reset: bool = True,
                 frequency_penalty: float = 0.0, presence_penalty: float = 0.0,
                 tfs_z: float = 1.0, mirostat_mode: int = 0, mirostat_tau: float = 5.0,
                 mirostat_eta: float = 0.1, penalize_nl: bool = True,
                 logits_processor: Optional[LogitsProcessorList] = None,
                 stopping_criteria: Optional[StoppingCriteriaList] = None,
                 grammar: Optional[LlamaGrammar] = None,
                 logit_bias: Optional[Dict[int, float]] = None,
                 seed: Optional[int] = None) -> Generator[int, Optional[Sequence[int]], None]:
        """Tokens after `tokens`, one at a time, forever (the caller stops): the cached prefix
        the tokens share is kept, the rest evaluated."""
        self._check_ctx()
        tokens = [int(t) for t in tokens]
        sampler = self._make_sampler(
            temp=temp, top_k=top_k, top_p=top_p, min_p=min_p, typical_p=typical_p,
            repeat_penalty=repeat_penalty, frequency_penalty=frequency_penalty,
            presence_penalty=presence_penalty, mirostat_mode=mirostat_mode,
            mirostat_tau=mirostat_tau, mirostat_eta=mirostat_eta, grammar=grammar,
            logit_bias=logit_bias, seed=seed)
        for t in tokens:  # penalties count the prompt, as `oxidize run`'s
            sampler.accept(t, prompt=True)
        if reset and self.n_tokens > 0:
            prefix = self.longest_token_prefix(self._input_ids.tolist(), tokens)
            if prefix == len(tokens) == self.n_tokens and self._last_row is not None:
                tokens = []  # all cached, its logits at hand
            else:
                self.n_tokens = min(prefix, len(tokens) - 1)
                tokens = tokens[self.n_tokens:]
        elif reset:
            self.reset()
        try:
            while True:
                draft = self._draft(tokens)
                if tokens:
                    # the draft's rows as if each were decoded alone (plain decoding's text)
                    _lib.lib.ox_context_set_one_token_order(self._ctx, bool(draft))
                    try:
                        self.eval(tokens + draft, rows=len(draft) + 1)
                    finally:
                        _lib.lib.ox_context_set_one_token_order(self._ctx, False)
                # the cache up to the token drawn next; its logits are row n_in - 1 + i of the
                # batch (_draft keeps tokens and draft to one)
                first, n_in = self.n_tokens - len(draft), len(tokens)
                for i in range(len(draft) + 1):
                    if draft:
                        self._last_row = self._logits_view(n_in - 1 + i)
                        self.n_tokens = first + i
                    token = self._draw(sampler, logits_processor)
                    if stopping_criteria is not None and stopping_criteria(
                            self._input_ids, self._current_logits()):
                        return
                    sampler.accept(token)
                    tokens_or_none = yield token
                    tokens = [token]
                    if tokens_or_none is not None:
                        tokens.extend(int(t) for t in tokens_or_none)
                    # the draft's next token is already in the cache when the sample is it
                    if i == len(draft) or token != draft[i] or tokens_or_none is not None:
                        break
                    tokens = []
                if draft:  # the cache keeps what was taken
                    _lib.lib.ox_kv_seq_rm(self._ctx, 0, self.n_tokens, -1)
        finally:
            sampler.close()

    def _draft(self, tokens: List[int]) -> List[int]:
        """The draft model's guess after the cache and a sampled token, as long as the context
        and one batch hold it. A prompt is decoded without one: its batch keeps the batch
        kernels, as plain decoding's does."""
        if self.draft_model is None or len(tokens) != 1:
            return []
        room = min(self._n_ctx - self.n_tokens - 2, self.n_batch - 1)
        if room <= 0:
            return []
        ids = np.concatenate([self._input_ids, np.asarray(tokens, dtype=np.intc)])
        return [int(t) for t in self.draft_model(ids)][:room]

    @staticmethod
    def longest_token_prefix(a: Sequence[int], b: Sequence[int]) -> int:
        n = 0
        for x, y in zip(a, b):
            if x != y:
                break
            n += 1
        return n

    @staticmethod
    def logits_to_logprobs(logits: Union[npt.NDArray[np.single], List[float]],
                           axis: int = -1) -> npt.NDArray[np.single]:
        """log_softmax, stable (a non-finite maximum counts as 0)."""
        x = np.asarray(logits, dtype=np.single)
        top = np.amax(x, axis=axis, keepdims=True)
        top[~np.isfinite(top)] = 0
        shifted = x - top
        with np.errstate(divide="ignore"):
            out: npt.NDArray[np.single] = (
                shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))).astype(
                    np.single)
        return out

    # ---- state ----
    def save_state(self) -> LlamaState:
        L = _lib.lib
        size = int(L.ox_state_seq_size(self._ctx, 0))
        buf = (ctypes.c_uint8 * max(size, 1))()
        written = ctypes.c_size_t(0)
        check(L.ox_state_seq_save(self._ctx, 0, buf, size, ctypes.byref(written)), "save_state")
        last = None if self._last_row is None else np.array(self._last_row, dtype=np.single)
        return LlamaState(self.input_ids.copy(), self.scores.copy(), self.n_tokens,
                          bytes(buf)[:written.value], written.value, self._seed, last)

    def load_state(self, state: LlamaState) -> None:
        """Back to a saved state: the cache's bytes loaded (a state from another model is
        refused), or, without them, its tokens evaluated again; its logits and seed."""
        if state.llama_state:
            check(_lib.lib.ox_state_seq_load(self._ctx, 0, state.llama_state,
                                              len(state.llama_state)), "load_state")
            self.input_ids[:] = state.input_ids
            self.n_tokens = state.n_tokens
            last = getattr(state, "last_logits", None)
            self._last_row = None if last is None else np.array(last, dtype=np.single)
        else:
            tokens = state.input_ids[:state.n_tokens].tolist()
            self.n_tokens = 0
            self._last_row = None
            if tokens:
                self.eval(tokens)
        self.scores[:] = state.scores
        self._seed = state.seed

    # ---- completions ----
    def _prompt_tokens(self, prompt: Union[str, List[int]]) -> List[int]:
        if isinstance(prompt, list):
            return [int(t) for t in prompt]
        if not isinstance(prompt, str):
            raise TypeError(f"prompt: a str or a list of token ids, not {type(prompt).__name__}")
        add_bos = bool(_lib.lib.ox_vocab_add_bos(self._vocab))
        return self.tokenize(prompt.encode("utf-8"), add_bos=add_bos, special=True) if prompt \
            else [self.token_bos()]

    @overload
    def create_completion(self, prompt: Union[str, List[int]], *args: Any,
                          stream: Literal[False] = False,
                          **kwargs: Any) -> CreateCompletionResponse: ...

    @overload
    def create_completion(self, prompt: Union[str, List[int]], *args: Any, stream: Literal[True],
                          **kwargs: Any) -> Iterator[CreateCompletionStreamResponse]: ...

    @overload
    def create_completion(self, prompt: Union[str, List[int]], *args: Any, stream: bool,
                          **kwargs: Any) -> Union[CreateCompletionResponse,
                                                  Iterator[CreateCompletionStreamResponse]]: ...

    def create_completion(self, prompt: Union[str, List[int]], suffix: Optional[str] = None,  # type: ignore[misc]
                          max_tokens: Optional[int] = 16, temperature: float = 0.8,
                          top_p: float = 0.95, min_p: float = 0.05, typical_p: float = 1.0,
                          logprobs: Optional[int] = None, echo: bool = False,
                          stop: Optional[Union[str, List[str]]] = [],
                          frequency_penalty: float = 0.0, presence_penalty: float = 0.0,
                          repeat_penalty: float = 1.0, top_k: int = 40, stream: bool = False,
                          seed: Optional[int] = None, tfs_z: float = 1.0,
                          mirostat_mode: int = 0, mirostat_tau: float = 5.0,
                          mirostat_eta: float = 0.1, model: Optional[str] = None,
                          stopping_criteria: Optional[StoppingCriteriaList] = None,
                          logits_processor: Optional[LogitsProcessorList] = None,
                          grammar: Optional[LlamaGrammar] = None,
                          logit_bias: Optional[Dict[int, float]] = None
                          ) -> Union[CreateCompletionResponse,
                                     Iterator[CreateCompletionStreamResponse]]:
        from ._completion import completion_chunks
        chunks = completion_chunks(
            self, prompt, suffix=suffix, max_tokens=max_tokens, temperature=temperature,
            top_p=top_p, min_p=min_p, typical_p=typical_p, logprobs=logprobs, echo=echo,
            stop=stop, frequency_penalty=frequency_penalty, presence_penalty=presence_penalty,
            repeat_penalty=repeat_penalty, top_k=top_k, stream=stream, seed=seed,
            mirostat_mode=mirostat_mode, mirostat_tau=mirostat_tau, mirostat_eta=mirostat_eta,
            model=model, stopping_criteria=stopping_criteria, logits_processor=logits_processor,
            grammar=grammar, logit_bias=logit_bias)
        if stream:
            return cast(Iterator[CreateCompletionStreamResponse], chunks)
        return cast(CreateCompletionResponse, next(chunks))

    @overload
    def __call__(self, prompt: Union[str, List[int]], *args: Any, stream: Literal[False] = False,
                 **kwargs: Any) -> CreateCompletionResponse: ...

    @overload
    def __call__(self, prompt: Union[str, List[int]], *args: Any, stream: Literal[True],
                 **kwargs: Any) -> Iterator[CreateCompletionStreamResponse]: ...

    @overload
    def __call__(self, prompt: Union[str, List[int]], *args: Any, stream: bool,
                 **kwargs: Any) -> Union[CreateCompletionResponse,
                                         Iterator[CreateCompletionStreamResponse]]: ...

    def __call__(self, prompt: Union[str, List[int]], *args: Any,
                 **kwargs: Any) -> Union[CreateCompletionResponse,
                                         Iterator[CreateCompletionStreamResponse]]:
        """create_completion's call."""
        return cast(Union[CreateCompletionResponse, Iterator[CreateCompletionStreamResponse]],
                    self.create_completion(prompt, *args, **kwargs))

    def create_chat_completion(self, messages: List[Dict[str, Any]], **kwargs: Any) -> Any:
        from ._chat import chat_completion
        return chat_completion(self, messages, **kwargs)

    # ---- embeddings ----
    def embed(self, input: Union[str, List[str]], normalize: bool = False,
              truncate: bool = True, return_count: bool = False) -> Any:
        """One vector per input (per token where the model pools nothing)."""
        from ._embed import embed
        return embed(self, input, normalize=normalize, truncate=truncate,
                     return_count=return_count)

    def create_embedding(self, input: Union[str, List[str]],
                         model: Optional[str] = None) -> CreateEmbeddingResponse:
        inputs = [input] if isinstance(input, str) else list(input)
        vectors, count = self.embed(inputs, return_count=True)
        return {"object": "list",
                "data": [{"object": "embedding", "embedding": v, "index": i}
                         for i, v in enumerate(vectors)],
                "model": model or self.model_path,
                "usage": {"prompt_tokens": count, "total_tokens": count}}

    @classmethod
    def from_pretrained(cls, repo_id: str, filename: Optional[str], **kwargs: Any) -> "Llama":
        raise NotImplementedError(
            "Llama.from_pretrained needs `oxidize pull`, which this oxidize does not have yet: "
            "download the GGUF file and pass its path to Llama(model_path=...)")
