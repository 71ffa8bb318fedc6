"""_chat.py: Llama.create_chat_completion: the conversation rendered with the model's chat
template (or a named format) by liboxidize's Jinja engine, completed, and returned in OpenAI's
chat shapes; response_format and a forced tool turn into a grammar."""
from __future__ import annotations

import ctypes
import json
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Tuple, Union, cast

from . import _lib
from ._errors import check
from .llama_grammar import JSON_GBNF, LlamaGrammar

if TYPE_CHECKING:
    from .llama import Llama

# Named formats for models whose file has no template (written for oxidize; each renders the
# conversation as the format is documented), and the text that ends a turn.
BUILTIN_FORMATS: Dict[str, Tuple[str, str]] = {
    "chatml": ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
               "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
               "{% endif %}", "<|im_end|>"),
    "llama-3": ("{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}"
                "<|end_header_id|>\n\n{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
                "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n"
                "{% endif %}", "<|eot_id|>"),
    "mistral-instruct": ("{% set ns = namespace(sys='') %}{{ bos_token }}{% for m in messages %}"
                         "{% if m['role'] == 'system' %}{% set ns.sys = m['content'] + '\n\n' %}"
                         "{% elif m['role'] == 'user' %}[INST] {{ ns.sys }}{{ m['content'] }} "
                         "[/INST]{% set ns.sys = '' %}{% else %}{{ m['content'] }}{{ eos_token }}"
                         "{% endif %}{% endfor %}", "</s>"),
    "gemma": ("{% set ns = namespace(sys='') %}{{ bos_token }}{% for m in messages %}"
              "{% if m['role'] == 'system' %}{% set ns.sys = m['content'] + '\n\n' %}"
              "{% else %}<start_of_turn>{{ 'model' if m['role'] == 'assistant' else 'user' }}\n"
              "{% if m['role'] == 'user' %}{{ ns.sys }}{% set ns.sys = '' %}{% endif %}"
              "{{ m['content'] }}<end_of_turn>\n{% endif %}{% endfor %}"
              "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}", "<end_of_turn>"),
    "zephyr": ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}\n"
               "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}", "</s>"),
    "llama-2": ("{% set ns = namespace(sys='') %}{% for m in messages %}"
                "{% if m['role'] == 'system' %}"
                "{% set ns.sys = '<<SYS>>\n' + m['content'] + '\n<</SYS>>\n\n' %}"
                "{% elif m['role'] == 'user' %}{{ bos_token }}[INST] {{ ns.sys }}"
                "{{ m['content'] }} [/INST]{% set ns.sys = '' %}"
                "{% else %} {{ m['content'] }} {{ eos_token }}{% endif %}{% endfor %}", "</s>"),
}


BUILTIN_FORMATS["qwen"] = BUILTIN_FORMATS["chatml"]


def _template(llama: "Llama") -> Tuple[str, List[str]]:
    """The template text and the stop strings of the chat format."""
    name = llama.chat_format or "chat_template.default"
    if name.startswith("chat_template."):
        sub = name[len("chat_template."):]
        text = _lib.lib.ox_model_chat_template(
            llama._model, None if sub == "default" else sub.encode())
        if text:
            eos = llama._piece(llama.token_eos(), special=True).decode("utf-8", "replace")
            return text.decode("utf-8"), [eos] if eos else []
        if llama.chat_format is not None:
            raise ValueError(f"the model has no chat template {sub}")
        name = "llama-2"  # llama_cpp's fallback for a model without a template
    if name not in BUILTIN_FORMATS:
        raise ValueError(f"Invalid chat handler: {name} (valid formats: "
                         f"{['chat_template.default'] + list(BUILTIN_FORMATS)})")
    text, stop = BUILTIN_FORMATS[name]
    return text, [stop]


