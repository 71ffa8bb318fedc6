#!/usr/bin/env python3
"""test_chat.py: `oxidize chat`, the interactive conversation: input forms, commands, KV-cache
reuse across turns (checked against a fresh process), stop strings, a full context, and Ctrl-C /
Ctrl-D on a real terminal.

usage: test_chat.py PATH/TO/oxidize   (reference data from $OX_TESTDATA)
"""
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import tempfile
import time

OXIDIZE = sys.argv[1]
REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DATA = os.environ.get("OX_TESTDATA") or os.path.join(REPO, "..", "shared", "testdata")
MODEL = os.path.join(DATA, "models", "kjv-15m-q4_k_m.gguf")
TEMPLATE = os.path.join(DATA, "chat", "templates", "Qwen-Qwen3-0.6B.jinja")
checks = failures = 0

STATS = re.compile(r"\[(\d+) tokens, [\d.]+ tokens/s \| prompt: (\d+) new tokens, [\d.]+ "
                   r"tokens/s, (\d+) reused\]")


def check(cond, what):
    global checks, failures
    checks += 1
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def chat(lines, *args, timeout=120):
    """Run a chat over a pipe with these input lines; returns (exit status, stdout, stderr)."""
    p = subprocess.run([OXIDIZE, "chat", "-m", MODEL, "--chat-template", TEMPLATE] + list(args),
                       input="".join(l + "\n" for l in lines).encode(), capture_output=True,
                       timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def load(path):
    with open(path) as f:
        return json.load(f)


def test_turns(tmp):
    """Three turns (plain, '\\'-continued and \"\"\"-wrapped input): the conversation is saved as
    typed, and each later turn processes only its new tokens."""
    conv = os.path.join(tmp, "conv.json")
    rc, out, err = chat(["And God said", "Who was Moses?\\", "Tell me.", '"""', "line one",
                         "line two", '"""', "/save " + conv], "-n", "24", "--temp", "0")
    check(rc == 0, "chat exit %d: %s" % (rc, err))
    msgs = load(conv)
    check([m["role"] for m in msgs] == ["user", "assistant"] * 3, "roles %s" % msgs)
    check([m["content"] for m in msgs[0::2]] ==
          ["And God said", "Who was Moses?\nTell me.", "line one\nline two"], "inputs %s" % msgs)
    check(all(m["content"].strip() for m in msgs[1::2]), "empty answers %s" % msgs)
    stats = [tuple(map(int, m)) for m in STATS.findall(err)]
    check(len(stats) == 3, "stats lines: %s" % err)
    if len(stats) == 3:
        check(all(s[0] == 24 for s in stats), "answers of -n 24 tokens: %s" % stats)
        check(stats[0][2] == 0, "first turn reuses nothing: %s" % stats)
        for i in (1, 2):  # everything before is reused: the last prompt and answer
            check(stats[i][2] == stats[i - 1][1] + stats[i - 1][2] + 24,
                  "turn %d reuses the cache: %s" % (i + 1, stats))
            check(0 < stats[i][1] < 60, "turn %d processes only its message: %s" % (i + 1, stats))
    for i, m in enumerate(msgs[1::2]):
        check(m["content"] in out, "answer %d printed" % i)
    return msgs


def test_fresh_equivalence(tmp, msgs):
    """Answering the third question with the cache built turn by turn gives the greedy answer a
    fresh process gives that loads the first two exchanges and processes them at once (its first
    words: the two round differently)."""
    first = os.path.join(tmp, "first.json")
    with open(first, "w") as f:
        json.dump(msgs[:4], f)
    conv = os.path.join(tmp, "conv2.json")
    rc, out, err = chat(["/load " + first, "line one\\", "line two", "/save " + conv], "-n", "24",
                        "--temp", "0")
    check(rc == 0 and "(loaded 4 messages" in out, "load: %d %s" % (rc, out))
    again = load(conv)
    check(again[:4] == msgs[:4], "loaded messages kept")
    # the history processed at once meets batch kernels that round unlike the token-at-a-time
    # ones (on an AVX2 build enough to flip a near-tie a few tokens in): the answers begin alike
    words = lambda m: m["content"].split()[:3]
    check(len(again) == 6 and again[5]["role"] == "assistant" and
          words(again[5]) == words(msgs[5]) and len(words(msgs[5])) == 3,
          "fresh answer %r vs incremental %r" % (again[-1], msgs[5]))
    stats = STATS.findall(err)
    check(len(stats) == 1 and int(stats[0][2]) == 0, "a fresh process reuses nothing: %s" % stats)


def test_state(tmp, msgs):
    """/save-state after two exchanges, then /load-state in a new process: the third answer is
    the one the first process gave (the cache is the same bits), and only the third message is
    processed; another model's state is not loaded, and the messages still are."""
    state = os.path.join(tmp, "state.json")
    rc, out, err = chat(["And God said", "Who was Moses?\\", "Tell me.", "/save-state " + state],
                        "-n", "24", "--temp", "0")
    check(rc == 0 and "(saved 4 messages and" in out and os.path.exists(state + ".kv"),
          "save-state: %d %s %s" % (rc, out, err))
    conv = os.path.join(tmp, "conv-state.json")
    rc, out, err = chat(["/load-state " + state, '"""', "line one", "line two", '"""',
                         "/save " + conv], "-n", "24", "--temp", "0")
    again = load(conv) if os.path.exists(conv) else []
    check(rc == 0 and "(loaded 4 messages and" in out and len(again) == 6 and
          again[5] == msgs[5], "load-state: %s vs %s (%s)" % (again[-1:], msgs[5], out))
    stats = [tuple(map(int, m)) for m in STATS.findall(err)]
    check(len(stats) == 1 and stats[0][2] > 20 and 0 < stats[0][1] < 60,
          "load-state reuses the cache: %s" % stats)
    other = os.path.join(DATA, "models", "llama-q8_0.gguf")
    p = subprocess.run([OXIDIZE, "chat", "-m", other, "--chat-template", TEMPLATE, "-n", "4"],
                       input=("/load-state %s\n" % state).encode(), capture_output=True, timeout=120)
    out = p.stdout.decode("utf-8", "replace")
    check(p.returncode == 0 and "(the state was not loaded:" in out and "another model" in out,
          "another model's state: %s" % out)


def test_reset_and_seed():
    """After /reset the same question gets the same sampled answer: the cache is cleared and
    the sampler restarts from its seed."""
    rc, out, err = chat(["In the beginning", "/reset", "In the beginning"], "-n", "20",
                        "--seed", "7")
    stats = STATS.findall(err)
    check(rc == 0 and len(stats) == 2, "reset run: %d %s" % (rc, err))
    answers = [l for l in out.split("\n") if l and not l.startswith("(")]
    check("(conversation reset)" in out, "reset acknowledged")
    check(len(answers) == 2 and answers[0] == answers[1], "same answer after reset: %s" % answers)
    if len(stats) == 2:
        check(stats[1][2] == "0", "nothing reused after reset: %s" % stats)


def test_system_and_stop(tmp):
    """-sys starts the conversation; /reset keeps it; --stop ends an answer before the string."""
    conv = os.path.join(tmp, "sys.json")
    rc, out, err = chat(["And God said", "/save " + conv], "-n", "24", "--temp", "0")
    full = load(conv)[1]["content"]
    word = "LORD"
    check(word in full, "the greedy answer has %r: %r" % (word, full))
    rc, out, err = chat(["And God said", "/reset", "/save " + conv], "-n", "24", "--temp", "0",
                        "-sys", "Be brief.", "--stop", word)
    msgs = load(conv)
    check(msgs == [{"role": "system", "content": "Be brief."}], "reset keeps the system prompt")
    rc, out, err = chat(["And God said", "/save " + conv], "-n", "24", "--temp", "0", "--stop",
                        word)
    msgs = load(conv)
    cut = full[:full.index(word)]
    check(msgs[1]["content"] == cut, "stop string: %r vs %r" % (msgs[1]["content"], cut))
    check(word not in out, "the stop string is not printed")


def test_full_context(tmp):
    """A small context drops the oldest exchange to make room; a message that cannot fit is
    refused and the chat goes on."""
    conv = os.path.join(tmp, "small.json")
    rc, out, err = chat(["And God said", "Moses went up", "unto the mount", "/save " + conv],
                        "-c", "96", "-n", "30", "--temp", "0")
    check(rc == 0, "small context exit %d" % rc)
    check("[dropped the 2 oldest messages" in err, "dropped messages: %s" % err)
    msgs = load(conv)
    check(msgs[0]["content"] != "And God said" and msgs[-2]["content"] == "unto the mount",
          "kept the latest: %s" % msgs)
    rc, out, err = chat(["And God said", "word " * 200, "/save " + conv], "-c", "96", "-n", "8")
    check(rc == 0 and "the context holds 96" in err, "too long a message: %d %s" % (rc, err))
    msgs = load(conv)
    check([m["content"] for m in msgs][:1] == ["And God said"] and len(msgs) == 2,
          "a refused message changes nothing: %s" % msgs)


def test_json_schema(tmp):
    """--json-schema constrains every answer (the grammar restarts with each one): both parse
    and satisfy the schema."""
    schema = {"type": "object", "additionalProperties": False, "required": ["name", "age"],
              "properties": {"name": {"type": "string", "maxLength": 12},
                             "age": {"type": "integer", "minimum": 1, "maximum": 120}}}
    conv = os.path.join(tmp, "json.json")
    rc, out, err = chat(["Who was Moses?", "And Aaron?", "/save " + conv], "-n", "200",
                        "--temp", "1.5", "--json-schema", json.dumps(schema))
    check(rc == 0, "json chat exit %d: %s" % (rc, err))
    for m in load(conv)[1::2]:
        try:
            v = json.loads(m["content"])
        except ValueError:
            v = None
        check(isinstance(v, dict) and sorted(v) == ["age", "name"] and
              isinstance(v["name"], str) and len(v["name"]) <= 12 and
              isinstance(v["age"], int) and 1 <= v["age"] <= 120, "schema answer %r" % m)


def test_errors(tmp):
    """A model without a template, bad options and bad files give clear messages."""
    p = subprocess.run([OXIDIZE, "chat", "-m", MODEL], input=b"hi\n", capture_output=True)
    check(p.returncode == 1 and b"no chat template" in p.stderr, "no template: %s" % p.stderr)
    p = subprocess.run([OXIDIZE, "chat", "-m", MODEL, "-n", "x"], capture_output=True)
    check(p.returncode == 2, "bad -n")
    p = subprocess.run([OXIDIZE, "chat"], capture_output=True)
    check(p.returncode == 2, "no model")
    bad = os.path.join(tmp, "bad.json")
    with open(bad, "w") as f:
        f.write('[{"role": "user"}]')
    rc, out, err = chat(["/load " + bad, "/load " + os.path.join(tmp, "missing.json"), "/load",
                         "/nope", "/help", "And God said"], "-n", "4")
    check(rc == 0, "errors are not fatal: %d" % rc)
    check('needs string "role" and "content"' in err and "cannot load" in err, "bad file: " + err)
    check("(/load needs a file name)" in out and "(unknown command /nope" in out, out)
    check("/save FILE" in out and len(STATS.findall(err)) == 1, "help and a last answer")


def read_until(fd, pattern, timeout=60):
    """Read a terminal until pattern appears; returns everything read."""
    buf, end = b"", time.time() + timeout
    while pattern not in buf and time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
    return buf


def test_terminal():
    """On a real terminal: a prompt, Ctrl-C stops a long answer and the chat goes on, Ctrl-C at
    the prompt does not exit, Ctrl-D exits with status 0."""
    pid, fd = pty.fork()
    if pid == 0:
        # No answer budget: the model talks until the 2048-token context is full (seconds).
        os.execv(OXIDIZE, [OXIDIZE, "chat", "-m", MODEL, "--chat-template", TEMPLATE, "-c",
                           "2048"])
    try:
        got = read_until(fd, b"> ")
        check(got.endswith(b"> "), "prompt shown: %r" % got[-200:])
        os.write(fd, b"And God said unto Moses\r")
        # The interrupt character flushes unread input, so wait for some of the answer first.
        got = read_until(fd, b"Moses\r\n", 30)
        got = read_until(fd, b"the", 30)
        check(b"the" in got, "an answer is streamed: %r" % got)
        os.write(fd, b"\x03")  # the terminal's interrupt character: SIGINT
        got = read_until(fd, b"> ")
        check(b"[interrupted]" in got and b"tokens/s" in got, "answer stopped: %r" % got[-300:])
        time.sleep(0.3)  # "> " is printed just before the read begins: let it begin
        os.write(fd, b"\x03")  # at the prompt: a new prompt, not an exit
        got = read_until(fd, b"> ")
        check(b"Ctrl-D or /exit" in got, "Ctrl-C at the prompt: %r" % got)
        os.write(fd, b"half a message\\\r")  # continued on a second line...
        read_until(fd, b"... ")
        time.sleep(0.3)
        os.write(fd, b"\x03")  # ...then dropped: no answer comes
        got = read_until(fd, b"> ")
        check(b"Ctrl-D or /exit" in got and b"tokens/s" not in got,
              "Ctrl-C drops a half-typed message: %r" % got[-300:])
        os.write(fd, b"\x04")  # Ctrl-D at the start of a line: end of input
        read_until(fd, b"never", 10)
    finally:
        status = 0
        for _ in range(100):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            status = -1
        os.close(fd)
    check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "exit on Ctrl-D: %r" % status)


