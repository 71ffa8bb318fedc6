#!/usr/bin/env python3
"""serve_bench.py: the serving benchmark: `oxidize serve` on loopback with N clients streaming
at once (N = 1, 4, 16 by default), each asking for TOKENS tokens; prints the aggregate generated
tokens/s and the time to first token (p50, p99) per N, beside `oxidize bench`'s single-stream
generation speed for the same model and threads.

usage: serve_bench.py OXIDIZE MODEL [--clients 1,4,16] [--tokens 128] [--rounds 2] [-t THREADS]
"""
import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import threading
import time


def start(oxidize, model, slots, threads):
    p = subprocess.Popen([oxidize, "serve", "-m", model, "--port", "0", "-np", str(slots),
                          "-c", str(slots * 1024), "-t", str(threads)],
                         stderr=subprocess.PIPE, text=True)
    port = re.search(r"http://[0-9.]+:(\d+)", p.stderr.readline()).group(1)
    if "ready" not in p.stderr.readline():
        raise SystemExit("the server did not load %s" % model)
    threading.Thread(target=p.stderr.read, daemon=True).start()
    return p, int(port)


def one_stream(port, i, tokens, out):
    """Stream one completion; out[i] = (seconds to the first token, seconds, tokens)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = {"prompt": "Request %d: And it came to pass" % i, "max_tokens": tokens,
            "temperature": 0.8, "seed": i, "stream": True,
            "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse()
    first, n = None, 0
    while True:
        line = r.readline()
        if not line or line.strip() == b"data: [DONE]":
            break
        if not line.startswith(b"data: "):
            continue
        chunk = json.loads(line[6:])
        if first is None and chunk["choices"] and chunk["choices"][0]["text"]:
            first = time.perf_counter() - t0
        if chunk.get("usage"):
            n = chunk["usage"]["completion_tokens"]
    out[i] = (first if first is not None else time.perf_counter() - t0,
              time.perf_counter() - t0, n)
    conn.close()


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("oxidize")
    ap.add_argument("model")
    ap.add_argument("--clients", default="1,4,16")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    counts = [int(c) for c in a.clients.split(",")]
    p, port = start(a.oxidize, a.model, max(counts), a.threads)  # first: the file is read once
    one_stream(port, 0, 8, [None])  # warm-up
    single = subprocess.run([a.oxidize, "bench", "-m", a.model, "-p", "0", "-n", str(a.tokens),
                             "-r", "2", "-t", str(a.threads), "-o", "json"],
                            capture_output=True, text=True)
    tg = None
    try:
        tg = [r["avg_ts"] for r in json.loads(single.stdout) if r["n_gen"]][0]
    except (ValueError, IndexError, KeyError):
        pass
    print("model %s, %d threads, %d tokens per request; oxidize bench tg%d: %s t/s" % (
        os.path.basename(a.model), a.threads, a.tokens, a.tokens,
        "%.1f" % tg if tg else "?"))
    print("| streams | generated t/s | x single stream | TTFT p50 ms | TTFT p99 ms |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    try:
        for n in counts:
            ttft, rates = [], []
            for _ in range(a.rounds):
                out = [None] * n
                threads = [threading.Thread(target=one_stream, args=(port, i, a.tokens, out))
                           for i in range(n)]
                t0 = time.perf_counter()
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                wall = time.perf_counter() - t0
                rates.append(sum(o[2] for o in out) / wall)
                ttft += [o[0] * 1e3 for o in out]
            rate = statistics.mean(rates)
            print("| %d | %.1f | %s | %.1f | %.1f |" % (
                n, rate, "%.2f" % (rate / tg) if tg else "?", percentile(ttft, 0.5),
                percentile(ttft, 0.99)))
    finally:
        p.terminate()
        p.wait(timeout=60)


if __name__ == "__main__":
    main()
