#!/usr/bin/env python3
"""test_lora.py: LoRA adapters from the command line and the server (tests/data/lora's, on the
shared llama-f16 model; test_lora.c checks their logits against llama.cpp's): `run --lora` and
`--lora-scaled` change the text as they should (scale 0 is the plain model, 1 the same as
--lora), bench and perplexity take them, `export-lora` merges them into a model that writes
the same text, bad ones are refused with a message; `serve --lora`
answers with them, GET /lora-adapters lists them, POST /lora-adapters rescales them (all off:
the plain model's text again), a request's own "lora" field runs it with those (requests
with different sets at once each get theirs), bad bodies get 400."""
import os
import subprocess
import tempfile
import threading

from apptest import DATA, OXIDIZE, REPO, check, finish
from test_serve import call, start

MODEL = os.path.join(DATA, "models", "llama-f16.gguf")
F32 = os.path.join(REPO, "tests", "data", "lora", "llama-lora-f32.gguf")
F16 = os.path.join(REPO, "tests", "data", "lora", "llama-lora-f16.gguf")
PROMPT = "Once upon a time, there was a little robot who"


def run(*args):
    """(exit status, stdout, stderr) of `oxidize run` greedy on the model."""
    p = subprocess.run([OXIDIZE, "run", "-m", MODEL, "-p", PROMPT, "-n", "12", "--temp", "0",
                        "-ngl", "0", "-t", "2"] + list(args), capture_output=True)
    # a random model's text need not be UTF-8: compared as the server's JSON would carry it
    out = p.stdout.decode("utf-8", "replace").removesuffix("\n")  # run ends its text with one
    return p.returncode, out, p.stderr.decode("utf-8", "replace")


def test_cli():
    rc, plain, _ = run()
    check(rc == 0 and plain.startswith(PROMPT), "plain run: %d %r" % (rc, plain))
    rc, one, err = run("--lora", F32)
    check(rc == 0 and one != plain, "--lora changes the text: %d %r %s" % (rc, one, err))
    rc, same, _ = run("--lora-scaled", F32, "1.0")
    check(rc == 0 and same == one, "--lora-scaled 1.0 is --lora: %r vs %r" % (same, one))
    rc, off, _ = run("--lora-scaled", F32, "0")
    check(rc == 0 and off == plain, "scale 0 is the plain model: %r vs %r" % (off, plain))
    rc, both, _ = run("--lora-scaled", F32, "0.5", "--lora", F16)
    check(rc == 0 and both not in (plain, one), "two adapters: %r" % both)
    rc, _, err = run("--lora", "/no/such/adapter.gguf")
    check(rc == 1 and "/no/such/adapter.gguf" in err, "missing adapter: %d %s" % (rc, err))
    rc, _, err = run("--lora", MODEL)
    check(rc == 1 and "not an adapter" in err, "a model as adapter: %d %s" % (rc, err))
    rc, _, err = run("--lora-scaled", F32, "lots")
    check(rc == 2 and "bad scale" in err, "bad scale: %d %s" % (rc, err))
    rc, _, err = run("--lora")
    check(rc == 2 and "missing value" in err, "--lora without a file: %d %s" % (rc, err))
    p = subprocess.run([OXIDIZE, "bench", "-m", MODEL, "-p", "16", "-n", "4", "-r", "1", "-ngl", "0",
                        "--lora", F32], capture_output=True, text=True)
    check(p.returncode == 0 and "tg4" in p.stdout, "bench --lora: %s %s" % (p.stdout, p.stderr))
    merged = os.path.join(tempfile.mkdtemp(prefix="ox-lora-"), "merged.gguf")
    p = subprocess.run([OXIDIZE, "export-lora", "-m", MODEL, "--lora", F32, "-o", merged],
                       capture_output=True, text=True)
    check(p.returncode == 0 and os.path.exists(merged), "export-lora: %s %s" % (p.stdout, p.stderr))
    q = subprocess.run([OXIDIZE, "run", "-m", merged, "-p", PROMPT, "-n", "12", "--temp", "0",
                        "-t", "2"], capture_output=True)
    got = q.stdout.decode("utf-8", "replace").removesuffix("\n")
    check(q.returncode == 0 and got == one, "the merged model's text: %r vs %r" % (got, one))
    p = subprocess.run([OXIDIZE, "export-lora", "-m", MODEL, "-o", merged], capture_output=True,
                       text=True)
    check(p.returncode == 2 and "--lora" in p.stderr, "export-lora without adapters: %s" % p.stderr)
    text = os.path.join(DATA, "text", os.listdir(os.path.join(DATA, "text"))[0])
    ppl = []
    for extra in ([], ["--lora", F32]):
        p = subprocess.run([OXIDIZE, "perplexity", "-m", MODEL, "-f", text, "-c", "128", "-t",
                            "2"] + extra, capture_output=True, text=True)
        ppl.append(p.stdout.split("Final estimate")[-1] if p.returncode == 0 else None)
    check(ppl[0] and ppl[1] and ppl[0] != ppl[1], "perplexity --lora: %s" % ppl)
    return plain, one