def test_speculative():
    """--spec ngram and -md: three turns answer as plain decoding does, token for token, with the
    same tokens kept in the cache for each next turn (the same reuse); a stop string and the
    budget end answers as without."""
    turns = ["And the waters were as the waters", "And God said", "Who was Moses?"]
    base = ("-n", "40", "--temp", "0", "--stop", "Israel")
    rc, plain, err = chat(turns, *base)
    want = [tuple(map(int, m)) for m in STATS.findall(err)]
    check(rc == 0 and len(want) == 3, "plain: %s" % err)
    for spec in (("--spec", "ngram"), ("-md", MODEL, "--draft-max", "6")):
        rc, out, err = chat(turns, *(base + spec))
        got = [tuple(map(int, m)) for m in STATS.findall(err)]
        check(rc == 0 and out == plain, "%s: %r vs %r" % (spec, out[-80:], plain[-80:]))
        check(got == want, "%s: answers and reuse %s vs %s" % (spec, got, want))
        check("speculative:" in err and "accepted" in err, "%s: report %s" % (spec, err[-200:]))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        msgs = test_turns(tmp)
        if len(msgs) == 6:
            test_fresh_equivalence(tmp, msgs)
            test_state(tmp, msgs)
        test_reset_and_seed()
        test_system_and_stop(tmp)
        test_full_context(tmp)
        test_speculative()
        test_json_schema(tmp)
        test_errors(tmp)
        test_terminal()
    print("test_chat: %d checks, %d passed, %d failed" % (checks, checks - failures, failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
