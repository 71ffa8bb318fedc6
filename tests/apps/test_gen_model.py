#!/usr/bin/env python3
"""test_gen_model.py: the benchmark model generator writes files with the real models' shapes
that oxidize loads and runs, quantized with the per-tensor types asked for, and fails cleanly.

usage: test_gen_model.py PATH/TO/gen-model PATH/TO/oxidize
One block per model (--layers 1) keeps it quick; shapes are otherwise the presets' own.
"""
import os
import re
import subprocess
import sys
import tempfile

GEN, OXIDIZE = sys.argv[1], sys.argv[2]
failures = 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("FAIL:", what)


def info(path):
    return subprocess.run([OXIDIZE, "info", path], capture_output=True, text=True).stdout


def generate(tmp, preset, ftype):
    out = os.path.join(tmp, "%s-%s.gguf" % (preset, ftype))
    p = subprocess.run([GEN, "--preset", preset, "--type", ftype, "--layers", "1", out],
                       capture_output=True, text=True)
    check(p.returncode == 0 and os.path.exists(out), "%s %s: rc %d %s" % (preset, ftype,
          p.returncode, p.stderr[-300:]))
    return out


def test_models(tmp):
    # TinyLlama: untied output, SentencePiece vocabulary, 4 kv heads
    path = generate(tmp, "tinyllama-1.1b", "q4_0")
    text = info(path)
    for key, value in (("embedding_length", "2048"), ("feed_forward_length", "5632"),
                       ("block_count", "1"), ("attention.head_count_kv", "4")):
        check(re.search(r"%s\s+= %s\b" % (re.escape(key), value), text), "tinyllama %s" % key)
    check(re.search(r"q4_0\s+2048 x 5632\s+\d+\s+blk\.0\.ffn_gate\.weight", text),
          "tinyllama ffn_gate is q4_0 [2048, 5632]")
    check(re.search(r"q6_K\s+2048 x 32000\s+\d+\s+output\.weight", text),
          "tinyllama output is q6_K (llama-quantize's rule)")
    run = subprocess.run([OXIDIZE, "run", "-m", path, "-p", "Hello", "-n", "3", "--temp", "0"],
                         capture_output=True)
    check(run.returncode == 0 and b"tokens/s" in run.stderr, "tinyllama runs: %r" % run.stderr[-200:])
    # Qwen2.5: q/k/v biases, tied output, the vocabulary padded to the real model's 151936 rows
    path = generate(tmp, "qwen2.5-0.5b", "q4_k_m")
    text = info(path)
    check(re.search(r"151936\s+\d+\s+token_embd\.weight", text) and
          not re.search(r"\soutput\.weight", text),
          "qwen2.5: 151936 embedding rows, tied")
    check("blk.0.attn_q.bias" in text, "qwen2.5: q bias")
    run = subprocess.run([OXIDIZE, "run", "-m", path, "-p", "Hi", "-n", "2", "--temp", "0"],
                         capture_output=True)
    check(run.returncode == 0, "qwen2.5 runs: %r" % run.stderr[-200:])


def test_presets():
    # the 70B shape (issue 27's model that needs two GPUs in f16) is one of the presets; a layer
    # of it is 2.6 GB of f16 with its embeddings, too much to write here: its shape is the data
    p = subprocess.run([GEN, "--help"], capture_output=True, text=True)
    for name in ("llama-3.2-1b", "llama-3-8b", "llama-3-70b"):
        check(name in p.stdout + p.stderr, "preset %s listed" % name)


def test_errors(tmp):
    for args, what in ((["--preset", "nope", "--type", "q4_0", "x.gguf"], "unknown preset"),
                       (["--preset", "tinyllama-1.1b", "--type", "q9_9", "x.gguf"], "unknown type"),
                       (["--preset", "tinyllama-1.1b", "x.gguf"], "no type"),
                       (["--preset", "tinyllama-1.1b", "--type", "q4_0", "--layers", "0", "x.gguf"],
                        "zero layers")):
        p = subprocess.run([GEN] + args, capture_output=True, text=True, cwd=tmp)
        check(p.returncode != 0 and p.stderr.strip(), "%s: rc %d" % (what, p.returncode))
    bad_dir = os.path.join(tmp, "missing", "out.gguf")
    p = subprocess.run([GEN, "--preset", "tinyllama-1.1b", "--type", "q4_0", "--layers", "1",
                        bad_dir], capture_output=True, text=True)
    check(p.returncode != 0, "unwritable output fails")
    check(not [f for f in os.listdir(tmp) if ".tmp" in f], "no temporary file left behind")


with tempfile.TemporaryDirectory() as tmp:
    test_errors(tmp)
    test_presets()
    test_models(tmp)
print("test_gen_model: %d failures" % failures)
sys.exit(1 if failures else 0)