def render(llama: "Llama", messages: List[Dict[str, Any]],
           tools: Optional[List[Dict[str, Any]]] = None) -> Tuple[str, List[str]]:
    """The prompt text of the conversation (generation prompt added) and its stop strings."""
    template, stop = _template(llama)
    bos = llama._piece(llama.token_bos(), special=True) if llama.token_bos() >= 0 else b""
    eos = llama._piece(llama.token_eos(), special=True) if llama.token_eos() >= 0 else b""
    out, length = ctypes.c_void_p(), ctypes.c_size_t()
    check(_lib.lib.ox_chat_render_json(
        template.encode("utf-8"), json.dumps(messages, ensure_ascii=False).encode("utf-8"),
        json.dumps(tools, ensure_ascii=False).encode("utf-8") if tools else None, True, bos,
        eos, 0, ctypes.byref(out), ctypes.byref(length)), "chat template")
    return _lib.take_string(out, length), stop


def prompt_tokens(llama: "Llama", text: str) -> List[int]:
    """The rendering's tokens, control tokens parsed; BOS added unless the template wrote it."""
    bos = llama._piece(llama.token_bos(), special=True) if llama.token_bos() >= 0 else b""
    data = text.encode("utf-8")
    add_bos = bool(_lib.lib.ox_vocab_add_bos(llama._vocab)) and not (bos and data.startswith(bos))
    return llama.tokenize(data, add_bos=add_bos, special=True)


def _response_grammar(response_format: Optional[Dict[str, Any]]) -> Optional[LlamaGrammar]:
    if not response_format:
        return None
    kind = response_format.get("type")
    schema = None
    if kind == "json_object":
        schema = response_format.get("schema")
    elif kind == "json_schema":  # OpenAI's form: {"json_schema": {"name", "schema", ...}}
        schema = (response_format.get("json_schema") or {}).get("schema")
    else:
        return None
    if schema is None:
        return LlamaGrammar.from_string(JSON_GBNF)
    return LlamaGrammar.from_json_schema(json.dumps(schema))


def _forced_tool(tools: Optional[List[Dict[str, Any]]],
                 tool_choice: Any) -> Optional[Dict[str, Any]]:
    if not isinstance(tool_choice, dict):
        return None
    name = (tool_choice.get("function") or {}).get("name")
    for tool in tools or []:
        if tool.get("function", {}).get("name") == name:
            return cast(Dict[str, Any], tool["function"])
    raise ValueError(f"Tool choice '{name}' not found in tools.")


def _chat_logprobs(lp: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    if not lp:
        return None
    content = []
    for tok, logprob, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]):
        content.append({"token": tok, "bytes": None, "logprob": logprob,
                        "top_logprobs": [{"token": t, "logprob": p, "bytes": None}
                                         for t, p in (top or {}).items()]})
    return {"content": content, "refusal": None}


def chat_completion(llama: "Llama", messages: List[Dict[str, Any]], **kwargs: Any) -> Any:
    """The request through the Llama's chat_handler, a format registered in llama_chat_format,
    or the model's template / a built-in format."""
    from . import llama_chat_format
    if not isinstance(messages, list):
        raise TypeError("messages: a list of message dicts")
    handler = llama.chat_handler
    if handler is None and llama.chat_format in llama_chat_format._HANDLERS:
        handler = llama_chat_format._HANDLERS[llama.chat_format]
    if handler is not None:
        return handler(llama=llama, messages=messages, **kwargs)
    tools = kwargs.get("tools")
    if kwargs.get("functions") and not tools:  # the legacy form
        tools = kwargs["tools"] = [{"type": "function", "function": f}
                                   for f in kwargs["functions"]]
        if isinstance(kwargs.get("function_call"), dict):
            kwargs["tool_choice"] = {"type": "function", "function": kwargs["function_call"]}
    text, template_stop = render(llama, messages, tools)
    return complete_rendered(llama, prompt_tokens(llama, text), template_stop, None, **kwargs)


