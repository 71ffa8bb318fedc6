"""_lib.py: liboxidize through ctypes: the public header's structs and functions, typed.

The declarations follow include/oxidize.h; each function's argtypes and restype are set so a
wrong Python argument is a TypeError, not a crash.
"""
from __future__ import annotations

import ctypes
import os
from ctypes import (POINTER, Structure, c_bool, c_char_p, c_float, c_int, c_int32, c_int64,
                    c_size_t, c_uint32, c_uint64, c_void_p)
from pathlib import Path
from typing import Mapping

ox_token = c_int32

# enum ox_status, in the header's order (OX_STATUS_LIST)
OX_OK = 0
OX_ERR_IO = 1
OX_ERR_FORMAT = 2
OX_ERR_UNSUPPORTED = 3
OX_ERR_OOM = 4
OX_ERR_DEVICE = 5
OX_ERR_INVALID_ARG = 6
OX_ERR_CONTEXT_FULL = 7
OX_ERR_ABORTED = 8

# enum ox_dtype values the context takes for its KV cache
OX_DTYPE_F32 = 0
OX_DTYPE_F16 = 1
OX_DTYPE_Q8_0 = 8

# enum ox_pooling
OX_POOLING_NONE, OX_POOLING_MEAN, OX_POOLING_CLS, OX_POOLING_LAST, OX_POOLING_RANK = range(5)

LOAD_PROGRESS = ctypes.CFUNCTYPE(c_bool, c_float, c_void_p)


class ModelParams(Structure):
    _fields_ = [("use_mmap", c_bool), ("progress", LOAD_PROGRESS), ("progress_user", c_void_p),
                ("n_gpu_layers", c_int32), ("split_mode", c_int32), ("main_gpu", c_int32),
                ("tensor_split", c_float * 16), ("dist_addr", c_char_p), ("dist_rank", c_int32),
                ("dist_world", c_int32), ("dist_timeout_ms", c_int32),
                ("device", c_char_p)]  # NULL: OX_DEVICE's, as the C default


class ContextParams(Structure):
    _fields_ = [("n_ctx", c_uint32), ("n_batch", c_uint32), ("n_threads", c_int32),
                ("n_seq_max", c_uint32), ("kv_type", c_int), ("embeddings", c_bool)]


class Batch(Structure):
    _fields_ = [("n_tokens", c_int32), ("token", POINTER(ox_token)), ("pos", POINTER(c_int32)),
                ("seq_id", POINTER(c_int32)), ("logits", POINTER(c_bool))]


class ChatMessage(Structure):
    _fields_ = [("role", c_char_p), ("content", c_char_p)]


class LogitBias(Structure):
    _fields_ = [("token", ox_token), ("bias", c_float)]


class _GgufScalar(ctypes.Union):
    _fields_ = [("u", c_uint64), ("i", c_int64), ("f", ctypes.c_double), ("b", c_bool),
                ("s", c_void_p)]


class GgufValue(Structure):
    _fields_ = [("type", c_int), ("elem_type", c_int), ("n", c_uint64), ("v", _GgufScalar),
                ("internal_", c_void_p)]


# enum ox_gguf_type: the file format's ids
GGUF_UNSIGNED = (0, 2, 4, 10)
GGUF_SIGNED = (1, 3, 5, 11)
GGUF_FLOAT = (6, 12)
GGUF_BOOL, GGUF_STRING, GGUF_ARRAY = 7, 8, 9


def _library_path() -> str:
    """The shared library: OX_LIBRARY, else the copy installed beside this file."""
    env = os.environ.get("OX_LIBRARY")
    if env:
        return env
    here = Path(__file__).resolve().parent
    for name in ("liboxidize.so", "liboxidize.dylib"):
        if (here / name).exists():
            return str(here / name)
    raise ImportError(
        "oxidize: liboxidize.so is not installed beside the package (reinstall with "
        "`pip install ./bindings/python`, or set OX_LIBRARY to the library's path)")


lib = ctypes.CDLL(_library_path())

# The structs above by their tags in oxidize.h, whose sizes the library must agree with.
STRUCT_TAGS = {"ox_model_params": ModelParams, "ox_context_params": ContextParams,
               "ox_batch": Batch, "ox_chat_message": ChatMessage, "ox_logit_bias": LogitBias,
               "ox_gguf_value": GgufValue}


