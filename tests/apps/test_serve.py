#!/usr/bin/env python3
"""test_serve.py: `oxidize serve` on loopback, driven with the standard library's HTTP client:
greedy completions (whole or streamed as Server-Sent Events) equal llama.cpp's continuation of
the reference text, chat completions equal the completion of their rendered conversation,
/tokenize and /detokenize go there and back, --api-key guards every route but /health, requests side by side all complete, clients that leave mid-stream leave
nothing behind, every malformed request gets its 4xx in OpenAI's error shape and the server stays
healthy, and SIGTERM stops it."""
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

from apptest import DATA, OXIDIZE, check, finish


def start(model, *args, env=None):
    """The server on a free port (env: variables to add to its environment); returns (process,
    base URL)."""
    p = subprocess.Popen([OXIDIZE, "serve", "-m", model, "--port", "0", "-t", "2"] + list(args),
                         stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, **env) if env else None)
    line = p.stderr.readline()  # "... listening on http://127.0.0.1:PORT, loading ..."
    m = re.search(r"http://[0-9.]+:(\d+)", line)
    ready = p.stderr.readline()  # "... ready (...)"
    if not m or "ready" not in ready:
        p.kill()
        raise SystemExit("server did not start: %r %r" % (line, ready))
    threading.Thread(target=p.stderr.read, daemon=True).start()  # keep the pipe drained
    return p, "http://127.0.0.1:%s" % m.group(1)