def complete_rendered(llama: "Llama", tokens: List[int], template_stop: List[str],
                      stopping_criteria: Any, functions: Any = None, function_call: Any = None,
                      tools: Optional[List[Dict[str, Any]]] = None, tool_choice: Any = None,
                      temperature: float = 0.2, top_p: float = 0.95, top_k: int = 40,
                      min_p: float = 0.05, typical_p: float = 1.0, stream: bool = False,
                      stop: Optional[Union[str, List[str]]] = [], seed: Optional[int] = None,
                      response_format: Optional[Dict[str, Any]] = None,
                      max_tokens: Optional[int] = None, presence_penalty: float = 0.0,
                      frequency_penalty: float = 0.0, repeat_penalty: float = 1.0,
                      tfs_z: float = 1.0, mirostat_mode: int = 0, mirostat_tau: float = 5.0,
                      mirostat_eta: float = 0.1, model: Optional[str] = None,
                      logits_processor: Any = None, grammar: Optional[LlamaGrammar] = None,
                      logit_bias: Optional[Dict[int, float]] = None,
                      logprobs: Optional[bool] = None, top_logprobs: Optional[int] = None,
                      **ignored: Any) -> Any:
    """A rendered conversation's tokens completed (the request's options as
    create_chat_completion takes them), in the chat shapes."""
    stops = ([stop] if isinstance(stop, str) else list(stop or [])) + template_stop
    forced = _forced_tool(tools, tool_choice)
    if forced is not None:
        grammar = LlamaGrammar.from_json_schema(json.dumps(forced.get("parameters") or {}))
    elif response_format:
        grammar = _response_grammar(response_format) or grammar
    result = llama.create_completion(
        tokens, max_tokens=max_tokens, temperature=temperature, top_p=top_p, min_p=min_p,
        typical_p=typical_p, logprobs=top_logprobs if logprobs else None, stop=stops,
        frequency_penalty=frequency_penalty, presence_penalty=presence_penalty,
        repeat_penalty=repeat_penalty, top_k=top_k, stream=stream, seed=seed,
        mirostat_mode=mirostat_mode, mirostat_tau=mirostat_tau, mirostat_eta=mirostat_eta,
        model=model, logits_processor=logits_processor, stopping_criteria=stopping_criteria,
        grammar=grammar, logit_bias=logit_bias)
    if stream:
        return _chat_chunks(cast(Iterator[Dict[str, Any]], result), forced)
    return _chat_whole(cast(Dict[str, Any], result), forced)


def _chat_whole(c: Dict[str, Any], forced: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    choice = c["choices"][0]
    message: Dict[str, Any] = {"role": "assistant", "content": choice["text"]}
    finish = choice["finish_reason"]
    if forced is not None:
        name, call_id = forced["name"], f"call__0_{forced['name']}_{c['id']}"
        message = {"role": "assistant", "content": None,
                   "function_call": {"name": name, "arguments": choice["text"]},
                   "tool_calls": [{"id": call_id, "type": "function",
                                   "function": {"name": name, "arguments": choice["text"]}}]}
        finish = "tool_calls"
    return {"id": "chat" + c["id"], "object": "chat.completion", "created": c["created"],
            "model": c["model"],
            "choices": [{"index": 0, "message": message,
                         "logprobs": _chat_logprobs(choice["logprobs"]),
                         "finish_reason": finish}],
            "usage": c["usage"]}


def _chat_chunks(chunks: Iterator[Dict[str, Any]],
                 forced: Optional[Dict[str, Any]]) -> Iterator[Dict[str, Any]]:
    first = True
    for c in chunks:
        head = {"id": "chat" + c["id"], "model": c["model"], "created": c["created"],
                "object": "chat.completion.chunk"}
        choice = c["choices"][0]
        if first:
            first = False
            delta: Dict[str, Any] = {"role": "assistant"}
            if forced is not None:
                delta = {"role": "assistant", "content": None, "function_call": None,
                         "tool_calls": None}
            yield {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                        "finish_reason": None}]}
        if choice["finish_reason"] is not None:
            delta = {} if forced is None else {"role": None, "content": None,
                                                "function_call": None, "tool_calls": None}
            reason = "tool_calls" if forced is not None else choice["finish_reason"]
            yield {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                        "finish_reason": reason}]}
            continue
        if forced is not None:
            name = forced["name"]
            delta = {"role": None, "content": None,
                     "function_call": {"name": name, "arguments": choice["text"]},
                     "tool_calls": [{"index": 0, "id": f"call__0_{name}_{c['id']}",
                                     "type": "function",
                                     "function": {"name": name, "arguments": choice["text"]}}]}
        else:
            delta = {"content": choice["text"]}
        yield {**head, "choices": [{"index": 0, "delta": delta,
                                    "logprobs": _chat_logprobs(choice["logprobs"]),
                                    "finish_reason": None}]}
