#!/usr/bin/env python3
"""test_quantize.py: `oxidize quantize` as a user runs it: llama-quantize's files byte for
byte, its options, a progress bar on a terminal, and clean refusals.

usage: test_quantize.py PATH/TO/oxidize   (reference data from $OX_TESTDATA)
"""
import hashlib
import json
import os
import pty
import subprocess
import sys
import tempfile

OXIDIZE = sys.argv[1]
REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DATA = os.environ.get("OX_TESTDATA") or os.path.join(REPO, "..", "shared", "testdata")
MODELS = os.path.join(DATA, "models")
checks = failures = 0


def check(cond, what):
    global checks, failures
    checks += 1
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def run(*args):
    return subprocess.run([OXIDIZE, "quantize", *args], capture_output=True, text=True)


def model(name):
    return os.path.join(MODELS, name)


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def tensor_types(path):
    out = subprocess.run([OXIDIZE, "info", "--json", path], capture_output=True, text=True)
    return {t["name"]: t["type"] for t in json.loads(out.stdout)["tensors"]}


def test_identical(tmp):
    out = os.path.join(tmp, "out.gguf")
    src = model("llama-f32.gguf")
    for args, ref in ((["IN", "OUT", "Q4_K_M"], "llama-q4_k_m.gguf"),
                      (["IN", "OUT", "q3_k_m", "2"], "llama-q3_k_m.gguf"),  # thread count last
                      (["--pure", "IN", "OUT", "Q4_0"], "llama-q4_0.gguf"),
                      (["-t", "1", "--pure", "IN", "OUT", "8"], "llama-q5_0.gguf")):  # by number
        r = run(*[src if a == "IN" else out if a == "OUT" else a for a in args])
        check(r.returncode == 0, "quantize %s: rc %d %s" % (args, r.returncode, r.stderr))
        check(os.path.exists(out) and digest(out) == digest(model(ref)),
              "quantize %s differs from %s" % (args, ref))
        check("bits/weight" in r.stdout and "MB/s" in r.stdout, "summary printed: " + r.stdout)


def test_options(tmp):
    out = os.path.join(tmp, "opt.gguf")
    r = run("--output-tensor-type", "q8_0", "--token-embedding-type", "F16",
            "--tensor-type", "ffn_(up|gate)=q5_k", "--tensor-type", "attn_v=iq4_nl",
            model("llama-f32.gguf"), out, "Q4_K_S")
    check(r.returncode == 0, "options: " + r.stderr)
    types = tensor_types(out)
    check(types.get("output.weight") == "q8_0", "output type")
    check(types.get("token_embd.weight") == "f16", "token embedding type")
    check(types.get("blk.1.ffn_up.weight") == "q5_K" and types.get("blk.0.ffn_gate.weight") == "q5_K",
          "--tensor-type ffn")
    check(types.get("blk.0.attn_v.weight") == "iq4_nl", "--tensor-type attn_v")
    check(types.get("blk.0.attn_q.weight") == "q4_K", "the rest follows Q4_K_S")
    r = run("--leave-output-tensor", model("llama-f16.gguf"), out, "Q8_0")
    check(r.returncode == 0 and tensor_types(out).get("output.weight") == "f16",
          "--leave-output-tensor")
    r = run(model("llama-q4_k_m.gguf"), out, "COPY")
    check(r.returncode == 0 and tensor_types(out) == tensor_types(model("llama-q4_k_m.gguf")),
          "COPY keeps types")


def test_refusals(tmp):
    src = os.path.join(tmp, "in.gguf")
    with open(model("llama-q4_0.gguf"), "rb") as f, open(src, "wb") as g:
        g.write(f.read())
    before = digest(src)
    r = run(src, src, "Q8_0")
    check(r.returncode == 1 and "refusing to overwrite" in r.stderr, "same path: " + r.stderr)
    r = run(src, os.path.join(tmp, ".", "in.gguf"), "Q8_0")
    check(r.returncode == 1 and "refusing to overwrite" in r.stderr, "same file, other name")
    check(digest(src) == before, "input untouched")
    out = os.path.join(tmp, "re.gguf")
    r = run(src, out, "Q8_0")
    check(r.returncode == 1 and "--allow-requantize" in r.stderr, "requantize refused: " + r.stderr)
    check(not os.path.exists(out), "nothing written on refusal")
    r = run("--allow-requantize", src, out, "Q8_0")
    check(r.returncode == 0 and tensor_types(out)["blk.0.attn_q.weight"] == "q8_0", "requantize")
    for bad, why in ((["x.gguf", "y.gguf", "Q9_K"], "unknown file type"),
                     (["--tensor-type", "attn_q", "a", "b", "Q8_0"], "PATTERN=TYPE"),
                     (["--output-tensor-type", "q8_k", "a", "b", "Q8_0"], "not a tensor type"),
                     (["a", "b"], "usage"), (["-t", "0", "a", "b", "Q4_0"], "thread count")):
        r = run(*bad)
        check(r.returncode == 2 and why in r.stderr, "%s -> rc %d %s" % (bad, r.returncode, r.stderr))
    r = run(model("llama-f32.gguf"), os.path.join(tmp, "x.gguf"), "IQ2_XXS")
    check(r.returncode == 1 and "importance matrix" in r.stderr, "IQ2_XXS needs an imatrix")
    r = run(os.path.join(tmp, "missing.gguf"), out, "Q4_0")
    check(r.returncode == 1 and "missing.gguf" in r.stderr, "missing input named")
    leftovers = [f for f in os.listdir(tmp) if ".tmp." in f]
    check(not leftovers, "temporary files left: %s" % leftovers)


def test_progress_bar(tmp):
    """On a terminal, a progress bar is drawn on stderr."""
    out = os.path.join(tmp, "tty.gguf")
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(OXIDIZE, [OXIDIZE, "quantize", model("llama-f32.gguf"), out, "Q4_0"])
    text = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        text += chunk
    _, status = os.waitpid(pid, 0)
    check(os.WEXITSTATUS(status) == 0, "tty run")
    check(b"[====" in text and b"blk.1.ffn_up.weight" in text and b"\r" in text,
          "progress bar drawn: %r" % text[:200])


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_identical(tmp)
        test_options(tmp)
        test_refusals(tmp)
        test_progress_bar(tmp)
    print("test_quantize: %d checks, %d passed, %d failed" % (checks, checks - failures, failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
