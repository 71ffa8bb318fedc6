#!/usr/bin/env python3
"""test_openai_client.py: the official `openai` npm package (version 6, installed from the npm
registry into the build folder on first use) against `oxidize serve`: a chat completion, a
streamed one with usage, a tool call, a completion and embeddings, each checked against what
the server's own HTTP answers give; a wrong key is refused."""
import json
import os
import signal
import subprocess
import sys

from apptest import DATA, REPO, check, finish, npm_modules
from test_serve import call, start

MODEL = os.path.join(DATA, "models", "kjv-15m-q4_k_m.gguf")
QWEN3 = os.path.join(DATA, "chat", "templates", "Qwen-Qwen3-0.6B.jinja")
PROMPT = "And the LORD said unto Moses,"


def openai_modules():
    """The folder holding node_modules/openai (version 6), installed when missing: in the build
    folder, beside the binary under test."""
    modules = npm_modules("openai", "openai@6")
    with open(os.path.join(modules, "openai", "package.json")) as f:
        version = json.load(f)["version"]
    check(version.startswith("6."), "openai package version %s" % version)
    return modules


def main():
    modules = openai_modules()
    p, base = start(MODEL, "-np", "2", "-c", "1024", "--chat-template", QWEN3, "--api-key", "k1",
                    "--embeddings")
    try:
        r = subprocess.run(["node", os.path.join(REPO, "tests", "apps", "openai_client.mjs"),
                            modules, base + "/v1", "k1", PROMPT], capture_output=True, text=True,
                           timeout=300)
        check(r.returncode == 0, "the client ran: %s" % r.stderr[-2000:])
        out = json.loads(r.stdout) if r.returncode == 0 else {}
        msgs = [{"role": "user", "content": "Who made the light?"}]
        status, chat = call(base, "/v1/chat/completions",
                            {"messages": msgs, "max_tokens": 12, "temperature": 0}, key="k1")
        want = chat["choices"][0]["message"]["content"] if status == 200 else None
        got = out.get("chat", {})
        check(want and got.get("content") == want and got.get("finish") == "length" and
              got.get("usage", {}).get("completion_tokens") == 12, "chat: %s vs %r" % (got, want))
        got = out.get("stream", {})
        check(got.get("content") == want and got.get("chunks", 0) > 3 and
              (got.get("usage") or {}).get("completion_tokens") == 12, "stream: %s" % got)
        got = out.get("tool", {})
        calls = got.get("calls") or []
        args = json.loads(calls[0]["function"]["arguments"]) if calls else None
        check(got.get("finish") == "tool_calls" and len(calls) == 1 and
              calls[0]["function"]["name"] == "get_weather" and isinstance(args, dict) and
              isinstance(args.get("city"), str), "tool call: %s" % got)
        status, comp = call(base, "/v1/completions",
                            {"prompt": PROMPT, "max_tokens": 10, "temperature": 0}, key="k1")
        got = out.get("completion", {})
        check(status == 200 and got.get("text") == comp["choices"][0]["text"] and
              got["usage"]["completion_tokens"] == 10, "completion: %s" % got)
        status, emb = call(base, "/v1/embeddings", {"input": ["In the beginning", "Amen"]},
                           key="k1")
        got = out.get("embedding", {})
        first = emb["data"][0]["embedding"][:4] if status == 200 else None
        check(status == 200 and got.get("n") == 2 and got.get("dims") == [288, 288] and
              all(abs(a - b) < 1e-6 for a, b in zip(got.get("first", []), first or [1] * 4)),
              "embeddings: %s vs %s" % (got, first))
        check(out.get("wrong_key") == 401, "a wrong key: %s" % out.get("wrong_key"))
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
    return finish("test_openai_client")


if __name__ == "__main__":
    sys.exit(main())
