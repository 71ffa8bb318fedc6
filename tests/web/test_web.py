#!/usr/bin/env python3
"""test_web.py: the browser build (make web) in headless Chromium (web_page.mjs drives it), against
the native build: the kjv model's greedy completion through the JavaScript API equals `oxidize run
--temp 0`, its tokens `oxidize tokenize`'s; stop strings, aborts (a loop left early, an
AbortSignal) and bad settings; the second load of a URL comes from the browser's storage; a
download cut short resumes with a Range request and gives the same text; a junk file, a truncated
one and a missing URL give errors and the worker goes on; a model split by tools/gguf-split loads
from its first part's URL and from its Files; a recurrent model (qwen35) gives the same tokens twice on
one prompt (its state starts anew rather than keeping a prefix); the demo page answers a chat sent with
Enter as the API's chat() does, shows tokens/s, and the answer is on its screenshot; no page
errors or unhandled rejections. Before the browser, the model tests built for node at wasm-simd:
test_reference (llama.cpp's logits, every reference model) and test_decode (the scalar level is
the native build's, tested there; OX_CPU_ISA=scalar runs these the same way by hand).
  test_web.py OXIDIZE_BINARY SITE_DIR NODE_TESTS_DIR"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "apps"))
from apptest import DATA, OXIDIZE, REPO, check, finish, npm_modules  # noqa: E402

MODEL = "kjv-15m-q4_k_m.gguf"
PROMPT = "And God said"
CUT = 1000000  # bytes the first download of /models/cut-once/ gets


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def native(*args):
    r = subprocess.run([OXIDIZE, *args], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "oxidize %s: %s" % (args[0], r.stderr[-1000:]))
    return r.stdout


def node_tests(folder):
    """The model tests built for node, at the levels the build has."""
    for name, isa in (("test_reference", "wasm-simd"), ("test_decode", "wasm-simd")):
        t0 = time.time()
        r = subprocess.run(["node", "--no-experimental-fetch",
                            os.path.join(folder, name + "_node.js")],
                           env=dict(os.environ, OX_CPU_ISA=isa, OX_TESTDATA=DATA),
                           capture_output=True, text=True, timeout=900)
        summary = [l for l in r.stdout.splitlines() if l.startswith(name + ":")]
        print("%s at %s: %s (%.0f s)" % (name, isa, summary[-1] if summary else "no summary",
                                          time.time() - t0))
        check(r.returncode == 0 and ("isa: " + isa in r.stdout or name != "test_reference"),
              "%s at %s: %s%s" % (name, isa, r.stdout[-3000:], r.stderr[-2000:]))


def main():
    site = sys.argv[2]
    node_tests(sys.argv[3])
    if not os.path.exists(os.path.join(site, "oxidize-core.wasm")):
        print("no browser build in %s (make web)" % site)
        return 1
    model_path = os.path.join(DATA, "models", MODEL)
    want_text = native("run", "-m", model_path, "-p", PROMPT, "-n", "24", "--temp", "0")
    want_tokens = json.loads(native("tokenize", "-m", model_path, "-p", PROMPT, "--ids"))
    # the models the page loads: kjv, and kjv split in 3 by gguf-split (beside the binary)
    models = tempfile.mkdtemp(prefix="ox-web-models-")
    os.symlink(model_path, os.path.join(models, MODEL))
    recurrent = os.path.join(REPO, "tests", "data", "arch", "models", "qwen35-f16.gguf")
    os.symlink(recurrent, os.path.join(models, "qwen35-f16.gguf"))
    splitter = os.path.join(os.path.dirname(os.path.abspath(OXIDIZE)), "..", "..", "tools",
                            "gguf-split")
    r = subprocess.run([splitter, "--split-max-size", "6M", model_path,
                        os.path.join(models, "kjv-split")], capture_output=True, text=True)
    check(r.returncode == 0 and r.stdout.count("\n") == 3, "gguf-split: %s%s" % (r.stdout, r.stderr))
    port = free_port()
    server = subprocess.Popen(["node", os.path.join(REPO, "web", "serve.mjs"), site, "--port",
                               str(port), "--models", models,
                               "--cut-once", str(CUT)], stdout=subprocess.PIPE, text=True)
    try:
        server.stdout.readline()  # "serving ..." once it listens
        modules = npm_modules("playwright-core", "playwright-core@1")
        shot = os.path.join(tempfile.mkdtemp(prefix="ox-web-"), "demo.png")
        t0 = time.time()
        r = subprocess.run(["node", os.path.join(REPO, "tests", "web", "web_page.mjs"), modules,
                            "http://127.0.0.1:%d" % port, MODEL, PROMPT, shot, "kjv-split"],
                           capture_output=True, text=True, timeout=600)
        print("the browser part took %.1f s" % (time.time() - t0))
        check(r.returncode == 0, "the page ran: %s" % r.stderr[-3000:])
        out = json.loads(r.stdout) if r.returncode == 0 else {}
    finally:
        server.terminate()
        server.wait(timeout=30)
    api = out.get("api", {})
    check(out.get("isolated") is True, "the page is cross-origin isolated")
    check(api.get("info", {}).get("description") == "llama 15.2M Q4_K_M", "info: %s" % api.get("info"))
    check(PROMPT + api.get("text", "") == want_text.rstrip("\n"),
          "greedy text: %r vs oxidize run's %r" % (api.get("text"), want_text))
    check(api.get("result", {}).get("tokens") == 24 and
          api.get("result", {}).get("finishReason") == "length", "result: %s" % api.get("result"))
    check(api.get("cachedAgain") == len(want_tokens) - 1, "prompt cached: %s" % api.get("cachedAgain"))
    fresh = api.get("freshResult", {})
    check(fresh.get("cachedTokens") == 0 and fresh.get("tokens") == 40 and
          fresh.get("finishReason") == "length", "cache_prompt false, ignore_eos: %s" % fresh)
    check(api.get("tokens") == want_tokens, "tokens %s vs %s" % (api.get("tokens"), want_tokens))
    check(api.get("detok") == " " + PROMPT, "detokenize: %r" % api.get("detok"))
    check(api.get("stopText") == " unto the " and
          api.get("stopResult", {}).get("finishReason") == "stop", "stop: %r %s" %
          (api.get("stopText"), api.get("stopResult")))
    check(api.get("twoStopText") == " ", "the earliest stop string: %r" % api.get("twoStopText"))
    check(api.get("staleSignal") == "abort", "an aborted signal aborts at once: %r" % api.get("staleSignal"))
    check(api.get("otherSignal") == "length", "another request's signal: %r" % api.get("otherSignal"))
    check(api.get("partsLeft") == [], "no parts kept without the cache: %s" % api.get("partsLeft"))
    check(api.get("abortResult", {}).get("finishReason") == "abort" and
          api.get("abortResult", {}).get("tokens", 99) <= 5, "abort: %s" % api.get("abortResult"))
    check(api.get("signalResult", {}).get("finishReason") == "abort", "signal: %s" %
          api.get("signalResult"))
    check(api.get("loadDuringRun") == "abort", "a load during a run: %r" % api.get("loadDuringRun"))
    check(api.get("badOption") == "option top_k: -3 is out of range", "bad option: %r" %
          api.get("badOption"))
    first, again = api.get("firstProgress", {}), api.get("againProgress", [])
    check(first.get("cached") is False and first.get("loaded") == os.path.getsize(model_path),
          "first load downloaded: %s" % first)
    check(len(again) == 1 and again[0].get("cached") is True, "second load cached: %s" % again)
    check(bool(api.get("cutError")), "the cut download failed: %r" % api.get("cutError"))
    check(0 < api.get("resumedFrom", -1) <= CUT, "resumed from %s" % api.get("resumedFrom"))
    check(api.get("resumedText") == api.get("text"), "resumed model's text %r" % api.get("resumedText"))
    check(api.get("splitParts") == ["1/3", "2/3", "3/3"], "split parts: %s" % api.get("splitParts"))
    check(api.get("splitText") == api.get("text") and api.get("splitFilesText") == api.get("text"),
          "split model's text: %r, from Files %r" % (api.get("splitText"), api.get("splitFilesText")))
    rec = api.get("recurrentTokens", [])
    check(len(rec) == 2 and len(rec[0]) == 8 and rec[0] == rec[1],
          "a recurrent model twice on one prompt: %s" % rec)
    check("bad magic" in (api.get("junkError") or ""), "junk: %r" % api.get("junkError"))
    check("past the end" in (api.get("halfError") or ""), "half: %r" % api.get("halfError"))
    check("HTTP 404" in (api.get("missingError") or ""), "missing: %r" % api.get("missingError"))
    check(api.get("fileInfo", {}).get("description") == "llama 15.2M Q4_K_M", "file load")
    check("unhandled" not in api, "unhandled rejection: %r" % api.get("unhandled"))
    # the demo page
    check((out.get("status") or "").startswith(MODEL + ": llama 15.2M"), "status: %r" % out.get("status"))
    check(out.get("user") == "Who made the light?", "user: %r" % out.get("user"))
    check(out.get("answer") and out.get("answer") == api.get("chatText"),
          "answer %r vs chat() %r" % (out.get("answer"), api.get("chatText")))
    check(re.fullmatch(r"[0-9.]+ tokens/s", out.get("speed") or "") is not None, "speed: %r" % out.get("speed"))
    check(out.get("answerVisible") is True and out.get("answerInk", 0) > 100,
          "answer on the screenshot: visible %s, %s dark pixels" % (out.get("answerVisible"), out.get("answerInk")))
    check(os.path.exists(shot) and open(shot, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "screenshot")
    check((out.get("badModelStatus") or "").startswith("Could not load the model:") and
          "HTTP 404" in out.get("badModelStatus"), "bad model on the page: %r" % out.get("badModelStatus"))
    check(out.get("errors") == [], "page errors: %s" % out.get("errors"))
    print("greedy text %r; demo %s" % (api.get("text"), out.get("speed")))
    return finish("test_web")


if __name__ == "__main__":
    sys.exit(main())
