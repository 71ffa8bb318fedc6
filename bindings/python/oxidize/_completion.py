"""_completion.py: Llama.create_completion's loop: tokens drawn until an end token, a stop
string, the token budget or a stopping criterion; the text returned whole or as chunks (a
partial stop string held back, never half a UTF-8 character), with logprobs and usage in
llama-cpp-python's shapes."""
from __future__ import annotations

import random
import time
import uuid
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Union

import numpy as np
import numpy.typing as npt

from . import _lib
from ._errors import ContextFullError

if TYPE_CHECKING:
    from .llama import Llama


def _stops(stop: Optional[Union[str, List[str]]]) -> List[bytes]:
    if stop is None:
        return []
    return [s.encode("utf-8") for s in ([stop] if isinstance(stop, str) else stop) if s]


def _first_stop(text: bytes, stops: List[bytes]) -> int:
    """Where the first stop string (in list order) that occurs starts, or -1."""
    for s in stops:
        at = text.find(s)
        if at >= 0:
            return at
    return -1


def _held_back(text: bytes, stops: List[bytes]) -> int:
    """Bytes at the end of text that begin some stop string (kept back while streaming)."""
    longest = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), longest, -1):
            if text.endswith(s[:k]):
                longest = k
                break
    return longest


def _complete_utf8(text: bytes) -> bool:
    """Whether text does not end inside a UTF-8 character."""
    for k in range(1, min(4, len(text)) + 1):
        byte = text[-k]
        if byte & 0xC0 != 0x80:  # a lead byte (or ASCII): does its sequence fit?
            need = 1 if byte < 0x80 else 2 if byte >> 5 == 6 else 3 if byte >> 4 == 14 else 4
            return need <= k
    return len(text) == 0


def _logprob_entry(llama: "Llama", token: int, row: npt.NDArray[np.single],
                   top_n: int) -> Dict[str, Any]:
    logprobs = llama.logits_to_logprobs(row)
    piece = llama.detokenize([token]).decode("utf-8", errors="ignore")
    top = {}
    if top_n > 0:
        for t in np.argsort(logprobs)[::-1][:top_n]:
            top[llama.detokenize([int(t)]).decode("utf-8", errors="ignore")] = float(logprobs[t])
    top[piece] = float(logprobs[token])
    return {"token": piece, "bytes": llama._piece(token), "logprob": float(logprobs[token]),
            "top": top}


def _chunk_logprobs(entries: List[Dict[str, Any]], offset: int) -> Dict[str, Any]:
    """A chunk's tokens' logprobs (one token, or those of one character split among tokens)."""
    offsets = []
    for e in entries:
        offsets.append(offset)
        offset += len(e["bytes"])
    return {"tokens": [e["token"] for e in entries], "text_offset": offsets,
            "token_logprobs": [e["logprob"] for e in entries],
            "top_logprobs": [e["top"] for e in entries]}


# The fill-in-the-middle tokens' metadata keys (llama.cpp's names, then their older ones).
_FIM_KEYS = {"pre": ("tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"),
             "suf": ("tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"),
             "mid": ("tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id")}


def _infill_tokens(llama: "Llama", prompt: Union[str, List[int]], suffix: str) -> List[int]:
    """A fill-in-the-middle prompt, prefix-suffix-middle as llama.cpp's infill builds it: [BOS]
    <PRE> prompt <SUF> suffix <MID>, the model to write what goes between."""
    ids = {}
    for part, keys in _FIM_KEYS.items():
        found = [llama.metadata[k] for k in keys if k in llama.metadata]
        if not found:
            raise ValueError(f"suffix: the model has no fill-in-the-middle tokens ({keys[0]} "
                             "is not in its file)")
        ids[part] = int(found[0])
    before = prompt if isinstance(prompt, list) else llama.tokenize(
        prompt.encode("utf-8"), add_bos=False, special=False)
    after = llama.tokenize(suffix.encode("utf-8"), add_bos=False, special=False)
    bos = [llama.token_bos()] if _lib.lib.ox_vocab_add_bos(llama._vocab) else []
    return bos + [ids["pre"]] + list(before) + [ids["suf"]] + after + [ids["mid"]]


