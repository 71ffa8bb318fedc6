"""llama_types.py: the OpenAI-shaped dicts the calls return, as TypedDicts (for type checkers;
at run time they are plain dicts)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

from typing import Literal, TypedDict


class CompletionLogprobs(TypedDict):
    text_offset: List[int]
    token_logprobs: List[Optional[float]]
    tokens: List[str]
    top_logprobs: List[Optional[Dict[str, float]]]


class CompletionChoice(TypedDict):
    text: str
    index: int
    logprobs: Optional[CompletionLogprobs]
    finish_reason: Optional[Literal["stop", "length"]]


class CompletionUsage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class _CompletionFields(TypedDict):
    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: List[CompletionChoice]


class CreateCompletionResponse(_CompletionFields, total=False):
    usage: CompletionUsage  # whole completions have it, stream chunks not


CreateCompletionStreamResponse = CreateCompletionResponse
Completion = CreateCompletionResponse
CompletionChunk = CreateCompletionResponse


class EmbeddingUsage(TypedDict):
    prompt_tokens: int
    total_tokens: int


class Embedding(TypedDict):
    index: int
    object: str
    embedding: Union[List[float], List[List[float]]]


class CreateEmbeddingResponse(TypedDict):
    object: Literal["list"]
    model: str
    data: List[Embedding]
    usage: EmbeddingUsage


class _MessageFields(TypedDict):
    role: Literal["assistant"]
    content: Optional[str]


class ChatCompletionResponseMessage(_MessageFields, total=False):
    tool_calls: List[Dict[str, Any]]
    function_call: Dict[str, Any]


class ChatCompletionResponseChoice(TypedDict):
    index: int
    message: ChatCompletionResponseMessage
    logprobs: Optional[Dict[str, Any]]
    finish_reason: Optional[str]


class CreateChatCompletionResponse(TypedDict):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: List[ChatCompletionResponseChoice]
    usage: CompletionUsage


class ChatCompletionStreamResponseChoice(TypedDict):
    index: int
    delta: Dict[str, Any]
    logprobs: Optional[Dict[str, Any]]
    finish_reason: Optional[str]


class CreateChatCompletionStreamResponse(TypedDict):
    id: str
    model: str
    object: Literal["chat.completion.chunk"]
    created: int
    choices: List[ChatCompletionStreamResponseChoice]


ChatCompletion = CreateChatCompletionResponse
ChatCompletionChunk = CreateChatCompletionStreamResponse
ChatCompletionRequestMessage = Dict[str, Any]
