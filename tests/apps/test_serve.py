#!/usr/bin/env python3
"""test_serve.py: `oxidize serve` on loopback, driven with the standard library's HTTP client:
greedy completions equal llama.cpp's continuation of the reference text, requests side by side
all complete, every malformed request gets its 4xx in OpenAI's error shape and the server stays
healthy, and SIGTERM stops it."""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request

from apptest import DATA, OXIDIZE, check, finish


def start(model, *args):
    """The server on a free port; returns (process, base URL)."""
    p = subprocess.Popen([OXIDIZE, "serve", "-m", model, "--port", "0", "-t", "2"] + list(args),
                         stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()  # "... on http://127.0.0.1:PORT (...)"
    m = re.search(r"http://[0-9.]+:(\d+)", line)
    if not m:
        p.kill()
        raise SystemExit("server did not start: %r" % line)
    threading.Thread(target=p.stderr.read, daemon=True).start()  # keep the pipe drained
    return p, "http://127.0.0.1:%s" % m.group(1)


def call(base, path, body=None, method=None, raw=None):
    """(status, parsed JSON body) of one request."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(base + path, data=data, method=method or ("POST" if data else "GET"))
    req.add_header("Content-Type", "application/json")
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


def main():
    with open(os.path.join(DATA, "reference", "kjv-15m-q4_k_m.json")) as f:
        ref = json.load(f)
    p, base = start(os.path.join(DATA, "models", "kjv-15m-q4_k_m.gguf"), "-np", "2", "-c", "512")
    try:
        test_endpoints(base, ref)
        test_side_by_side(base)
        test_errors(base)
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = None
    check(rc == 0, "SIGTERM: exit status %s" % rc)
    return finish("test_serve")


if __name__ == "__main__":
    sys.exit(main())