def completion_chunks(llama: "Llama", prompt: Union[str, List[int]], *, suffix: Optional[str],
                      max_tokens: Optional[int], temperature: float, top_p: float,
                      min_p: float, typical_p: float, logprobs: Optional[int], echo: bool,
                      stop: Optional[Union[str, List[str]]], frequency_penalty: float,
                      presence_penalty: float, repeat_penalty: float, top_k: int, stream: bool,
                      seed: Optional[int], mirostat_mode: int, mirostat_tau: float,
                      mirostat_eta: float, model: Optional[str], stopping_criteria: Any,
                      logits_processor: Any, grammar: Any,
                      logit_bias: Optional[Dict[int, float]]) -> Iterator[Any]:
    """The stream's chunks, or (not streaming) one whole completion."""
    assert suffix is None or isinstance(suffix, str)
    llama._check_ctx()
    completion_id = f"cmpl-{uuid.uuid4()}"
    created = int(time.time())
    model_name = model if model is not None else llama.model_path
    prompt_tokens = llama._prompt_tokens(prompt) if suffix is None else \
        _infill_tokens(llama, prompt, suffix)
    n_ctx = llama.n_ctx()
    if len(prompt_tokens) >= n_ctx:
        raise ContextFullError(
            f"Requested tokens ({len(prompt_tokens)}) exceed context window of {n_ctx}")
    if logprobs is not None and not llama._logits_all:
        raise ValueError("logprobs is not supported for models created with logits_all=False")
    if max_tokens is None or max_tokens <= 0:
        max_tokens = n_ctx - len(prompt_tokens)
    max_tokens = min(max_tokens, n_ctx - len(prompt_tokens))
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise TypeError(f"seed: an int, not {type(seed).__name__}")
    if seed is None:  # as llama_cpp: each call's seed drawn from the last one
        seed = random.Random(llama._seed).randint(0, 2 ** 32)
    llama.set_seed(seed)
    stops = _stops(stop)
    vocab = llama._vocab
    completion: List[int] = []
    entries: List[Dict[str, Any]] = []
    finish_reason = "length"
    text = whole = b""
    sent = streamed = 0  # bytes of text, and tokens' logprobs, already streamed
    base = dict(id=completion_id, object="text_completion", created=created, model=model_name)

    def chunk(piece: bytes, reason: Optional[str], lp: Any = None) -> Dict[str, Any]:
        return {**base, "choices": [{"text": piece.decode("utf-8", errors="ignore"),
                                     "index": 0, "logprobs": lp, "finish_reason": reason}]}

    tokens = llama.generate(prompt_tokens, top_k=top_k, top_p=top_p, min_p=min_p,
                            typical_p=typical_p, temp=temperature,
                            repeat_penalty=repeat_penalty, frequency_penalty=frequency_penalty,
                            presence_penalty=presence_penalty, mirostat_mode=mirostat_mode,
                            mirostat_tau=mirostat_tau, mirostat_eta=mirostat_eta,
                            logits_processor=logits_processor,
                            stopping_criteria=stopping_criteria, grammar=grammar,
                            logit_bias=logit_bias, seed=seed)
    try:
        for token in tokens:
            if _lib.lib.ox_vocab_is_eog(vocab, token):
                finish_reason = "stop"
                break
            completion.append(token)
            if logprobs is not None:
                entries.append(_logprob_entry(llama, token, llama._current_logits(), logprobs))
            whole += llama._piece(token)  # the text so far, one piece a token
            text = whole
            if not _complete_utf8(text):
                continue
            at = _first_stop(text, stops)
            if at >= 0:
                text, finish_reason = text[:at], "stop"
                break
            if stream:
                ready = len(text) - _held_back(text[sent:], stops)
                if logprobs is not None:  # a chunk per token (per character's tokens)
                    while streamed < len(entries):
                        j, group = streamed, b""
                        while j < len(entries) and (j == streamed or not _complete_utf8(group)):
                            group, j = group + entries[j]["bytes"], j + 1
                        if not _complete_utf8(group) or sent + len(group) > ready:
                            break
                        yield chunk(group, None, _chunk_logprobs(entries[streamed:j], sent))
                        sent, streamed = sent + len(group), j
                elif ready > sent:
                    yield chunk(text[sent:ready], None)
                    sent = ready
            if len(completion) >= max_tokens:
                finish_reason = "length"
                break
        else:  # the generator ended: a stopping criterion
            finish_reason = "stop"
    finally:
        tokens.close()  # a stream the caller left: the sampler is freed now
    if stopping_criteria is not None and finish_reason == "length" and \
            llama._last_row is not None and stopping_criteria(llama._input_ids,
                                                              llama._current_logits()):
        finish_reason = "stop"
    if stream:
        if len(text) > sent:  # what was held back, cut at a stop string
            rest = entries[streamed:] if logprobs is not None else []
            yield chunk(text[sent:], None, _chunk_logprobs(rest, sent) if rest else None)
        yield chunk(b"", finish_reason)
        return
    out = text.decode("utf-8", errors="ignore")
    lp = None
    if logprobs is not None:
        offsets, pos = [], len(prompt) if isinstance(prompt, str) else 0
        for e in entries:
            offsets.append(pos)
            pos += len(e["token"])
        lp = {"tokens": [e["token"] for e in entries], "text_offset": offsets,
              "token_logprobs": [e["logprob"] for e in entries],
              "top_logprobs": [e["top"] for e in entries]}
    if echo and isinstance(prompt, str):
        out = prompt + out
    yield {**base, "choices": [{"text": out, "index": 0, "logprobs": lp,
                                "finish_reason": finish_reason}],
           "usage": {"prompt_tokens": len(prompt_tokens), "completion_tokens": len(completion),
                     "total_tokens": len(prompt_tokens) + len(completion)}}
