"""aio.py: AsyncLlama, Llama's calls for asyncio: each request runs on a worker thread with a
context of its own (n_parallel of them over one loaded model), so the event loop never blocks and
several streams advance together; leaving a stream early (break, cancellation) stops its
generation and frees its context for the next request."""
from __future__ import annotations

import asyncio
import threading
from typing import Any, AsyncIterator, Callable, Dict, Iterator, List, Optional, Union, cast

from .llama import Llama

_DONE = object()


class AsyncLlama:
    """`await llm.create_completion(...)`, `async for chunk in await
    llm.create_completion(..., stream=True)`, the same for create_chat_completion, and
    create_embedding; acreate_* are the same methods under llama-cpp-python's server's names."""

    def __init__(self, model_path: str, *, n_parallel: int = 4, **kwargs: Any) -> None:
        if n_parallel < 1:
            raise ValueError("n_parallel must be at least 1")
        first = Llama(model_path, **kwargs)
        self.llama = first
        self._idle: List[Llama] = [first] + [first._sibling() for _ in range(n_parallel - 1)]
        self._free: Optional[asyncio.Semaphore] = None
        self._lock = threading.Lock()

    async def _acquire(self) -> Llama:
        if self._free is None:
            self._free = asyncio.Semaphore(len(self._idle))
        await self._free.acquire()
        with self._lock:
            return self._idle.pop()

    def _release(self, llm: Llama) -> None:
        with self._lock:
            self._idle.append(llm)
        assert self._free is not None
        self._free.release()

    async def _call(self, fn: Callable[[Llama], Any]) -> Any:
        llm = await self._acquire()
        try:
            return await asyncio.to_thread(fn, llm)
        finally:
            self._release(llm)

    async def _stream(self, fn: Callable[[Llama], Iterator[Dict[str, Any]]]
                      ) -> AsyncIterator[Dict[str, Any]]:
        """The chunks of a stream made on a worker thread, handed over through a queue; the
        worker stops at its next chunk once the consumer is gone."""
        llm = await self._acquire()
        loop = asyncio.get_running_loop()
        queue: "asyncio.Queue[Any]" = asyncio.Queue()
        stop = threading.Event()

        def produce() -> None:
            chunks = fn(llm)
            try:
                for chunk in chunks:
                    if stop.is_set():
                        break
                    loop.call_soon_threadsafe(queue.put_nowait, chunk)
            except BaseException as err:  # handed to the consumer
                loop.call_soon_threadsafe(queue.put_nowait, err)
            finally:
                if hasattr(chunks, "close"):
                    chunks.close()
                loop.call_soon_threadsafe(queue.put_nowait, _DONE)

        worker = loop.run_in_executor(None, produce)
        try:
            while True:
                item = await queue.get()
                if item is _DONE:
                    break
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            await asyncio.shield(worker)
            self._release(llm)

    async def create_completion(self, prompt: Union[str, List[int]], **kwargs: Any) -> Any:
        if kwargs.get("stream"):
            return self._stream(
                lambda llm: cast(Iterator[Dict[str, Any]], llm.create_completion(prompt, **kwargs)))
        return await self._call(lambda llm: llm.create_completion(prompt, **kwargs))

    async def create_chat_completion(self, messages: List[Dict[str, Any]], **kwargs: Any) -> Any:
        if kwargs.get("stream"):
            return self._stream(lambda llm: cast(Iterator[Dict[str, Any]],
                                                 llm.create_chat_completion(messages, **kwargs)))
        return await self._call(lambda llm: llm.create_chat_completion(messages, **kwargs))

    async def create_embedding(self, input: Union[str, List[str]], **kwargs: Any) -> Any:
        return await self._call(lambda llm: llm.create_embedding(input, **kwargs))

    acreate_completion = create_completion
    acreate_chat_completion = create_chat_completion

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> List[int]:
        return self.llama.tokenize(text, add_bos, special)

    def detokenize(self, tokens: List[int], special: bool = False) -> bytes:
        return self.llama.detokenize(tokens, special=special)

    def close(self) -> None:
        for llm in self._idle:
            llm.close()
        self._idle = []
