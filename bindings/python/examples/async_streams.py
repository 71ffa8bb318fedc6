"""async_streams.py MODEL.gguf: three prompts streamed at once with AsyncLlama, each on a
context of its own; the event loop stays free while they generate."""
import asyncio
import sys

import oxidize


async def main() -> None:
    llm = oxidize.AsyncLlama(sys.argv[1], n_parallel=3, n_ctx=512, verbose=False)

    async def one(prompt: str) -> str:
        text = ""
        async for chunk in await llm.create_completion(prompt, max_tokens=24, stream=True):
            text += chunk["choices"][0]["text"]
        return prompt + text

    for line in await asyncio.gather(*(one(p) for p in ["In the beginning", "And God said",
                                                          "The LORD is"])):
        print(line)


asyncio.run(main())
