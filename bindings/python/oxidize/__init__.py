"""oxidize: LLM inference over liboxidize, with llama-cpp-python's high-level API
(`import oxidize as llama_cpp`)."""
from __future__ import annotations

from ._errors import (AbortedError, ContextFullError, DeviceError, FormatError,
                      InvalidArgumentError, OxidizeError, UnsupportedError)
from .llama import (LLAMA_DEFAULT_SEED, LLAMA_SPLIT_MODE_LAYER, LLAMA_SPLIT_MODE_NONE,
                    LLAMA_SPLIT_MODE_ROW, Llama, LlamaState, LlamaTokenizer, LogitsProcessor,
                    LogitsProcessorList, MinTokensLogitsProcessor, StoppingCriteria,
                    StoppingCriteriaList)
from .llama_grammar import LlamaGrammar
from . import llama_speculative
from .llama_speculative import LlamaDraftModel, LlamaPromptLookupDecoding
from .llama_types import (ChatCompletion, ChatCompletionChunk, ChatCompletionRequestMessage,
                          Completion, CompletionChoice, CompletionChunk, CompletionLogprobs,
                          CompletionUsage, CreateChatCompletionResponse,
                          CreateChatCompletionStreamResponse, CreateCompletionResponse,
                          CreateCompletionStreamResponse, CreateEmbeddingResponse, Embedding,
                          EmbeddingUsage)
from .aio import AsyncLlama

__version__ = "0.1.0"

__all__ = [
    "AbortedError", "AsyncLlama", "ContextFullError", "DeviceError", "FormatError",
    "InvalidArgumentError", "LLAMA_DEFAULT_SEED", "LLAMA_SPLIT_MODE_LAYER",
    "LLAMA_SPLIT_MODE_NONE", "LLAMA_SPLIT_MODE_ROW", "Llama", "LlamaDraftModel", "LlamaGrammar",
    "LlamaPromptLookupDecoding", "LlamaState",
    "LlamaTokenizer",
    "LogitsProcessor", "LogitsProcessorList", "MinTokensLogitsProcessor", "OxidizeError",
    "StoppingCriteria", "StoppingCriteriaList", "UnsupportedError",
    # llama_types
    "ChatCompletion", "ChatCompletionChunk", "ChatCompletionRequestMessage", "Completion",
    "CompletionChunk", "CompletionChoice", "CompletionLogprobs", "CompletionUsage",
    "CreateChatCompletionResponse", "CreateChatCompletionStreamResponse",
    "CreateCompletionResponse", "CreateCompletionStreamResponse", "CreateEmbeddingResponse",
    "Embedding", "EmbeddingUsage",
]
