#!/usr/bin/env python3
"""test_ollama_client.py: the official `ollama` npm package (installed from the npm registry into
the build folder on first use) against `oxidize serve`'s Ollama API: version, list, ps, show,
generate (whole, streamed as NDJSON, continued from its context), chat (whole, streamed, a tool
call, JSON format), embed, and an error; each checked against what the server's own routes
give for the same request."""
import json
import os
import subprocess
import sys

from apptest import DATA, REPO, check, finish, npm_modules
from test_serve import call, start

MODEL = os.path.join(DATA, "models", "kjv-15m-q4_k_m.gguf")
QWEN3 = os.path.join(DATA, "chat", "templates", "Qwen-Qwen3-0.6B.jinja")
PROMPT = "And the LORD said unto Moses,"


def main():
    modules = npm_modules("ollama", "ollama@0.6")
    p, base = start(MODEL, "-np", "2", "-c", "1024", "--chat-template", QWEN3, "--embeddings")
    try:
        r = subprocess.run(["node", os.path.join(REPO, "tests", "apps", "ollama_client.mjs"),
                            modules, base, PROMPT], capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, "the client ran: %s" % r.stderr[-2000:])
        out = json.loads(r.stdout) if r.returncode == 0 else {}
        check(out.get("version") == "0.12.0", "version: %s" % out.get("version"))
        lst = out.get("list") or [{}]
        check(len(lst) == 1 and lst[0].get("name") == "kjv-15m-q4_k_m.gguf" and
              lst[0].get("family") == "llama" and lst[0].get("size") == os.path.getsize(MODEL),
              "list: %s" % lst)
        check(out.get("ps") == ["kjv-15m-q4_k_m.gguf"], "ps: %s" % out.get("ps"))
        shown = out.get("show", {})
        check(shown.get("family") == "llama" and "completion" in shown.get("capabilities", []) and
              "tools" in shown.get("capabilities", []) and shown.get("has_template"), "show: %s" % shown)
        # generate: the same text as llama.cpp's /completion of the same prompt
        status, want = call(base, "/completion", {"prompt": PROMPT, "n_predict": 12, "temperature": 0})
        want = want.get("content") if status == 200 else None
        got = out.get("generate", {})
        context = got.get("context") or []
        check(want and got.get("response") == want and got.get("done") and got.get("reason") == "length"
              and got.get("eval_count") == 12 and len(context) > 12, "generate: %s vs %r" % (got, want))
        got = out.get("generate_stream", {})
        check(got.get("response") == want and got.get("parts", 0) > 3 and got.get("done") and
              got.get("eval_count") == 12, "generate stream: %s" % got)
        # continued from the context: the first answer's tokens, then " And"
        status, ctx = call(base, "/completion", {"prompt": context + [" And"], "n_predict": 12,
                                                 "temperature": 0})
        got = out.get("generate_context", {})
        check(status == 200 and got.get("response") == ctx.get("content"), "context: %s vs %r" % (got, ctx.get("content")))
        # chat: the same as /v1/chat/completions
        msgs = [{"role": "user", "content": "Who made the light?"}]
        status, chat = call(base, "/v1/chat/completions", {"messages": msgs, "max_tokens": 12, "temperature": 0})
        want = chat["choices"][0]["message"]["content"] if status == 200 else None
        got = out.get("chat", {})
        check(want and got == {"role": "assistant", "content": want, "reason": "length"}, "chat: %s vs %r" % (got, want))
        got = out.get("chat_stream", {})
        check(got.get("content") == want and got.get("parts", 0) > 3 and got.get("done"), "chat stream: %s" % got)
        calls = out.get("tool", {}).get("calls") or []
        check(len(calls) == 1 and calls[0]["function"]["name"] == "get_weather" and
              isinstance(calls[0]["function"]["arguments"], dict), "tool call: %s" % calls)
        fmt = out.get("format")
        try:
            check(isinstance(json.loads(fmt), dict), "format json: %r" % fmt)
        except (TypeError, ValueError):
            check(False, "format json: %r" % fmt)
        status, emb = call(base, "/v1/embeddings", {"input": "In the beginning"})
        got = out.get("embed", {})
        first = emb["data"][0]["embedding"][:4] if status == 200 else None
        check(got.get("n") == 2 and got.get("dim") == len(emb["data"][0]["embedding"]) and
              all(abs(a - b) < 1e-6 for a, b in zip(got.get("first", []), first or [1e9])), "embed: %s" % got)
        check("messages" in out.get("error", ""), "error: %s" % out.get("error"))
        # the server's side: NDJSON content type, Ollama's error shape, load
        status, body = call(base, "/api/generate", {"model": "kjv"})
        check(status == 200 and body.get("done_reason") == "load", "load: %s" % body)
        status, body = call(base, "/api/chat", {"model": "kjv", "messages": [{"role": "user", "content": "x"}],
                                                "stream": False, "options": {"top_p": 5}})
        check(status == 400 and isinstance(body.get("error"), str), "bad option: %s %s" % (status, body))
        status, body = call(base, "/api/chat", {"model": "kjv", "messages": [{"role": "user", "content": "x",
                                                                              "images": ["aGk="]}]})
        check(status == 400 and "images" in body.get("error", ""), "images: %s" % body)
        status, body = call(base, "/api/version", method="POST", raw=b"{}")
        check(status == 405 and body.get("error") == "use GET", "method: %s %s" % (status, body))
    finally:
        p.terminate()
        p.wait(timeout=30)
    return finish("test_ollama_client")


if __name__ == "__main__":
    sys.exit(main())
