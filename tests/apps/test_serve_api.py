#!/usr/bin/env python3
"""test_serve_api.py: what `oxidize serve` does with a request's fields, on loopback with the
real KJV model: llama.cpp's /completion (whole and streamed, n_probs, cache_prompt), stop strings,
logprobs in each API's form, logit_bias, penalties (equal to `oxidize run` with the same options),
output constrained by grammar, JSON schema and response_format, tools with tool_choice (calls
parsed in the template's syntax), /apply-template, /props, /slots and /metrics (counting exactly
the tokens asked for), and the limits: bad fields named in a 400, invalid UTF-8, deep nesting,
n > 1, keys from a file, /health's 503 while the model loads; /v1/embeddings against `oxidize
embed`."""
import base64
import json
import math
import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from apptest import DATA, OXIDIZE, check, finish
from test_serve import call, error_of, start, stream

MODEL = os.path.join(DATA, "models", "kjv-15m-q4_k_m.gguf")
PROMPT = "And the LORD said unto Moses,"
QWEN3 = os.path.join(DATA, "chat", "templates", "Qwen-Qwen3-0.6B.jinja")


def greedy(base, n, **extra):
    status, body = call(base, "/v1/completions",
                        dict({"prompt": PROMPT, "max_tokens": n, "temperature": 0}, **extra))
    check(status == 200, "greedy completion: %s %s" % (status, body))
    return body["choices"][0]["text"] if status == 200 else ""


def test_native(base):
    """/completion: the same greedy text as OpenAI's route, llama.cpp's fields, a stream of
    pieces ending in a stop event, n_probs."""
    want = greedy(base, 20)
    status, body = call(base, "/completion", {"prompt": PROMPT, "n_predict": 20, "temperature": 0})
    check(status == 200 and body.get("content") == want, "native text: %s %s" % (status, body))
    if status == 200:
        check(body["stop"] is True and body["stop_type"] == "limit" and
              body["tokens_predicted"] == 20 and body["tokens_evaluated"] > 5 and
              body["timings"]["predicted_n"] == 20, "native fields: %s" % body)
    status, ctype, events = stream(base, {"prompt": PROMPT, "n_predict": 20, "temperature": 0},
                                   path="/completion")
    chunks = [json.loads(e) for e in events]
    check(status == 200 and chunks and chunks[-1]["stop"] is True and
          all(c["stop"] is False for c in chunks[:-1]) and
          "".join(c["content"] for c in chunks) == want, "native stream: %s" % events[-2:])
    status, body = call(base, "/completion", {"prompt": PROMPT, "n_predict": 6, "temperature": 0,
                                              "n_probs": 3})
    probs = body.get("completion_probabilities", []) if status == 200 else []
    check(len(probs) == 6, "n_probs: %d entries" % len(probs))
    for p in probs:
        top = p["top_logprobs"]
        check(len(top) == 3 and top[0]["id"] == p["id"] and
              abs(top[0]["logprob"] - p["logprob"]) < 1e-6 and
              top[0]["logprob"] >= top[1]["logprob"] >= top[2]["logprob"] and
              sum(math.exp(t["logprob"]) for t in top) <= 1.0 + 1e-5,
              "n_probs entry: %s" % p)
    check("".join(p["token"] for p in probs) == body.get("content"), "n_probs tokens spell it")
    # prompt given as token ids (no BOS added), and cache_prompt false
    status, tok = call(base, "/tokenize", {"content": PROMPT, "add_special": True})
    status, body = call(base, "/completion", {"prompt": tok["tokens"], "n_predict": 20,
                                              "temperature": 0, "cache_prompt": False})
    check(status == 200 and body["content"] == want, "token prompt: %s" % body.get("content"))


