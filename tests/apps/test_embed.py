#!/usr/bin/env python3
"""test_embed.py: `oxidize embed`: n_embd floats at unit length, poolings that differ where they
should and agree where they must, the last token's state times the model's output matrix equal
to the logits `oxidize logits` prints, the model's pooling_type key as the default, and bad
options refused with status 2.

usage: test_embed.py PATH/TO/oxidize   (reference data from $OX_TESTDATA)
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

from apptest import DATA, OXIDIZE, check, finish

F32 = os.path.join(DATA, "models", "llama-f32.gguf")  # f32 output matrix: read here as is
KJV = os.path.join(DATA, "models", "kjv-15m-q4_k_m.gguf")
TEXT = "In the beginning God created the heaven and the earth."


def embed(model, *args):
    """The vector printed for the options, or None (with the failure checked)."""
    r = subprocess.run([OXIDIZE, "embed", "-m", model, "-t", "2", *args], capture_output=True)
    check(r.returncode == 0, "embed %s: rc %d %r" % (args, r.returncode, r.stderr[-300:]))
    return json.loads(r.stdout) if r.returncode == 0 else None


def info(model):
    r = subprocess.run([OXIDIZE, "info", "--json", model], capture_output=True)
    return json.loads(r.stdout)


def norm(v):
    return math.sqrt(sum(x * x for x in v))


def max_diff(a, b):
    return max(abs(x - y) for x, y in zip(a, b)) if a and b and len(a) == len(b) else math.inf


def test_shape_and_poolings():
    n_embd = info(KJV)["metadata"]["llama.embedding_length"]
    vecs = {p: embed(KJV, "-p", TEXT, "--pooling", p) for p in ("mean", "cls", "last")}
    for p, v in vecs.items():
        check(v is not None and len(v) == n_embd, "%s: %s floats, not %d" % (p, v and len(v), n_embd))
        check(v is not None and abs(norm(v) - 1) < 1e-5, "%s: norm %s" % (p, v and norm(v)))
    check(max_diff(vecs["mean"], vecs["last"]) > 1e-3, "mean and last pooling agree")
    check(max_diff(vecs["cls"], vecs["last"]) > 1e-3, "cls and last pooling agree")
    check(embed(KJV, "-p", TEXT) == vecs["mean"], "the default (no pooling_type key) is not mean")
    # normalizing divides the pooled vector by its length, nothing else
    raw = embed(KJV, "-p", TEXT, "--pooling", "mean", "--no-normalize")
    check(raw is not None and abs(norm(raw) - 1) > 1e-3, "--no-normalize: unit length")
    if raw and vecs["mean"]:
        n = norm(raw)
        check(max_diff([x / n for x in raw], vecs["mean"]) < 1e-6, "normalized != raw / |raw|")
    # a causal model's first state sees only the first token: cls is the same for another text
    # of as many tokens (the same batch, so the same kernels: an AVX2 build's batch and
    # single-token paths put the BOS's state 1e-3 apart), and near the BOS alone's state
    other = "And the end God made the heaven and the water."  # other words, as many tokens
    count = lambda t: len(json.loads(subprocess.run(
        [OXIDIZE, "tokenize", "-m", KJV, "--ids", "-p", t], capture_output=True).stdout))
    check(count(other) == count(TEXT), "the two texts tokenize to as many tokens")
    cls_other = embed(KJV, "-p", other, "--pooling", "cls")
    check(max_diff(vecs["cls"], cls_other) < 1e-6, "cls depends on the tokens after the first")
    bos_last = embed(KJV, "-p", "", "--pooling", "last")
    bos_mean = embed(KJV, "-p", "", "--pooling", "mean")
    check(max_diff(vecs["cls"], bos_last) < 3e-3, "cls far from the BOS's own state")
    check(max_diff(bos_mean, bos_last) < 1e-6, "one token: mean != last")
    # a context that holds the text exactly, then one token short
    ids = json.loads(subprocess.run([OXIDIZE, "tokenize", "-m", KJV, "--ids", "-p", TEXT],
                                    capture_output=True).stdout)
    fit = embed(KJV, "-p", TEXT, "--pooling", "last", "-c", str(len(ids)))
    check(max_diff(fit, vecs["last"]) < 1e-6, "-c %d changes the vector" % len(ids))
    r = subprocess.run([OXIDIZE, "embed", "-m", KJV, "-p", TEXT, "-c", str(len(ids) - 1)],
                       capture_output=True)
    check(r.returncode == 1 and b"context" in r.stderr and not r.stdout,
          "too long for -c: rc %d %r" % (r.returncode, r.stderr))


def output_matrix(model):
    """output.weight of an f32 model: n_vocab rows of n_embd floats, read from the file."""
    meta = info(model)
    t = next(t for t in meta["tensors"] if t["name"] == "output.weight")
    check(t["type"] == "f32", "output.weight is %s" % t["type"])
    cols, rows = t["shape"]
    with open(model, "rb") as f:
        f.seek(meta["data_offset"] + t["offset"])
        flat = struct.unpack("<%df" % (cols * rows), f.read(cols * rows * 4))
    return [flat[r * cols:(r + 1) * cols] for r in range(rows)]


def test_logits(tmp):
    """Last pooling without normalization is the state the output matrix multiplies: W h equals
    the last row `oxidize logits` writes for the same tokens (f32 weights: rounding only)."""
    h = embed(F32, "-p", TEXT, "--pooling", "last", "--no-normalize")
    ids = json.loads(subprocess.run([OXIDIZE, "tokenize", "-m", F32, "--ids", "-p", TEXT],
                                    capture_output=True).stdout)
    out = os.path.join(tmp, "logits.f32")
    r = subprocess.run([OXIDIZE, "logits", "-m", F32, "-t", "2", "--tokens",
                        ",".join(map(str, ids)), "--out", out], capture_output=True)
    check(r.returncode == 0, "logits: %r" % r.stderr)
    if not h or r.returncode != 0:
        return
    w = output_matrix(F32)
    with open(out, "rb") as f:
        data = f.read()
    last = struct.unpack("<%df" % len(w), data[-4 * len(w):])
    z = [sum(a * b for a, b in zip(row, h)) for row in w]
    scale = max(abs(x) for x in last)
    d = max_diff(z, last)
    print("  W h vs oxidize logits: max |diff| %.2e (logits up to %.2f)" % (d, scale))
    check(d < 1e-4 * max(scale, 1), "W h != the last token's logits: %g" % d)


def with_pooling_type(src, dst, value):
    """A copy of src with "llama.pooling_type" = value among its keys: the two keys put in front
    (the second a string that pads them to the file's alignment) move the data by whole
    alignment units, so the tensor offsets stay right."""
    align = info(src)["alignment"]

    def kv(key, vtype, payload):
        k = key.encode()
        return struct.pack("<Q", len(k)) + k + struct.pack("<I", vtype) + payload

    one = kv("llama.pooling_type", 4, struct.pack("<I", value))  # 4: u32
    pad_len = 0
    while (len(one) + len(kv("test.pad", 8, struct.pack("<Q", pad_len) + b"x" * pad_len))) % align:
        pad_len += 1
    two = kv("test.pad", 8, struct.pack("<Q", pad_len) + b"x" * pad_len)  # 8: string
    with open(src, "rb") as f:
        b = f.read()
    n_kv = struct.unpack_from("<Q", b, 16)[0]
    with open(dst, "wb") as f:
        f.write(b[:16] + struct.pack("<Q", n_kv + 2) + one + two + b[24:])


def test_model_pooling(tmp):
    last = os.path.join(tmp, "last.gguf")
    with_pooling_type(KJV, last, 3)  # LLAMA_POOLING_TYPE_LAST
    got = embed(last, "-p", TEXT)
    want = embed(KJV, "-p", TEXT, "--pooling", "last")
    check(got is not None and got == want, "pooling_type 3 is not the default")
    check(got == embed(last, "-p", TEXT, "--pooling", "last"), "the key changes the model")
    check(embed(last, "-p", TEXT, "--pooling", "mean") == embed(KJV, "-p", TEXT),
          "--pooling overrides the key")


def test_errors(tmp):
    for args in (["-p", "x"], ["-m", KJV], ["-m", KJV, "-p", "x", "--pooling", "avg"],
                 ["-m", KJV, "-p", "x", "--pooling", "none"], ["-m", KJV, "-p", "x", "-c", "0"],
                 ["-m", KJV, "-p", "x", "-c", "ten"], ["-m", KJV, "-p", "x", "-t", "0"],
                 ["-m", KJV, "-p", "x", "--frob", "1"], ["-m", KJV, "-p"]):
        r = subprocess.run([OXIDIZE, "embed", *args], capture_output=True)
        check(r.returncode == 2 and r.stderr and not r.stdout, "%s -> %d" % (args, r.returncode))
    r = subprocess.run([OXIDIZE, "embed", "-m", os.path.join(tmp, "none.gguf"), "-p", "x"],
                       capture_output=True)
    check(r.returncode == 1 and b"none.gguf" in r.stderr, "missing model: %r" % r.stderr)
    r = subprocess.run([OXIDIZE, "embed", "--help"], capture_output=True)
    check(r.returncode == 0 and b"--pooling" in r.stdout, "--help")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_shape_and_poolings()
        test_logits(tmp)
        test_model_pooling(tmp)
        test_errors(tmp)
    sys.exit(finish("test_embed"))


if __name__ == "__main__":
    main()
