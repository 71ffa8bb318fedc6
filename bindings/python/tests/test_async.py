"""test_async.py: AsyncLlama: streams of several prompts advance together, each as the
synchronous call gives it; a stream left early frees its context; the event loop keeps
running while a completion is computed."""
import asyncio

import oxidize

PROMPTS = ["In the beginning", "And God said", "The LORD is my shepherd"]


def test_streams_interleave_and_match_sync(kjv_path):
    want = [oxidize.Llama(kjv_path, n_ctx=256, verbose=False)(p, max_tokens=48, temperature=0)
            ["choices"][0]["text"] for p in PROMPTS]

    async def main():
        llm = oxidize.AsyncLlama(kjv_path, n_parallel=3, n_ctx=256, verbose=False)
        order, texts = [], ["", "", ""]

        async def one(i):
            async for chunk in await llm.create_completion(PROMPTS[i], max_tokens=48,
                                                           temperature=0, stream=True):
                order.append(i)
                texts[i] += chunk["choices"][0]["text"]

        await asyncio.gather(*(one(i) for i in range(3)))
        return order, texts

    order, texts = asyncio.run(main())
    assert texts == want
    # every stream had chunks before another stream's last one: they ran together
    last = {i: max(k for k, s in enumerate(order) if s == i) for i in range(3)}
    first = {i: min(k for k, s in enumerate(order) if s == i) for i in range(3)}
    assert max(first.values()) < min(last.values()), order


def test_leaving_a_stream_frees_its_context(kjv_path):
    async def main():
        llm = oxidize.AsyncLlama(kjv_path, n_parallel=1, n_ctx=512, verbose=False)
        stream = await llm.create_completion(PROMPTS[0], max_tokens=400, stream=True)
        got = 0
        async for _ in stream:
            got += 1
            if got == 2:
                break
        await stream.aclose()
        # the only context is free again: this would wait forever otherwise
        out = await asyncio.wait_for(llm.create_completion(PROMPTS[1], max_tokens=4), 30)
        return got, out

    got, out = asyncio.run(main())
    assert got == 2 and out["usage"]["completion_tokens"] == 4


def test_event_loop_not_blocked(kjv_path):
    async def main():
        llm = oxidize.AsyncLlama(kjv_path, n_parallel=1, n_ctx=512, verbose=False)
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.001)
                ticks += 1

        t = asyncio.create_task(ticker())
        out = await llm.create_completion(PROMPTS[0], max_tokens=300, temperature=0)
        chat = await llm.create_chat_completion([{"role": "user", "content": "Hello"}],
                                                max_tokens=4, temperature=0)
        t.cancel()
        return ticks, out, chat

    ticks, out, chat = asyncio.run(main())
    assert out["usage"]["completion_tokens"] == 300  # no stop: the whole budget, ~0.4 s
    assert ticks > 3 and chat["object"] == "chat.completion"
