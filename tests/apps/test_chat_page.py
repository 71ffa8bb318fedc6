#!/usr/bin/env python3
"""test_chat_page.py: the chat page `oxidize serve` answers GET / with, in headless Chromium
(Debian's /usr/bin/chromium driven by the playwright-core npm package): it names the model,
streams the answer to a message typed and sent with Enter (the same text /v1/chat/completions
gives for that conversation with the page's settings from its address), shows tokens/s, keeps
the conversation for a second turn, and raises no page or console errors; and /openapi.json
lists exactly the routes the server answers."""
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

from apptest import DATA, REPO, check, finish, npm_modules
from test_serve import call, start

MODEL = os.path.join(DATA, "models", "kjv-15m-q4_k_m.gguf")
QWEN3 = os.path.join(DATA, "chat", "templates", "Qwen-Qwen3-0.6B.jinja")


def routes_in_source():
    """(method, path) of every route routes.c's table and ollama.c's name."""
    src = open(os.path.join(REPO, "apps", "server", "routes.c")).read()
    out = {(("get" if m == "ANY_GET" else "post"), p) for p, m in
           re.findall(r'\{"(/[^"]*)", (ANY_GET|ANY_POST), R_', src)}
    ollama = open(os.path.join(REPO, "apps", "server", "ollama.c")).read()
    out |= {("post" if post == "true" else "get", p) for p, post in
            re.findall(r'\{"(/api/[^"]*)", (true|false)\}', ollama)}
    return out


def main():
    p, base = start(MODEL, "-np", "2", "-c", "1024", "--chat-template", QWEN3, "--embeddings")
    try:
        # the OpenAPI document: every route, and only those; each answers (not 404 or 405)
        status, doc = call(base, "/openapi.json")
        documented = {(m, path) for path, ops in doc.get("paths", {}).items() for m in ops}
        source = routes_in_source()
        check(status == 200 and doc.get("openapi", "").startswith("3.1") and documented == source,
              "openapi.json: missing %s, extra %s" % (source - documented, documented - source))
        for m, path in sorted(documented):
            if path in ("/api/generate", "/api/chat", "/v1/rerank", "/rerank", "/v1/reranking", "/reranking"):
                continue  # generate by default, or need --reranking: answered elsewhere
            req = urllib.request.Request(base + path, data=b"{}" if m == "post" else None,
                                         method=m.upper())
            try:
                s = urllib.request.urlopen(req, timeout=60).status
            except urllib.error.HTTPError as e:
                s = e.code
            check(s not in (404, 405), "%s %s answered %d" % (m, path, s))
        # the page in Chromium
        modules = npm_modules("playwright-core", "playwright-core@1")
        shot = os.path.join(tempfile.mkdtemp(prefix="ox-page-"), "chat.png")
        r = subprocess.run(["node", os.path.join(REPO, "tests", "apps", "chat_page.mjs"), modules,
                            base + "/?temperature=0&max_tokens=16", shot],
                           capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, "the page ran: %s" % r.stderr[-3000:])
        out = json.loads(r.stdout) if r.returncode == 0 else {}
        msgs = [{"role": "user", "content": "Who made the light?"}]
        status, chat = call(base, "/v1/chat/completions", {"messages": msgs, "max_tokens": 16, "temperature": 0})
        want = chat["choices"][0]["message"]["content"] if status == 200 else None
        check(out.get("model") == "kjv-15m-q4_k_m.gguf", "model name: %r" % out.get("model"))
        check(out.get("user") == "Who made the light?" and want and out.get("answer") == want,
              "answer: %r vs %r" % (out.get("answer"), want))
        check(re.fullmatch(r"[0-9.]+ tokens/s", out.get("speed") or "") is not None, "speed: %r" % out.get("speed"))
        turns = out.get("turns") or []
        msgs += [{"role": "assistant", "content": want or ""}, {"role": "user", "content": "And then?"}]
        status, chat = call(base, "/v1/chat/completions", {"messages": msgs, "max_tokens": 16, "temperature": 0})
        want2 = chat["choices"][0]["message"]["content"] if status == 200 else None
        check(len(turns) == 4 and turns[3][1] == want2, "second turn: %s vs %r" % (turns, want2))
        check(out.get("errors") == [], "page errors: %s" % out.get("errors"))
        check(os.path.exists(shot) and open(shot, "rb").read(8) == b"\x89PNG\r\n\x1a\n" and
              os.path.getsize(shot) > 5000, "screenshot")
    finally:
        p.terminate()
        p.wait(timeout=30)
    return finish("test_chat_page")


if __name__ == "__main__":
    sys.exit(main())
