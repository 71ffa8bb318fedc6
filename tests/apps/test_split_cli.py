#!/usr/bin/env python3
"""test_split_cli.py: the commands on a model split over ranks (-sm layer / row), the ranks as
host threads (OX_SPLIT_CPU_RANKS, which splits a model on the CPU as GPUs would split it): run
gives the unsplit model's greedy text, a prompt cache saved and reused by the split model gives
it too, bench runs batches of sequences, and the server answers concurrent streams as the
unsplit server does.

usage: test_split_cli.py PATH/TO/oxidize   (reference data from $OX_TESTDATA)
"""
import os
import subprocess
import sys
import tempfile
import threading

from apptest import DATA, OXIDIZE, check, finish
from test_serve import call, start

KJV = os.path.join(DATA, "models", "kjv-15m-q4_k_m.gguf")  # 6 layers
F32 = os.path.join(DATA, "models", "llama-f32.gguf")  # heads and FFN rows that split evenly
PROMPT = "In the beginning"


def run(model, *args, ranks=None):
    env = dict(os.environ, OX_SPLIT_CPU_RANKS=str(ranks)) if ranks else None
    r = subprocess.run([OXIDIZE, "run", "-m", model, "-ngl", "0", "-p", PROMPT, "-n", "24",
                        "--temp", "0", *args], capture_output=True, env=env)
    # the tiny test models write bytes that are not always UTF-8: compared as bytes
    r.stderr = r.stderr.decode(errors="replace")
    return r


def test_run():
    for model, mode, ranks in ((KJV, "layer", 3), (KJV, "layer", 2), (F32, "row", 2)):
        whole, split = run(model), run(model, "-sm", mode, ranks=ranks)
        check(whole.returncode == 0 and split.returncode == 0 and whole.stdout == split.stdout,
              "%s by %s over %d: %r against %r (%s)" % (os.path.basename(model), mode, ranks,
                                                        split.stdout, whole.stdout,
                                                        split.stderr[-200:]))
        check("x %d)" % ranks in split.stderr, "the backend says the split: %s" % split.stderr)
    bad = run(KJV, "-sm", "layer", ranks="x")
    check(bad.returncode == 1 and "OX_SPLIT_CPU_RANKS" in bad.stderr, "bad OX_SPLIT_CPU_RANKS")
    # more ranks than layers: by layers (llama-cpp-python's default) the model runs unsplit;
    # by rows a model whose columns would cut quantization blocks is refused
    whole, seven = run(KJV), run(KJV, "-sm", "layer", ranks=7)
    check(seven.returncode == 0 and seven.stdout == whole.stdout and "(CPU)" in seven.stderr,
          "unsplit by layers: %s" % seven.stderr[-200:])
    # auto (the default) splits over GPUs only: on the CPU the model stays whole
    auto = run(F32, "-sm", "auto", ranks=2)
    check(auto.returncode == 0 and "(CPU)" in auto.stderr, "auto on the CPU: %s" %
          auto.stderr[-200:])
    odd = run(F32, "-sm", "rows")
    check(odd.returncode == 2 and "auto, none, layer or row" in odd.stderr, "a bad mode: %s" %
          odd.stderr[-200:])
    usage = subprocess.run([OXIDIZE, "--help"], capture_output=True, text=True).stdout
    check("--split-mode auto|none|layer|row" in usage and "--dist-addr" in usage,
          "the usage names the split options: %s" % usage[-300:])
    rows = run(KJV, "-sm", "row", ranks=2)
    check(rows.returncode == 1 and "cut a block" in rows.stderr, "refused by rows: %s" %
          rows.stderr[-200:])


def test_device():
    # --device: a name this build cannot run is refused before anything loads; none keeps the
    # CPU whatever -ngl says; vulkan, where built and a device is there, gives the CPU's text
    # for a float model (the CPU rounds a quantized model's activations to 8 bits, the shaders
    # do not: kjv's text parts at a near tie)
    whole = run(F32)
    bad = run(F32, "--device", "metal")
    check(bad.returncode == 1 and "not cuda, vulkan" in bad.stderr, "a bad device: %s" %
          bad.stderr[-200:])
    none = run(F32, "-ngl", "99", "--device", "none")
    check(none.returncode == 0 and none.stdout == whole.stdout and "(CPU)" in none.stderr,
          "--device none: %s" % none.stderr[-200:])
    vk = run(F32, "-ngl", "99", "--device", "vulkan")
    check((vk.returncode == 0 and vk.stdout == whole.stdout and "(VULKAN)" in vk.stderr) or
          (vk.returncode == 1 and ("VULKAN=1" in vk.stderr or "no Vulkan" in vk.stderr)),
          "--device vulkan: %r against %r (%s)" % (vk.stdout, whole.stdout, vk.stderr[-200:]))
    usage = subprocess.run([OXIDIZE, "--help"], capture_output=True, text=True).stdout
    check("--device cuda|vulkan[:N]|none" in usage, "the usage names --device")


def test_prompt_cache(tmp):
    # the cache holds each rank's part; a later run with a longer prompt reuses it
    cache = os.path.join(tmp, "split.kv")
    first = run(KJV, "-sm", "layer", "--prompt-cache", cache, ranks=2)
    check(first.returncode == 0 and os.path.exists(cache), "cache saved: %s" % first.stderr)
    whole = run(KJV, "-p", PROMPT + " God")
    again = run(KJV, "-sm", "layer", "--prompt-cache", cache, "-p", PROMPT + " God", ranks=2)
    check(again.returncode == 0 and again.stdout == whole.stdout and
          "4 of 5 tokens reused" in again.stderr,
          "cache reused: %r against %r (%s)" % (again.stdout, whole.stdout, again.stderr[-300:]))
    other = run(KJV, "--prompt-cache", cache, "-p", PROMPT + " God")  # not the unsplit model's
    check(other.returncode == 0 and other.stdout == whole.stdout and
          "0 of 5 tokens reused" in other.stderr,
          "an unsplit run starts afresh: %s" % other.stderr[-200:])


def test_bench():
    env = dict(os.environ, OX_SPLIT_CPU_RANKS="2")
    r = subprocess.run([OXIDIZE, "bench", "-m", KJV, "-ngl", "0", "-sm", "layer", "-p", "8",
                        "-n", "4", "--batch", "1,4", "-r", "1"], capture_output=True, text=True,
                       env=env)
    check(r.returncode == 0 and r.stdout.count("|") > 10, "bench: %s" % r.stderr[-300:])


def answers(base, n):
    """The greedy texts of n concurrent completions."""
    out = [None] * n

    def one(i):
        body = {"prompt": ["And God said", "In the beginning", "Blessed are the"][i % 3],
                "max_tokens": 16 + i, "temperature": 0}
        status, reply = call(base, "/v1/completions", body)
        out[i] = reply["choices"][0]["text"] if status == 200 else "status %d" % status
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_serve():
    texts = []
    for args, env in (((), None), (("-sm", "layer"), {"OX_SPLIT_CPU_RANKS": "2"})):
        p, base = start(KJV, "-ngl", "0", "-np", "4", *args, env=env)
        try:
            texts.append(answers(base, 6))
        finally:
            p.terminate()
            p.wait()
    check(texts[0] == texts[1], "the split server answers as the whole: %s / %s" % tuple(texts))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_run()
        test_prompt_cache(tmp)
        test_bench()
        test_serve()
        test_device()
    return finish("test_split_cli")


if __name__ == "__main__":
    sys.exit(main())