def call(base, path, body=None, method=None, raw=None, key=None):
    """(status, parsed JSON body) of one request."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(base + path, data=data, method=method or ("POST" if data else "GET"))
    req.add_header("Content-Type", "application/json")
    if key is not None:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_endpoints(base, ref):
    status, body = call(base, "/health")
    check(status == 200 and body == {"status": "ok"}, "health: %s %s" % (status, body))
    status, body = call(base, "/v1/models")
    check(status == 200 and body["object"] == "list" and
          body["data"][0]["id"] == "kjv-15m-q4_k_m.gguf", "models: %s" % body)
    # greedy: llama.cpp's continuation of the reference text, byte for byte
    n = len(ref["text_greedy"])
    status, body = call(base, "/v1/completions",
                        {"prompt": ref["text"], "max_tokens": n, "temperature": 0})
    want = bytes.fromhex(ref["text_greedy_detok_hex"]).decode("utf-8", "replace")
    check(status == 200, "completion status %s %s" % (status, body))
    if status == 200:
        c = body["choices"][0]
        check(c["text"] == want, "greedy text %r != %r" % (c["text"], want))
        check(c["finish_reason"] == "length" and body["object"] == "text_completion",
              "completion shape %s" % body)
        check(body["usage"]["completion_tokens"] == n and
              body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + n,
              "usage %s" % body["usage"])


def test_side_by_side(base):
    """Eight requests at once on two slots: all complete, each with its tokens."""
    results = [None] * 8

    def one(i):
        results[i] = call(base, "/v1/completions",
                          {"prompt": "And God said %d" % i, "max_tokens": 8 + i, "temperature": 0.7,
                           "seed": i})

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, (status, body) in enumerate(results):
        check(status == 200 and body["usage"]["completion_tokens"] == 8 + i and
              body["choices"][0]["text"], "request %d side by side: %s %s" % (i, status, body))
    # a seeded request gives the same text again
    again = call(base, "/v1/completions",
                 {"prompt": "And God said 3", "max_tokens": 11, "temperature": 0.7, "seed": 3})
    check(again[0] == 200, "seeded again: %s" % (again,))


def stream(base, body, read_events=None, path="/v1/completions"):
    """(status, content type, the data of each event) of a streamed completion; read_events: stop
    reading after that many events and drop the connection."""
    host, port = base[len("http://"):].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    conn.request("POST", path, json.dumps(dict(body, stream=True)),
                 {"Content-Type": "application/json"})
    r = conn.getresponse()
    events = []
    while r.status == 200 and (read_events is None or len(events) < read_events):
        line = r.readline()
        if not line:
            break
        if line.startswith(b"data: "):
            events.append(line[6:].strip().decode())
    ctype = r.getheader("Content-Type")
    conn.close()
    return r.status, ctype, events


def test_stream(base, ref):
    """A streamed greedy completion: its pieces make llama.cpp's continuation; after clients
    leave mid-stream the server goes on serving."""
    n = len(ref["text_greedy"])
    status, ctype, events = stream(base, {"prompt": ref["text"], "max_tokens": n,
                                          "temperature": 0})
    check(status == 200 and ctype == "text/event-stream", "stream: %s %s" % (status, ctype))
    check(events and events[-1] == "[DONE]", "stream ends with [DONE]: %s" % events[-2:])
    chunks = [json.loads(e) for e in events[:-1]]
    text = "".join(c["choices"][0]["text"] for c in chunks)
    want = bytes.fromhex(ref["text_greedy_detok_hex"]).decode("utf-8", "replace")
    check(text == want, "streamed text %r != %r" % (text, want))
    check(chunks and chunks[-1]["choices"][0]["finish_reason"] == "length" and
          all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1]) and
          len({c["id"] for c in chunks}) == 1 and chunks[0]["object"] == "text_completion",
          "stream chunks' shape")
    # two clients leave after two events of a long generation: the slots come free again
    for _ in range(2):
        status, _, events = stream(base, {"prompt": "And God said", "max_tokens": 200,
                                          "temperature": 0}, read_events=2)
        check(status == 200 and len(events) == 2, "left mid-stream: %s %d" % (status, len(events)))
    start = time.time()
    status, body = call(base, "/v1/completions", {"prompt": "In the beginning", "max_tokens": 4})
    check(status == 200 and body["usage"]["completion_tokens"] == 4,
          "a request after clients left: %s" % status)
    check(time.time() - start < 30, "slots freed promptly: %.1f s" % (time.time() - start))


def error_of(status, body, code, param=None):
    e = body.get("error", {}) if isinstance(body, dict) else {}
    return status == code and isinstance(e.get("message"), str) and e.get("message") and \
        "type" in e and (param is None or e.get("param") == param)


def test_errors(base):
    cases = [
        ("bad JSON", dict(raw=b"{bad"), 400, None),
        ("not an object", dict(body=[1, 2]), 400, None),
        ("no prompt", dict(body={"max_tokens": 4}), 400, "prompt"),
        ("prompt not a string", dict(body={"prompt": 5}), 400, "prompt"),
        ("negative max_tokens", dict(body={"prompt": "a", "max_tokens": -1}), 400, "max_tokens"),
        ("temperature 5", dict(body={"prompt": "a", "temperature": 5}), 400, "temperature"),
        ("top_p 0", dict(body={"prompt": "a", "top_p": 0}), 400, "top_p"),
        ("stream not a boolean", dict(body={"prompt": "a", "stream": "yes"}), 400, "stream"),
        ("prompt past the slot", dict(body={"prompt": "and " * 600}), 400, "prompt"),
        ("body over 1 MiB", dict(raw=b'{"prompt":"' + b"a" * (1 << 21) + b'"}'), 413, None),
    ]
    for what, kw, code, param in cases:
        status, body = call(base, "/v1/completions", **kw)
        check(error_of(status, body, code, param), "%s: %s %s" % (what, status, str(body)[:200]))
    status, body = call(base, "/nope")
    check(error_of(status, body, 404), "unknown path: %s" % status)
    status, body = call(base, "/v1/completions", method="GET")
    check(error_of(status, body, 405), "GET completions: %s" % status)
    status, body = call(base, "/health")
    check(status == 200, "healthy after the errors")


def test_chat(model):
    """Chat completions rendered with a template given to the server: the greedy reply is the
    completion of the rendered conversation, whole or streamed as chat chunks."""
    tmpl = os.path.join(DATA, "chat", "templates", "mistralai-Mistral-Nemo-Instruct-2407.jinja")
    msgs = [{"role": "user", "content": "Who made the light?"}]
    mfile = os.path.join(os.environ.get("TMPDIR", "/tmp"), "ox-serve-msgs-%d.json" % os.getpid())
    with open(mfile, "w") as f:
        json.dump(msgs, f)
    rendered = subprocess.run([OXIDIZE, "chat-template", "--template", tmpl, "--messages", mfile],
                              capture_output=True, text=True).stdout
    os.unlink(mfile)
    check(rendered.startswith("[INST]Who made the light?"), "rendered %r" % rendered)
    p, base = start(model, "-np", "2", "-c", "512", "--chat-template", tmpl)
    try:
        status, plain = call(base, "/v1/completions",
                             {"prompt": rendered, "max_tokens": 10, "temperature": 0})
        status2, body = call(base, "/v1/chat/completions",
                             {"messages": msgs, "max_tokens": 10, "temperature": 0})
        check(status == 200 and status2 == 200, "chat: %s %s" % (status2, body))
        if status == 200 and status2 == 200:
            m = body["choices"][0]["message"]
            check(body["object"] == "chat.completion" and m["role"] == "assistant" and
                  m["content"] == plain["choices"][0]["text"] and
                  body["usage"] == plain["usage"], "chat reply %s vs %s" % (body, plain))
            status, ctype, events = stream(base, {"messages": msgs, "max_tokens": 10,
                                                  "temperature": 0}, path="/v1/chat/completions")
            chunks = [json.loads(e) for e in events[:-1]]
            check(status == 200 and events[-1] == "[DONE]" and
                  chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""} and
                  chunks[-1]["choices"][0]["finish_reason"] == "length" and
                  all(c["object"] == "chat.completion.chunk" for c in chunks),
                  "chat stream shape: %s" % events[:2])
            text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
            check(text == m["content"], "streamed chat %r != %r" % (text, m["content"]))
        for what, body, param in [("no messages", {"max_tokens": 2}, "messages"),
                                  ("no content", {"messages": [{"role": "user"}]}, "messages"),
                                  ("empty", {"messages": []}, "messages")]:
            status, reply = call(base, "/v1/chat/completions", body)
            check(error_of(status, reply, 400, param), "chat %s: %s %s" % (what, status, reply))
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)


def test_tokenize(base):
    """llama.cpp's /tokenize and /detokenize: text there and back."""
    status, body = call(base, "/tokenize", {"content": "In the beginning"})
    tokens = body.get("tokens") if status == 200 else None
    check(isinstance(tokens, list) and tokens and all(isinstance(t, int) for t in tokens),
          "tokenize: %s %s" % (status, body))
    status, body = call(base, "/detokenize", {"tokens": tokens or []})
    check(status == 200 and body.get("content") == "In the beginning", "detokenize: %s" % body)
    status, body = call(base, "/detokenize", {"tokens": [10 ** 9]})
    check(error_of(status, body, 400, "tokens"), "detokenize a bad id: %s" % status)
    status, body = call(base, "/tokenize", {"text": "x"})
    check(error_of(status, body, 400, "content"), "tokenize without content: %s" % status)