def check_struct_sizes(library: ctypes.CDLL, structs: "Mapping[str, type]") -> None:
    """ImportError where the library's size of one of structs differs from its declaration here
    (a library built from another oxidize.h: passing it these would read or write past them)."""
    size_of = library.ox_struct_size
    size_of.restype, size_of.argtypes = c_size_t, [c_char_p]
    for tag, struct in structs.items():
        theirs, ours = size_of(tag.encode()), ctypes.sizeof(struct)
        if theirs != ours:
            raise ImportError(
                f"oxidize: the library's struct {tag} is {theirs} bytes, this package's "
                f"{ours}: the two were built from different versions of oxidize.h (reinstall "
                "the package with its own library)")


check_struct_sizes(lib, STRUCT_TAGS)

_P = c_void_p  # opaque handles: ox_model *, ox_context *, ox_vocab *, ox_sampler *, ...
_SIGNATURES = {
    "ox_status_name": (c_char_p, [c_int]),
    "ox_last_error": (c_char_p, []),
    "ox_model_params_default": (ModelParams, []),
    "ox_model_load": (c_int, [c_char_p, POINTER(ModelParams), POINTER(_P)]),
    "ox_model_free": (None, [_P]),
    "ox_model_vocab": (_P, [_P]),
    "ox_model_n_vocab": (c_int32, [_P]),
    "ox_model_n_ctx_train": (c_int32, [_P]),
    "ox_model_n_embd": (c_int32, [_P]),
    "ox_model_n_layer": (c_int32, [_P]),
    "ox_model_n_params": (c_uint64, [_P]),
    "ox_model_backend": (c_char_p, [_P]),
    "ox_model_desc": (c_size_t, [_P, c_char_p, c_size_t]),
    "ox_model_has_logits": (c_bool, [_P]),
    "ox_model_pooling": (c_int, [_P]),
    "ox_model_chat_template": (c_char_p, [_P, c_char_p]),
    "ox_default_threads": (c_int, []),
    "ox_context_params_default": (ContextParams, []),
    "ox_context_create": (c_int, [_P, POINTER(ContextParams), POINTER(_P)]),
    "ox_context_free": (None, [_P]),
    "ox_lora_load": (c_int, [_P, c_char_p, POINTER(_P)]),
    "ox_context_set_lora": (c_int, [_P, _P, c_float]),
    "ox_context_n_ctx": (c_uint32, [_P]),
    "ox_decode": (c_int, [_P, POINTER(Batch)]),
    "ox_get_logits": (POINTER(c_float), [_P, c_int32]),
    "ox_get_embeddings": (POINTER(c_float), [_P, c_int32]),
    "ox_embed": (c_int, [_P, POINTER(ox_token), c_int32, c_int, c_bool, POINTER(c_float)]),
    "ox_kv_clear": (None, [_P]),
    "ox_kv_seq_rm": (None, [_P, c_int32, c_int32, c_int32]),
    "ox_context_set_one_token_order": (None, [_P, c_bool]),
    "ox_spec_lookup": (c_int32, [POINTER(ox_token), c_size_t, c_int32, c_int32, c_int32,
                                 POINTER(ox_token)]),
    "ox_kv_seq_pos_max": (c_int32, [_P, c_int32]),
    "ox_state_seq_size": (c_size_t, [_P, c_int32]),
    "ox_state_seq_save": (c_int, [_P, c_int32, c_void_p, c_size_t, POINTER(c_size_t)]),
    "ox_state_seq_load": (c_int, [_P, c_int32, c_char_p, c_size_t]),
    "ox_vocab_bos": (ox_token, [_P]),
    "ox_vocab_eos": (ox_token, [_P]),
    "ox_vocab_nl": (ox_token, [_P]),
    "ox_vocab_is_eog": (c_bool, [_P, ox_token]),
    "ox_vocab_add_bos": (c_bool, [_P]),
    "ox_vocab_token_text": (c_char_p, [_P, ox_token]),
    "ox_tokenize": (c_int, [_P, c_char_p, c_size_t, POINTER(ox_token), c_size_t,
                            POINTER(c_size_t), c_bool, c_bool]),
    "ox_token_to_piece": (c_int32, [_P, ox_token, c_char_p, c_size_t, c_int32, c_bool]),
    "ox_detokenize": (c_int64, [_P, POINTER(ox_token), c_size_t, c_char_p, c_size_t, c_bool,
                                c_bool]),
    "ox_sampler_create": (c_int, [POINTER(_P)]),
    "ox_sampler_free": (None, [_P]),
    "ox_sampler_add_greedy": (c_int, [_P]),
    "ox_sampler_add_dist": (c_int, [_P, c_uint32]),
    "ox_sampler_add_temp": (c_int, [_P, c_float]),
    "ox_sampler_add_top_k": (c_int, [_P, c_int32]),
    "ox_sampler_add_top_p": (c_int, [_P, c_float, c_size_t]),
    "ox_sampler_add_min_p": (c_int, [_P, c_float, c_size_t]),
    "ox_sampler_add_typical": (c_int, [_P, c_float, c_size_t]),
    "ox_sampler_add_penalties": (c_int, [_P, c_int32, c_float, c_float, c_float]),
    "ox_sampler_add_mirostat": (c_int, [_P, c_int32, c_uint32, c_float, c_float, c_int32]),
    "ox_sampler_add_mirostat_v2": (c_int, [_P, c_uint32, c_float, c_float]),
    "ox_sampler_add_logit_bias": (c_int, [_P, POINTER(LogitBias), c_size_t]),
    "ox_sampler_add_grammar": (c_int, [_P, _P, c_char_p, c_size_t]),
    "ox_json_schema_to_grammar": (c_int, [c_char_p, c_size_t, POINTER(c_void_p),
                                          POINTER(c_size_t)]),
    "ox_sampler_sample": (ox_token, [_P, POINTER(c_float), c_int32]),
    "ox_sampler_reset": (None, [_P]),
    "ox_sampler_accept": (c_int, [_P, ox_token]),
    "ox_sampler_accept_prompt": (c_int, [_P, ox_token]),
    "ox_gguf_open": (c_int, [c_char_p, POINTER(_P)]),
    "ox_gguf_free": (None, [_P]),
    "ox_gguf_n_kv": (c_int64, [_P]),
    "ox_gguf_key": (c_char_p, [_P, c_int64]),
    "ox_gguf_value": (c_int, [_P, c_int64, POINTER(GgufValue)]),
    "ox_chat_render_json": (c_int, [c_char_p, c_char_p, c_char_p, c_bool, c_char_p, c_char_p,
                                    c_int64, POINTER(c_void_p), POINTER(c_size_t)]),
}
for _name, (_res, _args) in _SIGNATURES.items():
    _fn = getattr(lib, _name)
    _fn.restype, _fn.argtypes = _res, _args

