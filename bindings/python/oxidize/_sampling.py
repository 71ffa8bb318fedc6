"""_sampling.py: a sampler chain of liboxidize built from llama-cpp-python's sampling arguments,
in the order `oxidize run` builds it (apps/common/sampling.c), so equal options draw equal
tokens: the grammar and logit biases, penalties, then top-k -> typical -> top-p -> min-p ->
temperature -> a seeded draw (temperature 0: greedy; below 0: a draw from the whole
distribution; mirostat 1 or 2: temperature then mirostat).
"""
from __future__ import annotations

import ctypes
from typing import Dict, Optional

from . import _lib
from ._errors import check


class Sampler:
    """An ox_sampler, freed with the object."""

    def __init__(self, vocab: int, n_vocab: int, *, temp: float, top_k: int, top_p: float,
                 min_p: float, typical_p: float, repeat_penalty: float,
                 frequency_penalty: float, presence_penalty: float, last_n: int,
                 mirostat_mode: int, mirostat_tau: float, mirostat_eta: float, seed: int,
                 grammar: Optional[str] = None,
                 logit_bias: Optional[Dict[int, float]] = None) -> None:
        handle = ctypes.c_void_p()
        check(_lib.lib.ox_sampler_create(ctypes.byref(handle)), "sampler")
        self._h: Optional[ctypes.c_void_p] = handle
        L = _lib.lib
        try:
            if grammar is not None:
                text = grammar.encode("utf-8")
                check(L.ox_sampler_add_grammar(handle, vocab, text, len(text)), "grammar")
            if logit_bias:
                entries = (_lib.LogitBias * len(logit_bias))(
                    *[_lib.LogitBias(int(t), float(b)) for t, b in logit_bias.items()])
                check(L.ox_sampler_add_logit_bias(handle, entries, len(logit_bias)), "logit_bias")
            check(L.ox_sampler_add_penalties(handle, last_n, repeat_penalty, frequency_penalty,
                                             presence_penalty), "penalties")
            seed &= 0xFFFFFFFF
            if temp == 0:
                check(L.ox_sampler_add_greedy(handle), "greedy")
            elif temp < 0:
                check(L.ox_sampler_add_dist(handle, seed), "dist")
            elif mirostat_mode in (1, 2):
                check(L.ox_sampler_add_temp(handle, temp), "temperature")
                if mirostat_mode == 1:
                    check(L.ox_sampler_add_mirostat(handle, n_vocab, seed, mirostat_tau,
                                                    mirostat_eta, 100), "mirostat")
                else:
                    check(L.ox_sampler_add_mirostat_v2(handle, seed, mirostat_tau, mirostat_eta),
                          "mirostat")
            else:
                if top_k > 0:
                    check(L.ox_sampler_add_top_k(handle, top_k), "top_k")
                if typical_p < 1:
                    check(L.ox_sampler_add_typical(handle, typical_p, 1), "typical_p")
                check(L.ox_sampler_add_top_p(handle, top_p, 1), "top_p")
                check(L.ox_sampler_add_min_p(handle, min_p, 1), "min_p")
                check(L.ox_sampler_add_temp(handle, temp), "temperature")
                check(L.ox_sampler_add_dist(handle, seed), "dist")
        except BaseException:
            self.close()
            raise

    def sample(self, logits: "ctypes._Pointer[ctypes.c_float]", n_vocab: int) -> int:
        token = _lib.lib.ox_sampler_sample(self._h, logits, n_vocab)
        if token < 0:
            raise RuntimeError("oxidize: the sampler could not pick a token (the grammar may "
                               "allow none)")
        return int(token)

    def accept(self, token: int, prompt: bool = False) -> None:
        fn = _lib.lib.ox_sampler_accept_prompt if prompt else _lib.lib.ox_sampler_accept
        check(fn(self._h, token), "sampler")

    def close(self) -> None:
        if self._h:
            _lib.lib.ox_sampler_free(self._h)
            self._h = None

    def __del__(self) -> None:
        self.close()