def test_api_key(model):
    """With --api-key every route but /health wants the key."""
    p, base = start(model, "-np", "1", "-c", "128", "--api-key", "s3cret")
    try:
        check(call(base, "/health")[0] == 200, "health needs no key")
        for key in (None, "wrong", "s3cret-and-more", ""):
            status, body = call(base, "/v1/models", key=key)
            check(error_of(status, body, 401) and body["error"].get("code") == "invalid_api_key",
                  "key %r: %s" % (key, status))
        check(call(base, "/v1/models", key="s3cret")[0] == 200, "the right key")
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)


def test_log_requests(model):
    """--log-requests: a line per request on stderr, with its method, path, status, tokens
    and time; a stream's tokens too; a refused key's 401."""
    p = subprocess.Popen([OXIDIZE, "serve", "-m", model, "--port", "0", "-t", "2", "-np", "1",
                          "-c", "256", "--log-requests", "--api-key", "k"],
                         stderr=subprocess.PIPE, text=True)
    lines = []
    try:
        m = re.search(r"http://[0-9.]+:(\d+)", p.stderr.readline())
        check(m is not None and "ready" in p.stderr.readline(), "log server started")
        threading.Thread(target=lambda: lines.extend(p.stderr), daemon=True).start()
        base = "http://127.0.0.1:%s" % m.group(1)
        body = {"prompt": "In the beginning", "max_tokens": 5, "temperature": 0}
        check(call(base, "/v1/completions", body, key="k")[0] == 200, "log: a completion")
        req = urllib.request.Request(base + "/v1/completions",
                                     data=json.dumps(dict(body, stream=True)).encode())
        req.add_header("Authorization", "Bearer k")
        with urllib.request.urlopen(req, timeout=60) as r:
            r.read()
        check(call(base, "/no/such/route", key="k")[0] == 404, "log: a 404")
        check(call(base, "/v1/models?secret=1", key="wrong")[0] == 401, "log: a 401")
        time.sleep(0.5)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
    line = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ %s %s %d (\d+)\+(\d+) tokens [\d.]+ ms"
    found = lambda method, path, status: [re.fullmatch(line % (method, re.escape(path), status),
                                                       ln.strip()) for ln in lines]
    whole = [m for m in found("POST", "/v1/completions", 200) if m]
    check(len(whole) == 2 and all(int(m.group(1)) == 4 and int(m.group(2)) == 5
                                  for m in whole), "log: both completions, 4+5 tokens: %s" % lines)
    check(any(found("GET", "/no/such/route", 404)), "log: the 404: %s" % lines)
    check(any(found("GET", "/v1/models", 401)), "log: the 401, without the query: %s" % lines)