def test_stop(base):
    """A stop string ends the text before it; finish_reason stop, llama.cpp's stop_type word."""
    text = greedy(base, 24)
    stop = text[len(text) // 2:len(text) // 2 + 4]
    cut = text[:text.index(stop)]
    status, body = call(base, "/v1/completions", {"prompt": PROMPT, "max_tokens": 24,
                                                  "temperature": 0, "stop": [stop, "zzzz"]})
    check(status == 200 and body["choices"][0]["text"] == cut and
          body["choices"][0]["finish_reason"] == "stop", "stop %r: %s" % (stop, body))
    status, ctype, events = stream(base, {"prompt": PROMPT, "max_tokens": 24, "temperature": 0,
                                          "stop": stop})
    chunks = [json.loads(e) for e in events[:-1]]
    check("".join(c["choices"][0]["text"] for c in chunks) == cut and
          chunks[-1]["choices"][0]["finish_reason"] == "stop", "streamed stop")
    status, body = call(base, "/completion", {"prompt": PROMPT, "n_predict": 24, "temperature": 0,
                                              "stop": [stop]})
    check(status == 200 and body["content"] == cut and body["stop_type"] == "word" and
          body["stopping_word"] == stop, "native stop: %s" % body)


def test_logprobs(base):
    status, body = call(base, "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Who made the light?"}], "max_tokens": 5,
        "temperature": 0, "logprobs": True, "top_logprobs": 2})
    content = body["choices"][0]["logprobs"]["content"] if status == 200 else []
    check(len(content) == 5 and all(c["top_logprobs"][0]["token"] == c["token"] and
                                    c["logprob"] <= 0 and isinstance(c["bytes"], list)
                                    for c in content), "chat logprobs: %s" % content[:1])
    status, body = call(base, "/v1/completions", {"prompt": PROMPT, "max_tokens": 4,
                                                  "temperature": 0, "logprobs": 2})
    lp = body["choices"][0]["logprobs"] if status == 200 else {}
    check(len(lp.get("tokens", [])) == 4 and len(lp["token_logprobs"]) == 4 and
          all(len(t) <= 2 for t in lp["top_logprobs"]) and lp["text_offset"][0] == 0,
          "completion logprobs: %s" % lp)
    status, ctype, events = stream(base, {"prompt": PROMPT, "max_tokens": 4, "temperature": 0,
                                          "logprobs": 1})
    toks = sum(((json.loads(e)["choices"][0]["logprobs"] or {"tokens": []})["tokens"]
               for e in events[:-1]), []) if status == 200 else []
    check(toks == lp.get("tokens"), "streamed logprobs %s vs %s" % (toks, lp.get("tokens")))


def run_cli(n, *opts):
    out = subprocess.run([OXIDIZE, "run", "-m", MODEL, "-p", PROMPT, "-n", str(n), "-t", "2"] +
                         list(opts), capture_output=True, text=True).stdout
    return out[len(PROMPT):-1]


def test_sampling(base):
    """logit_bias bans the greedy token; penalties give what `oxidize run` gives."""
    status, tok = call(base, "/tokenize", {"content": PROMPT})
    status, body = call(base, "/completion", {"prompt": PROMPT, "n_predict": 1, "temperature": 0,
                                              "n_probs": 1})
    first = body["completion_probabilities"][0]["id"]
    status, body = call(base, "/completion", {"prompt": PROMPT, "n_predict": 1, "temperature": 0,
                                              "n_probs": 1, "logit_bias": [[first, False]]})
    check(status == 200 and body["completion_probabilities"][0]["id"] != first,
          "logit_bias bans %d" % first)
    status, body = call(base, "/v1/completions", {"prompt": PROMPT, "max_tokens": 1,
                                                  "temperature": 0,
                                                  "logit_bias": {str(first): -100}})
    check(status == 200 and body["choices"][0]["text"] != greedy(base, 1),
          "OpenAI's logit_bias moves the greedy token: %s" % body)
    for opts, fields in [(["--repeat-penalty", "1.5"], {"repeat_penalty": 1.5}),
                         (["--frequency-penalty", "1.2", "--presence-penalty", "0.7"],
                          {"frequency_penalty": 1.2, "presence_penalty": 0.7})]:
        want = run_cli(30, "--temp", "0", *opts)
        status, body = call(base, "/completion", dict({"prompt": PROMPT, "n_predict": 30,
                                                       "temperature": 0}, **fields))
        check(status == 200 and body["content"] == want and want != greedy(base, 30),
              "%s: %r vs run's %r" % (fields, body.get("content"), want))
    # a seeded draw at temperature 0.9 with top_k / min_p is what run draws with that seed
    want = run_cli(20, "--temp", "0.9", "--top-k", "20", "--min-p", "0.1", "--seed", "77")
    status, body = call(base, "/completion", {"prompt": PROMPT, "n_predict": 20,
                                              "temperature": 0.9, "top_k": 20, "min_p": 0.1,
                                              "seed": 77})
    check(body.get("content") == want, "seeded draw %r vs run's %r" % (body.get("content"), want))


