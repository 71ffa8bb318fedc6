#!/usr/bin/env python3
"""test_tokenize.py: `oxidize tokenize` against llama.cpp's expected ids for every shared
vocabulary (through -p and -f), its output formats, and its errors.

usage: test_tokenize.py PATH/TO/oxidize   (reference data from $OX_TESTDATA)
"""
import json
import os
import subprocess
import sys
import tempfile

OXIDIZE = sys.argv[1]
REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DATA = os.environ.get("OX_TESTDATA") or os.path.join(REPO, "..", "shared", "testdata")
VOCAB = os.path.join(DATA, "vocab")
checks = failures = 0


def check(cond, what):
    global checks, failures
    checks += 1
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def run(*args):
    return subprocess.run([OXIDIZE, "tokenize", *args], capture_output=True)


def cases(vocab):
    with open(os.path.join(VOCAB, vocab + ".inp"), "rb") as f:
        inputs = f.read().split(b"\n__ggml_vocab_test__\n")[:-1]
    with open(os.path.join(VOCAB, vocab + ".out")) as f:
        expected = [[int(x) for x in line.split()] for line in f.read().split("\n")]
    return list(zip(inputs, expected))


def test_vocabularies(tmp):
    for vocab in sorted(v for v in os.listdir(VOCAB) if v.endswith(".gguf")):
        path = os.path.join(VOCAB, vocab)
        for i, (text, ids) in enumerate(cases(vocab)[:12]):
            if b"\0" in text or text.startswith(b"-"):
                continue
            if i % 2 == 0:  # every other case through a file, so any bytes survive
                f = os.path.join(tmp, "in.txt")
                with open(f, "wb") as h:
                    h.write(text)
                r = run("-m", path, "--no-bos", "--ids", "-f", f)
            else:
                r = run("-m", path, "--no-bos", "--ids", "-p", text)
            got = json.loads(r.stdout) if r.returncode == 0 else None
            check(got == ids, "%s case %d %r: %s != %s" % (vocab, i, text[:30], got, ids))


def test_formats():
    model = os.path.join(DATA, "models", "kjv-15m-q4_k_m.gguf")
    r = run("-m", model, "-p", "In the beginning")
    lines = r.stdout.decode().splitlines()
    check(r.returncode == 0 and lines[0].split() == ["1", "->", "'<s>'"], "BOS line: %r" % lines[:1])
    check(lines[1].split("->")[1].strip() == "' In'", "piece line: %r" % lines[1:2])
    r = run("-m", model, "-p", "a\tb\nc", "--no-bos")
    check(b"'\\t'" in r.stdout or b"\\t" in r.stdout, "control bytes escaped: %r" % r.stdout)
    spm = os.path.join(VOCAB, "ggml-vocab-phi-3.gguf")
    plain = json.loads(run("-m", spm, "--ids", "--no-bos", "-p", "<|end|>").stdout)
    special = json.loads(run("-m", spm, "--ids", "--no-bos", "--parse-special", "-p", "<|end|>").stdout)
    check(special == [32007] and len(plain) > 1, "--parse-special: %s vs %s" % (special, plain))


def test_errors(tmp):
    model = os.path.join(DATA, "models", "kjv-15m-q4_k_m.gguf")
    for args, code, why in ((["-p", "x"], 2, "need -m"), (["-m", model], 2, "exactly one"),
                            (["-m", model, "-p", "x", "-f", "y"], 2, "exactly one"),
                            (["-m", model, "--bogus"], 2, "unknown option"),
                            (["-m", os.path.join(tmp, "none.gguf"), "-p", "x"], 1, "none.gguf"),
                            (["-m", model, "-f", os.path.join(tmp, "none.txt")], 1, "none.txt")):
        r = run(*args)
        check(r.returncode == code and why.encode() in r.stderr,
              "%s -> %d %r" % (args, r.returncode, r.stderr))
    bad = os.path.join(tmp, "bad.gguf")
    with open(bad, "wb") as f:
        f.write(b"GGUF\x03\x00\x00\x00" + b"\xff" * 40)
    r = run("-m", bad, "-p", "x")
    check(r.returncode == 1 and r.stderr.startswith(b"oxidize tokenize: gguf:"), "malformed file")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_vocabularies(tmp)
        test_formats()
        test_errors(tmp)
    print("test_tokenize: %d checks, %d passed, %d failed" % (checks, checks - failures, failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
