#!/usr/bin/env python3
"""test_rerank.py: encoders from the command line and the server. `oxidize embed` on BERT and
nomic-bert (the file's pooling by default, llama.cpp's pooled vectors) and a reranker's scores
(--pooling rank --doc); `oxidize serve --reranking`: /v1/rerank and its aliases in Jina's and
TEI's forms (llama.cpp's scores, best first, top_n, the texts echoed), its errors, and the
routes an embedding model cannot serve; an embedding model's server makes /v1/embeddings without
being asked.

usage: test_rerank.py PATH/TO/oxidize   (the references from tests/data/arch)
"""
import json
import math
import os
import signal
import subprocess
import sys
import urllib.request

from apptest import OXIDIZE, check, finish
from test_serve import call, error_of, start

ARCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "arch")
BERT = os.path.join(ARCH, "models", "bert-f16.gguf")
NOMIC = os.path.join(ARCH, "models", "nomic-bert-f16.gguf")


def reference(name):
    with open(os.path.join(ARCH, "reference", "embedding", name + ".json")) as f:
        return json.load(f)


def embed(model, *args, rc=0):
    r = subprocess.run([OXIDIZE, "embed", "-m", model, "-t", "2", *args], capture_output=True)
    check(r.returncode == rc, "embed %s: rc %d %r" % (args, r.returncode, r.stderr[-300:]))
    return json.loads(r.stdout) if r.returncode == 0 else None


def cosine(a, b):
    ab = sum(x * y for x, y in zip(a, b))
    return ab / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b)) if a and b else 0.0


def test_cli():
    """Pooled vectors as llama.cpp makes them; the file's pooling (bert: cls, nomic: mean) by
    default; a reranker's scores, one per document."""
    for model, name, own in ((BERT, "bert-f16", "cls"), (NOMIC, "nomic-bert-f16", "mean")):
        ref = reference(name)["prompts"][1]
        for pooling in ("mean", "cls", "last"):
            v = embed(model, "-p", ref["text"], "--pooling", pooling, "--no-normalize")
            check(v is not None and cosine(v, ref[pooling]) > 0.9999,
                  "%s %s: cosine %.6f" % (name, pooling, cosine(v, ref[pooling]) if v else 0))
        default = embed(model, "-p", ref["text"], "--no-normalize")
        check(default is not None and cosine(default, ref[own]) > 0.9999,
              "%s: the file's pooling (%s) is the default" % (name, own))
    pairs = reference("bert-f16")["rerank"]
    args = ["-p", pairs[0]["query"]] + sum((["--doc", p["document"]] for p in pairs), [])
    scores = embed(BERT, *args)
    check(scores is not None and len(scores) == len(pairs) and
          all(abs(s - p["score"]) < 1e-3 for s, p in zip(scores, pairs)),
          "--doc scores %s, llama.cpp %s" % (scores, [p["score"] for p in pairs]))
    embed(BERT, "-p", "a", "--pooling", "mean", "--doc", "b", rc=2)  # --doc needs rank
    embed(NOMIC, "-p", "a", "--pooling", "rank", rc=1)  # no classifier head
    r = subprocess.run([OXIDIZE, "run", "-m", BERT, "-p", "a", "-n", "2"], capture_output=True,
                       text=True)
    check(r.returncode != 0 and "embeddings" in r.stderr, "run on BERT: %r" % r.stderr[-200:])


def test_rerank_server():
    pairs = reference("bert-f16")["rerank"]
    query, docs = pairs[0]["query"], [p["document"] for p in pairs]
    want = sorted(range(len(pairs)), key=lambda i: -pairs[i]["score"])
    p, base = start(BERT, "--reranking", "-c", "512")
    try:
        status, body = call(base, "/v1/rerank", {"model": "x", "query": query, "documents": docs,
                                                 "top_n": 2, "return_documents": True})
        res = body.get("results", []) if status == 200 else []
        check(status == 200 and [r["index"] for r in res] == want[:2] and
              all(abs(r["relevance_score"] - pairs[r["index"]]["score"]) < 1e-3 and
                  r["document"]["text"] == docs[r["index"]] for r in res) and
              body["usage"]["prompt_tokens"] == sum(len(x["tokens"]) for x in pairs) and
              body["object"] == "list", "rerank: %s %s" % (status, body))
        for path in ("/rerank", "/reranking", "/v1/reranking"):
            status, body = call(base, path, {"query": query, "documents": docs})
            check(status == 200 and [r["index"] for r in body["results"]] == want and
                  "document" not in body["results"][0], "%s: %s %s" % (path, status, body))
        status, body = call(base, "/rerank", {"query": query, "texts": docs, "return_text": True})
        check(status == 200 and isinstance(body, list) and [r["index"] for r in body] == want and
              all(abs(r["score"] - pairs[r["index"]]["score"]) < 1e-3 and
                  r["text"] == docs[r["index"]] for r in body), "TEI form: %s %s" % (status, body))
        status, body = call(base, "/v1/rerank", {"query": query,
                                                 "documents": [{"text": d} for d in docs]})
        check(status == 200 and [r["index"] for r in body["results"]] == want,
              "documents as objects: %s" % status)
        for what, req, param in [("no query", {"documents": docs}, "query"),
                                 ("query a number", {"query": 1, "documents": docs}, "query"),
                                 ("no documents", {"query": query}, "documents"),
                                 ("empty documents", {"query": query, "documents": []}, "documents"),
                                 ("a number document", {"query": query, "documents": [1]},
                                  "documents"),
                                 ("top_n 0", {"query": query, "documents": docs, "top_n": 0},
                                  "top_n"),
                                 ("too long", {"query": query, "documents": ["and " * 600]},
                                  "documents")]:
            status, body = call(base, "/v1/rerank", req)
            check(error_of(status, body, 400, param), "%s: %s %s" % (what, status, body))
        status, body = call(base, "/v1/completions", {"prompt": "a"})
        check(error_of(status, body, 501), "completions on BERT: %s %s" % (status, body))
        status, body = call(base, "/v1/embeddings", {"input": "a"})
        check(error_of(status, body, 400), "embeddings of a reranking server: %s" % status)
        with urllib.request.urlopen(base + "/metrics", timeout=60) as r:
            metrics = r.status
        check(call(base, "/health")[0] == 200 and metrics == 200 and
              call(base, "/slots")[0] == 200, "health, metrics and slots answer")
    finally:
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=30)
    check(rc == 0, "SIGTERM: exit status %s" % rc)


def test_embedding_server():
    """An embedding model serves /v1/embeddings without --embeddings, pooled as its file says;
    it does not rerank."""
    ref = reference("nomic-bert-f16")["prompts"][0]
    p, base = start(NOMIC, "-c", "512")
    try:
        status, body = call(base, "/v1/embeddings", {"input": [ref["text"]]})
        got = body["data"][0]["embedding"] if status == 200 else None
        check(got is not None and cosine(got, ref["mean"]) > 0.9999 and
              abs(math.sqrt(sum(x * x for x in got)) - 1) < 1e-5,
              "nomic-bert embeddings: %s %s" % (status, str(body)[:200]))
        status, body = call(base, "/v1/rerank", {"query": "a", "documents": ["b"]})
        check(error_of(status, body, 501), "rerank without --reranking: %s" % status)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)


def main():
    test_cli()
    test_rerank_server()
    test_embedding_server()
    return finish("test_rerank")


if __name__ == "__main__":
    sys.exit(main())