libc = ctypes.CDLL(None)
libc.free.argtypes, libc.free.restype = [c_void_p], None


def take_string(ptr: c_void_p, length: c_size_t) -> str:
    """A malloc'd buffer of the library as a Python string, the buffer freed."""
    if not ptr.value:
        return ""
    try:
        return ctypes.string_at(ptr.value, length.value).decode("utf-8", errors="replace")
    finally:
        libc.free(ptr)


def gguf_metadata(path: str) -> "dict[str, str]":
    """A GGUF file's scalar and string metadata as text (as llama_cpp's Llama.metadata; arrays,
    such as the vocabulary, left out). Empty when the file cannot be read."""
    handle = c_void_p()
    if lib.ox_gguf_open(path.encode(), ctypes.byref(handle)) != OX_OK:
        return {}
    out: "dict[str, str]" = {}
    try:
        for i in range(lib.ox_gguf_n_kv(handle)):
            value = GgufValue()
            if lib.ox_gguf_value(handle, i, ctypes.byref(value)) != OX_OK:
                continue
            key = (lib.ox_gguf_key(handle, i) or b"").decode("utf-8", "replace")
            t = value.type
            if t == GGUF_STRING:
                text = ctypes.string_at(value.v.s, value.n) if value.n else b""
                out[key] = text.decode("utf-8", "replace")
            elif t in GGUF_UNSIGNED:
                out[key] = str(value.v.u)
            elif t in GGUF_SIGNED:
                out[key] = str(value.v.i)
            elif t in GGUF_FLOAT:
                out[key] = str(value.v.f)
            elif t == GGUF_BOOL:
                out[key] = "true" if value.v.b else "false"
    finally:
        lib.ox_gguf_free(handle)
    return out
