"""llama_speculative: draft models for Llama(draft_model=...), as llama_cpp.llama_speculative:
a draft proposes the tokens that follow, the model checks them in one batch and keeps those its
own sampling agrees with (so the text is the one plain decoding gives)."""
from __future__ import annotations

import abc
import ctypes
from typing import Any

import numpy as np
import numpy.typing as npt

from . import _lib


class LlamaDraftModel(abc.ABC):
    """Anything that, given the tokens so far, returns the tokens it guesses come next."""

    @abc.abstractmethod
    def __call__(self, input_ids: npt.NDArray[np.intc], /,
                 **kwargs: Any) -> npt.NDArray[np.intc]:
        raise NotImplementedError()


class LlamaPromptLookupDecoding(LlamaDraftModel):
    """Prompt lookup: the tokens that followed the last max_ngram_size (down to 1) tokens where
    they last appeared before, num_pred_tokens of them (liboxidize's ox_spec_lookup)."""

    def __init__(self, max_ngram_size: int = 2, num_pred_tokens: int = 10):
        if not 1 <= max_ngram_size <= 64 or not 1 <= num_pred_tokens <= 256:
            raise ValueError("max_ngram_size must be 1..64 and num_pred_tokens 1..256")
        self.max_ngram_size = max_ngram_size
        self.num_pred_tokens = num_pred_tokens

    def __call__(self, input_ids: npt.NDArray[np.intc], /,
                 **kwargs: Any) -> npt.NDArray[np.intc]:
        ids = np.ascontiguousarray(input_ids, dtype=np.int32)
        out = np.zeros(self.num_pred_tokens, dtype=np.int32)
        n = _lib.lib.ox_spec_lookup(ids.ctypes.data_as(ctypes.POINTER(_lib.ox_token)),
                                    ids.size, 1, self.max_ngram_size, self.num_pred_tokens,
                                    out.ctypes.data_as(ctypes.POINTER(_lib.ox_token)))
        return out[:n].astype(np.intc)