def test_constraints(base):
    """Grammar, JSON schema and response_format hold the output to their language."""
    status, body = call(base, "/completion", {"prompt": PROMPT, "n_predict": 8,
                                              "grammar": 'root ::= "yes" | "no"'})
    check(status == 200 and body["content"] in ("yes", "no") and body["stop_type"] == "eos",
          "grammar: %s" % body)
    schema = {"type": "object", "properties": {"answer": {"type": "string",
                                                          "enum": ["yes", "no"]}},
              "required": ["answer"]}
    for what, extra in [("json_schema", {"json_schema": schema}),
                        ("response_format", {"response_format": {
                            "type": "json_schema", "json_schema": {"name": "a", "schema": schema}}})]:
        status, body = call(base, "/v1/completions", dict({"prompt": PROMPT, "max_tokens": 30},
                                                          **extra))
        text = body["choices"][0]["text"] if status == 200 else ""
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        check(isinstance(parsed, dict) and parsed.get("answer") in ("yes", "no"),
              "%s: %r" % (what, text))
    status, body = call(base, "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Name a number."}], "max_tokens": 60,
        "response_format": {"type": "json_schema", "json_schema": {"schema": {
            "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}})
    text = body["choices"][0]["message"]["content"] if status == 200 else ""
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    check(isinstance(parsed, dict) and isinstance(parsed.get("n"), int), "chat schema %r" % text)
    for what, extra, param in [
            ("bad grammar", {"grammar": "root ::= ("}, "grammar"),
            ("two constraints", {"grammar": 'root ::= "a"', "json_schema": {}}, "grammar"),
            ("bad response_format", {"response_format": {"type": "xml"}}, "response_format")]:
        status, body = call(base, "/v1/completions", dict({"prompt": "a"}, **extra))
        check(error_of(status, body, 400, param), "%s: %s %s" % (what, status, body))


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}},
                   "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
                                                                            "properties": {}}}}