def test_server(plain, one):
    p, base = start(MODEL, "-ngl", "0", "-np", "2", "-c", "1024", "--lora", F32,
                    "--lora-scaled", F16, "0.5")
    try:
        status, body = call(base, "/lora-adapters")
        check(status == 200 and [a["id"] for a in body] == [0, 1] and body[0]["path"] == F32
              and body[0]["scale"] == 1.0 and body[1]["scale"] == 0.5, "list: %s %s" % (status, body))

        def complete():
            status, body = call(base, "/completion",
                                {"prompt": PROMPT, "n_predict": 12, "temperature": 0})
            return PROMPT + body.get("content", "") if status == 200 else None

        status, _ = call(base, "/lora-adapters", [{"id": 0, "scale": 1.0}])  # F16 left out: 0
        check(status == 200, "set one: %s" % status)
        got = complete()
        check(got == one, "served with --lora's adapter alone: %r vs %r" % (got, one))
        status, body = call(base, "/lora-adapters", [{"id": 0, "scale": 0}, {"id": 1, "scale": 0}])
        check(status == 200 and body == {"success": True}, "all off: %s %s" % (status, body))
        status, body = call(base, "/lora-adapters")
        check([a["scale"] for a in body] == [0, 0], "scales now: %s" % body)
        got = complete()
        check(got == plain, "adapters off, the plain model: %r vs %r" % (got, plain))
        for bad in ({"id": 0}, [{"id": 7, "scale": 1}], [{"id": 0, "scale": "x"}],
                    [{"scale": 1}], [{"id": 0, "scale": 1e9}]):
            status, body = call(base, "/lora-adapters", bad)
            check(status == 400 and "error" in body, "bad body %s: %s %s" % (bad, status, body))
        # a request's own adapters (the server's now all at 0): alone, and beside a request
        # with others at once (a step runs one set: one waits for the other)
        def complete_with(lora, out, k):
            status, body = call(base, "/completion", {"prompt": PROMPT, "n_predict": 12,
                                                      "temperature": 0, "lora": lora})
            out[k] = PROMPT + body.get("content", "") if status == 200 else (status, body)

        got = {}
        complete_with([{"id": 0, "scale": 1}], got, "own")
        check(got["own"] == one, "a request's own adapter: %r vs %r" % (got["own"], one))
        rc, both, _ = run("--lora-scaled", F32, "0.5", "--lora-scaled", F16, "0.5")
        threads = [threading.Thread(target=complete_with, args=(lora, got, k)) for k, lora in
                   (("a", [{"id": 0, "scale": 1}]), ("b", []),
                    ("c", [{"id": 0, "scale": 0.5}, {"id": 1, "scale": 0.5}]))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        check(got["a"] == one and got["b"] == plain and got["c"] == both,
              "three requests with their own adapters at once: %r" % got)
        for bad in ({"id": 0}, [{"id": 9, "scale": 1}], [{"id": 0, "scale": None}]):
            status, body = call(base, "/completion", {"prompt": PROMPT, "n_predict": 2,
                                                      "lora": bad})
            check(status == 400 and "lora" in body["error"]["message"],
                  "bad per-request lora %s: %s %s" % (bad, status, body))
        status, _ = call(base, "/lora-adapters", method="DELETE")
        check(status == 405, "DELETE: %s" % status)
    finally:
        p.terminate()
        p.wait()


def main():
    plain, one = test_cli()
    test_server(plain, one)
    finish("test_lora")


if __name__ == "__main__":
    main()
