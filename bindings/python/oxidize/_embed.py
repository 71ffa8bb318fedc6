"""_embed.py: Llama.embed: each input's embedding (pooled as the model's file asks, or one
vector per token where it names no pooling), from a cleared cache."""
from __future__ import annotations

import ctypes
import math
from typing import TYPE_CHECKING, Any, List, Union

from . import _lib
from ._errors import check

if TYPE_CHECKING:
    from .llama import Llama


def _normalized(v: List[float]) -> List[float]:
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v] if norm > 0 else v


def _per_token(llama: "Llama", tokens: List[int], normalize: bool) -> List[List[float]]:
    """Every token's final hidden state: the tokens decoded with an output row each."""
    n = len(tokens)
    toks = (_lib.ox_token * n)(*tokens)
    want = (ctypes.c_bool * n)(*([True] * n))
    batch = _lib.Batch(n, toks, None, None, want)
    check(_lib.lib.ox_decode(llama._ctx, ctypes.byref(batch)), "embed")
    rows = []
    for i in range(n):
        ptr = _lib.lib.ox_get_embeddings(llama._ctx, i)
        v = list(ptr[:llama.n_embd()])
        rows.append(_normalized(v) if normalize else v)
    return rows


def embed(llama: "Llama", input: Union[str, List[str]], *, normalize: bool, truncate: bool,
          return_count: bool) -> Any:
    if not llama._embedding:
        raise RuntimeError("Llama model must be created with embedding=True to call this method")
    llama._check_ctx()
    inputs = [input] if isinstance(input, str) else list(input)
    pooling = _lib.lib.ox_model_pooling(llama._model)
    out: List[Any] = []
    total = 0
    for text in inputs:
        tokens = llama.tokenize(text.encode("utf-8"), add_bos=True, special=False)
        if len(tokens) > llama.n_batch:
            if not truncate:
                raise ValueError(
                    f"Requested tokens ({len(tokens)}) exceed batch size of {llama.n_batch}")
            tokens = tokens[:llama.n_batch]
        total += len(tokens)
        _lib.lib.ox_kv_clear(llama._ctx)
        if pooling == _lib.OX_POOLING_NONE:
            out.append(_per_token(llama, tokens, normalize))
            continue
        dims = llama.n_embd()
        vec = (ctypes.c_float * dims)()
        toks = (_lib.ox_token * len(tokens))(*tokens)
        check(_lib.lib.ox_embed(llama._ctx, toks, len(tokens), pooling, normalize, vec), "embed")
        out.append(list(vec))
    _lib.lib.ox_kv_clear(llama._ctx)
    llama.reset()
    llama._last_row = None
    result = out[0] if isinstance(input, str) else out
    return (result, total) if return_count else result