def test_tools(base):
    """Tools rendered by the template (Qwen3's, Hermes syntax); tool_choice required or named
    makes the model write a call, returned as tool_calls, whole or streamed."""
    msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
    status, body = call(base, "/apply-template", {"messages": msgs, "tools": [WEATHER]})
    check(status == 200 and "get_weather" in body.get("prompt", "") and
          "<tools>" in body["prompt"], "tools rendered: %s" % str(body)[:300])
    for choice, name in [("required", None), ({"type": "function",
                                               "function": {"name": "get_time"}}, "get_time")]:
        status, body = call(base, "/v1/chat/completions", {
            "messages": msgs, "tools": [WEATHER, TIME], "tool_choice": choice, "max_tokens": 80,
            "temperature": 0})
        c = body["choices"][0] if status == 200 else {}
        calls = c.get("message", {}).get("tool_calls") or []
        check(c.get("finish_reason") == "tool_calls" and len(calls) == 1 and
              calls[0]["type"] == "function" and calls[0]["id"].startswith("call_") and
              (name is None or calls[0]["function"]["name"] == name),
              "tool_choice %s: %s" % (choice, body))
        if calls:
            args = json.loads(calls[0]["function"]["arguments"])
            check(isinstance(args, dict) and (calls[0]["function"]["name"] != "get_weather" or
                                              isinstance(args.get("city"), str)),
                  "arguments follow the schema: %s" % args)
    status, ctype, events = stream(base, {"messages": msgs, "tools": [WEATHER],
                                          "tool_choice": "required", "max_tokens": 80,
                                          "temperature": 0}, path="/v1/chat/completions")
    chunks = [json.loads(e) for e in events[:-1]]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    calls = [d["tool_calls"] for d in deltas if "tool_calls" in d]
    check(events[-1] == "[DONE]" and len(calls) == 1 and
          calls[0][0]["function"]["name"] == "get_weather" and calls[0][0]["index"] == 0 and
          chunks[-1]["choices"][0]["finish_reason"] == "tool_calls", "streamed call: %s" % events)
    # a conversation that carries the call and its result renders and goes on
    status, body = call(base, "/v1/chat/completions", {
        "messages": msgs + [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],
        "tools": [WEATHER], "max_tokens": 4, "temperature": 0})
    check(status == 200, "a tool result: %s %s" % (status, body))
    status, body = call(base, "/apply-template", {"messages": msgs[:0] + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}]})
    check(status == 200 and '{"name": "get_weather", "arguments": {"city": "Paris"}}' in
          body.get("prompt", ""), "arguments rendered as an object: %s" % body)
    status, body = call(base, "/v1/chat/completions", {
        "messages": msgs, "tools": [WEATHER], "tool_choice": "none", "max_tokens": 4})
    check(status == 200 and "tool_calls" not in body["choices"][0]["message"], "tool_choice none")
    for what, extra, param in [
            ("tools not an array", {"tools": {"a": 1}}, "tools"),
            ("tool without a name", {"tools": [{"type": "function", "function": {}}]}, "tools"),
            ("unknown function", {"tools": [WEATHER], "tool_choice": {
                "type": "function", "function": {"name": "nope"}}}, "tool_choice"),
            ("bad tool_choice", {"tools": [WEATHER], "tool_choice": "always"}, "tool_choice")]:
        status, body = call(base, "/v1/chat/completions", dict({"messages": msgs}, **extra))
        check(error_of(status, body, 400, param), "%s: %s %s" % (what, status, body))


