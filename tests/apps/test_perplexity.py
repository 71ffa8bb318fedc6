#!/usr/bin/env python3
"""test_perplexity.py: `oxidize perplexity` against llama-perplexity's value on the held-out
Book of Revelation for kjv-15m, its per-chunk output, batch splitting, and its errors.

usage: test_perplexity.py PATH/TO/oxidize   (reference data from $OX_TESTDATA)
"""
import os
import re
import subprocess
import sys
import tempfile

OXIDIZE = sys.argv[1]
REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DATA = os.environ.get("OX_TESTDATA") or os.path.join(REPO, "..", "shared", "testdata")
MODEL = os.path.join(DATA, "models", "kjv-15m-q4_k_m.gguf")
TEXT = os.path.join(DATA, "text", "kjv-revelation.txt")
# llama-perplexity -c 256 -b 256 on this model and text (testdata/README.md, "text/").
LLAMA_PPL, LLAMA_CHUNKS = 50.3183, 61
checks = failures = 0


def check(cond, what):
    global checks, failures
    checks += 1
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def run(*args):
    return subprocess.run([OXIDIZE, "perplexity", *args], capture_output=True)


def parse(stdout):
    """The running estimates [(chunk, ppl), ...] and the final (ppl, error), or None."""
    text = stdout.decode()
    chunks = [(int(i), float(p)) for i, p in re.findall(r"\[(\d+)\]([0-9.]+),", text)]
    m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", text)
    return chunks, (float(m.group(1)), float(m.group(2))) if m else None


def test_reference():
    r = run("-m", MODEL, "-f", TEXT, "-c", "256", "-b", "256")
    check(r.returncode == 0, "full run exit %d: %r" % (r.returncode, r.stderr[-400:]))
    chunks, final = parse(r.stdout)
    check(final is not None, "no final estimate in %r" % r.stdout[-200:])
    if final is None:
        return
    ppl, err = final
    check(abs(ppl / LLAMA_PPL - 1) < 0.005, "PPL %.4f vs llama.cpp %.4f" % (ppl, LLAMA_PPL))
    check(0.5 < err < 5, "standard error %.5f not near llama.cpp's 1.87" % err)
    check([c for c, _ in chunks] == list(range(1, LLAMA_CHUNKS + 1)),
          "chunks %s, want 1..%d" % ([c for c, _ in chunks][-3:], LLAMA_CHUNKS))
    check(chunks and abs(chunks[-1][1] - ppl) < 1e-3, "last running value %s != final %.4f"
          % (chunks[-1:], ppl))
    check(b"tokens/s" in r.stderr, "no speed on stderr: %r" % r.stderr[-300:])


def test_batching(tmp):
    """Cutting a chunk into several decodes, or decoding chunks side by side, scores the same
    tokens with the same context: the estimates must agree. Not bit for bit: like llama.cpp's
    CPU backend, decodes of 64+ tokens take a tiled f32 attention while smaller ones round
    like its one-chunk flash attention (f16 accumulators), which moves this 6-chunk estimate
    by about 0.3%."""
    short = os.path.join(tmp, "short.txt")
    with open(TEXT, "rb") as f, open(short, "wb") as g:
        g.write(f.read(1500))
    results = {}
    for b in ("64", "16", "24", "128"):  # whole, 4 slices, uneven slices, 2 chunks at once
        r = run("-m", MODEL, "-f", short, "-c", "64", "-b", b)
        results[b] = parse(r.stdout) if r.returncode == 0 else None
        check(r.returncode == 0, "-b %s exit %d: %r" % (b, r.returncode, r.stderr[-300:]))
    base = results["64"]
    for b, got in results.items():
        if base and got and base[1] and got[1]:
            same = len(got[0]) == len(base[0]) and all(
                abs(x[1] / y[1] - 1) < 5e-3 for x, y in zip(got[0], base[0]))
            check(same and abs(got[1][0] / base[1][0] - 1) < 5e-3,
                  "-b %s: %s vs -b 64: %s" % (b, got, base))


def test_errors(tmp):
    short = os.path.join(tmp, "tiny.txt")
    with open(TEXT, "rb") as f, open(short, "wb") as g:
        g.write(f.read(2000))  # about 500 tokens: less than 2 x 512
    r = run("-m", MODEL, "-f", short)
    check(r.returncode == 1 and b"at least 1024 tokens" in r.stderr,
          "too-short text -> %d %r" % (r.returncode, r.stderr[-300:]))
    missing = os.path.join(tmp, "none.gguf")
    for args, code, why in ((["-m", missing, "-f", TEXT], 1, b"none.gguf"),
                            (["-m", MODEL, "-f", os.path.join(tmp, "none.txt")], 1, b"none.txt"),
                            (["-m", MODEL, "-f", TEXT, "-c", "abc"], 2, b"-c"),
                            (["-m", MODEL, "-f", TEXT, "-c", "0"], 2, b"-c"),
                            (["-m", MODEL, "-f", TEXT, "-c", "256", "-b", "300"], 2, b"multiple"),
                            (["-m", MODEL, "-f", TEXT, "-t", "0"], 2, b"-t"),
                            (["-m", MODEL], 2, b"need -m"),
                            (["-m", MODEL, "-f", TEXT, "--bogus"], 2, b"unknown option")):
        r = run(*args)
        check(r.returncode == code and why in r.stderr,
              "%s -> %d %r" % (args, r.returncode, r.stderr[-300:]))
    r = run("--help")
    check(r.returncode == 0 and b"usage: oxidize perplexity" in r.stdout, "--help")


def main():
    # --quick (the sanitizer build): the full 61-chunk run is release-only; the reference
    # ops under ASan would take many minutes
    quick = "--quick" in sys.argv[2:]
    with tempfile.TemporaryDirectory() as tmp:
        test_errors(tmp)
        test_batching(tmp)
        if not quick:
            test_reference()
    print("test_perplexity: %d checks, %d passed, %d failed" % (checks, checks - failures, failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
