"""llama_chat_format.py: llama_cpp.llama_chat_format's registry for code that adds its own chat
formats: a formatter turns messages into a prompt (ChatFormatterResponse), a handler turns a
request into a chat completion; Jinja2ChatFormatter renders with liboxidize's Jinja engine."""
from __future__ import annotations

import ctypes
import dataclasses
import json
from typing import Any, Callable, Dict, List, Optional, Protocol, Union

from . import _lib
from ._errors import check
from .llama import StoppingCriteriaList


@dataclasses.dataclass
class ChatFormatterResponse:
    prompt: str
    stop: Optional[Union[str, List[str]]] = None
    stopping_criteria: Optional[StoppingCriteriaList] = None
    added_special: bool = False


class ChatFormatter(Protocol):
    def __call__(self, *, messages: List[Dict[str, Any]],
                 **kwargs: Any) -> ChatFormatterResponse: ...


class LlamaChatCompletionHandler(Protocol):
    def __call__(self, *, llama: Any, messages: List[Dict[str, Any]], **kwargs: Any) -> Any: ...


class LlamaChatCompletionHandlerNotFoundException(Exception):
    pass


class Jinja2ChatFormatter:
    """A Hugging Face chat template, rendered as transformers does (liboxidize's engine)."""

    def __init__(self, template: str, eos_token: str, bos_token: str,
                 add_generation_prompt: bool = True,
                 stop_token_ids: Optional[List[int]] = None) -> None:
        self.template, self.eos_token, self.bos_token = template, eos_token, bos_token
        self.add_generation_prompt = add_generation_prompt
        self.stop_token_ids = set(stop_token_ids) if stop_token_ids is not None else None

    def __call__(self, *, messages: List[Dict[str, Any]],
                 tools: Optional[List[Dict[str, Any]]] = None,
                 **kwargs: Any) -> ChatFormatterResponse:
        out, length = ctypes.c_void_p(), ctypes.c_size_t()
        check(_lib.lib.ox_chat_render_json(
            self.template.encode("utf-8"), json.dumps(messages, ensure_ascii=False).encode(),
            json.dumps(tools, ensure_ascii=False).encode() if tools else None,
            self.add_generation_prompt, self.bos_token.encode(), self.eos_token.encode(), 0,
            ctypes.byref(out), ctypes.byref(length)), "chat template")
        criteria = None
        if self.stop_token_ids is not None:
            ids = self.stop_token_ids
            criteria = StoppingCriteriaList([lambda tokens, logits: int(tokens[-1]) in ids])
        return ChatFormatterResponse(prompt=_lib.take_string(out, length),
                                     stop=[self.eos_token], stopping_criteria=criteria,
                                     added_special=True)

    def to_chat_handler(self) -> LlamaChatCompletionHandler:
        return chat_formatter_to_chat_completion_handler(self)


def chat_formatter_to_chat_completion_handler(
        formatter: ChatFormatter) -> LlamaChatCompletionHandler:
    """A handler that renders with the formatter, then completes as Llama's own chat path."""

    def handler(*, llama: Any, messages: List[Dict[str, Any]], **kwargs: Any) -> Any:
        from ._chat import complete_rendered
        result = formatter(messages=messages, tools=kwargs.get("tools"))
        stop = result.stop if isinstance(result.stop, list) else (
            [result.stop] if result.stop else [])
        tokens = llama.tokenize(result.prompt.encode("utf-8"),
                                add_bos=not result.added_special, special=True)
        return complete_rendered(llama, tokens, stop, result.stopping_criteria, **kwargs)

    return handler


_HANDLERS: Dict[str, LlamaChatCompletionHandler] = {}


def register_chat_completion_handler(
        name: str) -> Callable[[LlamaChatCompletionHandler], LlamaChatCompletionHandler]:
    def decorator(f: LlamaChatCompletionHandler) -> LlamaChatCompletionHandler:
        _HANDLERS[name] = f
        return f
    return decorator


def register_chat_format(name: str) -> Callable[[ChatFormatter], ChatFormatter]:
    """Decorator: a formatter registered as a chat format (Llama(chat_format=name))."""
    def decorator(f: ChatFormatter) -> ChatFormatter:
        _HANDLERS[name] = chat_formatter_to_chat_completion_handler(f)
        return f
    return decorator


def get_chat_completion_handler(name: str) -> LlamaChatCompletionHandler:
    if name in _HANDLERS:
        return _HANDLERS[name]
    raise LlamaChatCompletionHandlerNotFoundException(
        f"Invalid chat handler: {name} (valid formats: {list(_HANDLERS)})")