def test_speculative(model):
    """--spec ngram and -md: completions (alone, side by side, with "speculative.n_max") give
    the text of a server without them, drafts are checked and some taken (/metrics); another
    vocabulary's draft model, a missing one and bad values are refused at the start."""
    prompt = "And the waters were as the waters, and the waters were as the waters, and the"
    bodies = [{"prompt": prompt, "n_predict": 120, "temperature": 0},
              {"prompt": "In the beginning God created", "n_predict": 60, "temperature": 0},
              {"prompt": prompt, "n_predict": 50, "temperature": 0.8, "seed": 5},
              {"prompt": prompt, "n_predict": 40, "temperature": 0, "speculative.n_max": 2}]
    texts = {}
    for args in ((), ("--spec", "ngram", "--draft-max", "8"),
                 ("-md", model, "--draft-max", "6", "--draft-p-min", "0.3")):
        p, base = start(model, "-np", "3", "-c", "768", *args)
        try:
            got = []
            for b in bodies:  # one at a time, then all at once
                status, body = call(base, "/completion", b)
                got.append(body.get("content") if status == 200 else status)
            side = [None] * len(bodies)
            def one(i):
                status, body = call(base, "/completion", bodies[i])
                side[i] = body.get("content") if status == 200 else status
            threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            texts[args] = (got, side)
            if args:
                with urllib.request.urlopen(base + "/metrics", timeout=30) as r:
                    metrics = r.read().decode()
                drafted = re.search(r"oxidize:draft_tokens_total (\d+)", metrics)
                taken = re.search(r"oxidize:draft_tokens_accepted_total (\d+)", metrics)
                check(drafted and taken and int(drafted.group(1)) > 0 and int(taken.group(1)) > 0,
                      "draft counters: %s" % metrics[-400:])
                status, body = call(base, "/completion", dict(bodies[0], **{"speculative.n_max": 300}))
                check(error_of(status, body, 400), "speculative.n_max 300: %s %s" % (status, body))
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=30)
    plain = texts.pop(())
    for args, spec in texts.items():
        check(plain[0] == spec[0] and all(isinstance(t, str) and t for t in plain[0]),
              "%s one at a time: %r vs %r" % (args, spec[0], plain[0]))
    # side by side, a slot's rows are computed with the others': on the CPU every matrix of this
    # model has a load-time layout, whose batch tiles sum as one token does, so the greedy texts
    # are the ones alone (the sampled one draws from the same logits too)
    for args, spec in texts.items():
        check(spec[1] == plain[1] == plain[0], "%s side by side: %r vs %r" % (args, spec[1], plain[1]))
    for bad in (["--spec", "tree"], ["--draft-max", "0"], ["--draft-p-min", "2"]):
        r = subprocess.run([OXIDIZE, "serve", "-m", model, "--port", "0"] + bad,
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 2 and "oxidize serve:" in r.stderr, "%s: %s" % (bad, r.stderr[-200:]))
    other = os.path.join(DATA, "models", "llama-q8_0.gguf")
    for bad, why in ((["-md", other], "vocabulary"), (["-md", "/no/such.gguf"], "such.gguf")):
        r = subprocess.run([OXIDIZE, "serve", "-m", model, "--port", "0"] + bad,
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 1 and why in r.stderr, "%s: %s" % (bad, r.stderr[-200:]))


def main():
    with open(os.path.join(DATA, "reference", "kjv-15m-q4_k_m.json")) as f:
        ref = json.load(f)
    p, base = start(os.path.join(DATA, "models", "kjv-15m-q4_k_m.gguf"), "-np", "2", "-c", "512")
    try:
        test_endpoints(base, ref)
        test_side_by_side(base)
        test_stream(base, ref)
        test_errors(base)
        test_tokenize(base)
        status, body = call(base, "/v1/chat/completions", {"messages": [{"role": "user",
                                                                         "content": "hi"}]})
        check(error_of(status, body, 400), "chat without a template: %s %s" % (status, body))
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = None
    check(rc == 0, "SIGTERM: exit status %s" % rc)
    test_chat(os.path.join(DATA, "models", "kjv-15m-q4_k_m.gguf"))
    test_api_key(os.path.join(DATA, "models", "kjv-15m-q4_k_m.gguf"))
    test_log_requests(os.path.join(DATA, "models", "kjv-15m-q4_k_m.gguf"))
    test_speculative(os.path.join(DATA, "models", "kjv-15m-q4_k_m.gguf"))
    return finish("test_serve")


if __name__ == "__main__":
    sys.exit(main())