def test_state(base, slots):
    """/props, /apply-template, /slots; /metrics counts exactly the tokens generated so far."""
    status, body = call(base, "/props")
    check(status == 200 and body["total_slots"] == slots and
          body["default_generation_settings"]["n_ctx"] == 1024 // slots and
          "<|im_start|>" in body["chat_template"], "props: %s" % str(body)[:200])
    status, body = call(base, "/slots")
    check(status == 200 and len(body) == slots and
          all(s["n_ctx"] == 1024 // slots and s["is_processing"] is False for s in body),
          "slots: %s" % body)
    metrics = urllib.request.urlopen(base + "/metrics").read().decode()
    values = dict(l.split(" ", 1) for l in metrics.splitlines() if not l.startswith("#"))
    check(all(k in values for k in ("llamacpp:prompt_tokens_total", "llamacpp:kv_cache_tokens",
                                    "llamacpp:requests_processing", "llamacpp:requests_deferred")),
          "metrics: %s" % metrics[:300])
    return int(float(values.get("llamacpp:tokens_predicted_total", "-1")))


def test_keep_alive(base):
    """One connection carries a stream and then a whole answer (HTTP/1.1 keep-alive)."""
    import http.client
    host, port = base[len("http://"):].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    conn.request("POST", "/v1/completions", json.dumps(
        {"prompt": PROMPT, "max_tokens": 5, "temperature": 0, "stream": True}))
    r = conn.getresponse()
    streamed = r.read().decode()
    sock = conn.sock
    conn.request("POST", "/v1/completions", json.dumps(
        {"prompt": PROMPT, "max_tokens": 5, "temperature": 0}))
    r2 = conn.getresponse()
    body = json.loads(r2.read())
    check(r.status == 200 and streamed.endswith("data: [DONE]\n\n") and r2.status == 200 and
          sock is not None and conn.sock is sock and
          body["choices"][0]["text"] == "".join(
              json.loads(e[6:])["choices"][0]["text"] for e in streamed.split("\n\n")
              if e.startswith("data: {")), "keep-alive: %s %s" % (r2.status, body))
    conn.close()


def test_errors(base):
    cases = [
        ("n 2", {"prompt": "a", "n": 2}, "n"),
        ("presence_penalty 3", {"prompt": "a", "presence_penalty": 3}, "presence_penalty"),
        ("top_k -1", {"prompt": "a", "top_k": -1}, "top_k"),
        ("seed a string", {"prompt": "a", "seed": "x"}, "seed"),
        ("logprobs 9", {"prompt": "a", "logprobs": 9}, "logprobs"),
        ("stop a number", {"prompt": "a", "stop": 5}, "stop"),
        ("17 stops", {"prompt": "a", "stop": ["x%d" % i for i in range(17)]}, "stop"),
        ("logit_bias 200", {"prompt": "a", "logit_bias": {"5": 200}}, "logit_bias"),
        ("logit_bias bad id", {"prompt": "a", "logit_bias": {"-3": 1}}, "logit_bias"),
        ("prompt of floats", {"prompt": [1.5]}, "prompt"),
        ("echo a string", {"prompt": "a", "echo": "yes"}, "echo"),
    ]
    for what, body, param in cases:
        status, reply = call(base, "/v1/completions", body)
        check(error_of(status, reply, 400, param), "%s: %s %s" % (what, status, reply))
    # a long prompt leaves a few dozen tokens of the slot's 512 (the cap, not the generating,
    # is what is checked: 500 tokens take minutes in the sanitizer build)
    status, reply = call(base, "/v1/completions", {"prompt": "a" + " a" * 480, "max_tokens": 10 ** 6})
    used = reply.get("usage", {}) if status == 200 else {}
    total = used.get("prompt_tokens", 0) + used.get("completion_tokens", 0)
    full = status == 200 and reply["choices"][0]["finish_reason"] == "length"
    check(status == 200 and 480 < used.get("prompt_tokens", 0) < 512 and
          (total == 513 if full else total <= 513),  # the last token sampled takes no cell
          "max_tokens past the context is capped by it: %s %s" % (status, used))
    status, reply = call(base, "/completion", {"prompt": "a", "n_predict": -2})
    check(error_of(status, reply, 400, "n_predict"), "n_predict -2: %s" % status)
    for what, raw in [("invalid UTF-8", b'{"prompt": "\xff\xfe"}'),
                      ("nested 100 deep", b'{"prompt": ' + b"[" * 100 + b"]" * 100 + b"}"),
                      ("a NUL in a string", b'{"prompt": "a\\u0000b"}')]:
        status, reply = call(base, "/v1/completions", raw=raw)
        check(error_of(status, reply, 400), "%s: %s %s" % (what, status, reply))
    status, reply = call(base, "/v1/completions", {"prompt": "a", "max_tokens": 3, "echo": True,
                                                   "temperature": 0})
    check(status == 200 and reply["choices"][0]["text"].startswith("a"), "echo: %s" % reply)
    check(call(base, "/health")[0] == 200, "healthy after the errors")


def test_loading():
    """/health answers 503 while the model loads (here: a pipe nobody writes yet)."""
    fifo = os.path.join(tempfile.mkdtemp(), "model.gguf")
    os.mkfifo(fifo)
    p = subprocess.Popen([OXIDIZE, "serve", "-m", fifo, "--port", "0"], stderr=subprocess.PIPE,
                         text=True)
    line = p.stderr.readline()
    port = line.split("http://127.0.0.1:")[1].split(",")[0] if "http://" in line else None
    status, body = call("http://127.0.0.1:%s" % port, "/health") if port else (0, {})
    check(error_of(status, body, 503) and body["error"]["message"] == "Loading model",
          "health while loading: %s %s" % (status, body))
    status, body = call("http://127.0.0.1:%s" % port, "/v1/models") if port else (0, {})
    check(status == 503, "other routes while loading: %s" % status)
    with open(fifo, "wb") as f:  # an empty file: the load fails and the server says so
        f.write(b"")
    rc = p.wait(timeout=30)
    check(rc == 1 and "oxidize serve:" in p.stderr.read(), "a failed load exits 1: %s" % rc)
    os.unlink(fifo)


def test_embeddings():
    """/v1/embeddings: what `oxidize embed` prints, as floats or base64; its errors; 501 without
    --embeddings (the main server of this test)."""
    p, base = start(MODEL, "-np", "1", "-c", "128", "--embeddings", "--pooling", "last")
    try:
        texts = ["In the beginning", "And God said, Let there be light"]
        status, body = call(base, "/v1/embeddings", {"input": texts})
        cli = [json.loads(subprocess.run([OXIDIZE, "embed", "-m", MODEL, "-p", t, "--pooling",
                                          "last", "-t", "2"], capture_output=True,
                                         text=True).stdout) for t in texts]
        got = [d["embedding"] for d in body["data"]] if status == 200 else []
        check(len(got) == 2 and all(len(g) == len(c) == 288 and
                                    max(abs(a - b) for a, b in zip(g, c)) < 1e-6
                                    for g, c in zip(got, cli)) and
              body["usage"]["prompt_tokens"] > 5 and body["data"][1]["index"] == 1,
              "embeddings equal oxidize embed's: %s" % str(body)[:200])
        status, b64 = call(base, "/v1/embeddings", {"input": texts[0],
                                                    "encoding_format": "base64"})
        raw = base64.b64decode(b64["data"][0]["embedding"]) if status == 200 else b""
        floats = list(struct.unpack("<%df" % (len(raw) // 4), raw))
        check(got and len(floats) == 288 and max(abs(a - b) for a, b in zip(floats, got[0])) < 1e-7,
              "base64 embeddings decode to the floats")
        status, tok = call(base, "/tokenize", {"content": texts[0], "add_special": True})
        status, body = call(base, "/v1/embeddings", {"input": tok["tokens"]})
        check(status == 200 and got and max(abs(a - b) for a, b in zip(
            body["data"][0]["embedding"], got[0])) < 1e-6, "token ids embed as their text")
        for what, inp, extra in [("empty list", [], {}), ("a number", 5, {}),
                                 ("past the context", "and " * 300, {}),
                                 ("a token out of range", [[10 ** 7]], {}),
                                 ("bad encoding", "a", {"encoding_format": "hex"})]:
            status, body = call(base, "/v1/embeddings", dict({"input": inp}, **extra))
            check(error_of(status, body, 400), "embeddings %s: %s %s" % (what, status, body))
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)


def test_key_file():
    keys = os.path.join(tempfile.mkdtemp(), "keys")
    with open(keys, "w") as f:
        f.write("first-key\n\nsecond-key\n")
    p, base = start(MODEL, "-np", "1", "-c", "64", "--api-key-file", keys)
    try:
        check(call(base, "/v1/models", key="first-key")[0] == 200 and
              call(base, "/v1/models", key="second-key")[0] == 200 and
              call(base, "/v1/models", key="third-key")[0] == 401 and
              call(base, "/slots")[0] == 401 and call(base, "/metrics")[0] == 401,
              "keys from a file")
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
    os.unlink(keys)


def main():
    p, base = start(MODEL, "-np", "2", "-c", "1024", "--chat-template", QWEN3)
    try:
        before = test_state(base, 2)
        check(before == 0, "no tokens generated yet: %s" % before)
        greedy(base, 7)
        greedy(base, 5, stream=False, echo=False)
        after = test_state(base, 2)
        check(after == before + 12, "metrics count the 12 tokens: %d -> %d" % (before, after))
        test_native(base)
        test_stop(base)
        test_logprobs(base)
        test_sampling(base)
        test_constraints(base)
        test_tools(base)
        test_errors(base)
        test_keep_alive(base)
        status, body = call(base, "/v1/embeddings", {"input": "a"})
        check(error_of(status, body, 501), "embeddings without --embeddings: %s" % status)
    finally:
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=30)
    check(rc == 0, "SIGTERM: exit status %s" % rc)
    test_loading()
    test_embeddings()
    test_key_file()
    return finish("test_serve_api")


if __name__ == "__main__":
    sys.exit(main())
