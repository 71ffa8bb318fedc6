#!/usr/bin/env python3
"""serve_bench.py: the serving benchmark: `oxidize serve` (and, with --llama-server, llama.cpp's
llama-server on the same file) on loopback, N clients streaming completions at once (each
asking for TOKENS tokens at temperature 0.8, its own seed); per N and engine, the aggregate
generated tokens/s, time to first token and inter-token latency (p50, p99). The engines take
turns, round by round, so both see the machine in the same state.

usage: serve_bench.py MODEL --oxidize PATH [--llama-server PATH] [--clients 1,8,32,128]
                      [--tokens 128] [--rounds 2] [-t THREADS] [-ngl N] [--temperature T]
                      [--oxidize-spec "ARGS"] [--oxidize-base PATH]

--oxidize-spec "--spec ngram --draft-max 8" (or "-md DRAFT.gguf"): a second oxidize server with
those options beside the plain one, its ratio against it (speculative decoding under load).
--oxidize-base PATH: another build of oxidize (a change's base revision) served beside it, the
ratios against it (without --llama-server).
"""
import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(p, port, name, seconds=600):
    """Until GET /health answers 200 (the model is loaded), or the server exits."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if p.poll() is not None:
            raise SystemExit("%s exited with %d before it was ready" % (name, p.returncode))
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit("%s was not ready in %d s" % (name, seconds))


def start(name, argv, port, log):
    p = subprocess.Popen(argv, stdout=log, stderr=log)
    wait_healthy(p, port, name)
    return p


TEMPERATURE = 0.8


def one_stream(port, i, tokens, out):
    """Stream one completion; out[i] = (seconds to the first token, each later token's gap in
    seconds, tokens generated)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = {"prompt": "Request %d: And it came to pass" % i, "max_tokens": tokens,
            "temperature": TEMPERATURE, "seed": i, "stream": True,
            "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse()
    stamps, usage = [], None
    while True:
        line = r.readline()
        if not line or line.strip() == b"data: [DONE]":
            break
        if not line.startswith(b"data: "):
            continue
        chunk = json.loads(line[6:])
        if chunk.get("choices") and chunk["choices"][0].get("text"):
            stamps.append(time.perf_counter())
        if chunk.get("usage"):
            usage = chunk["usage"]["completion_tokens"]
    conn.close()
    first = (stamps[0] if stamps else time.perf_counter()) - t0
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    out[i] = (first, gaps, usage if usage is not None else len(stamps))


def load(port, n, tokens):
    """n streams at once: (aggregate tokens/s, first-token times, inter-token gaps)."""
    out = [None] * n
    threads = [threading.Thread(target=one_stream, args=(port, i, tokens, out)) for i in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return (sum(o[2] for o in out) / wall, [o[0] for o in out], [g for o in out for g in o[1]])


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--oxidize", required=True)
    ap.add_argument("--llama-server")
    ap.add_argument("--oxidize-base", help="another oxidize build, the ratios' reference")
    ap.add_argument("--clients", default="1,8,32,128")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count())
    ap.add_argument("-ngl", "--n-gpu-layers", type=int, help="layers on the GPU (default: "
                    "each engine's own)")
    ap.add_argument("--log", default=os.devnull, help="the servers' output")
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--oxidize-spec", help="options of a second oxidize server (speculative "
                    "decoding), measured against the plain one")
    a = ap.parse_args()
    global TEMPERATURE
    TEMPERATURE = a.temperature
    counts = [int(c) for c in a.clients.split(",")]
    slots, ctx = max(counts), max(counts) * (a.tokens + 64)
    log = open(a.log, "a")
    ngl = ["-ngl", str(a.n_gpu_layers)] if a.n_gpu_layers is not None else []
    engines = []
    try:
        port = free_port()
        engines.append(("oxidize", port, start("oxidize", [
            a.oxidize, "serve", "-m", a.model, "--port", str(port), "-np", str(slots),
            "-c", str(ctx), "-t", str(a.threads), "--queue-size", str(slots)] + ngl, port, log)))
        if a.oxidize_spec:
            port = free_port()
            engines.append(("oxidize spec", port, start("oxidize", [
                a.oxidize, "serve", "-m", a.model, "--port", str(port), "-np", str(slots),
                "-c", str(ctx), "-t", str(a.threads), "--queue-size", str(slots)] + ngl +
                a.oxidize_spec.split(), port, log)))
        if a.oxidize_base:
            port = free_port()
            engines.append(("oxidize base", port, start("oxidize base", [
                a.oxidize_base, "serve", "-m", a.model, "--port", str(port), "-np", str(slots),
                "-c", str(ctx), "-t", str(a.threads), "--queue-size", str(slots)] + ngl, port,
                log)))
        if a.llama_server:
            port = free_port()
            engines.append(("llama.cpp", port, start("llama-server", [
                a.llama_server, "-m", a.model, "--host", "127.0.0.1", "--port", str(port),
                "-np", str(slots), "-c", str(ctx), "-t", str(a.threads), "-fa", "on", "-cb"] + ngl,
                port, log)))
        for _, port, _ in engines:
            load(port, 1, 8)  # warm-up
        print("model %s, %d threads, %d tokens per request, temperature %g, %d rounds%s" % (
            os.path.basename(a.model), a.threads, a.tokens, a.temperature, a.rounds,
            ", spec: " + a.oxidize_spec if a.oxidize_spec else ""))
        ref = "llama.cpp" if a.llama_server else "oxidize base" if a.oxidize_base else "oxidize"
        head = "| streams | engine | generated t/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | " \
               "ITL p99 ms |"
        print(head + (" x %s |" % ref if len(engines) > 1 else ""))
        print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |" +
              (" ---: |" if len(engines) > 1 else ""))
        for n in counts:
            res = {name: ([], [], []) for name, _, _ in engines}
            for r in range(a.rounds):  # turns: A B C, then C B A
                for name, port, _ in (engines if r % 2 == 0 else engines[::-1]):
                    rate, ttft, gaps = load(port, n, a.tokens)
                    res[name][0].append(rate)
                    res[name][1].extend(ttft)
                    res[name][2].extend(gaps)
            base = statistics.mean(res[ref][0]) if len(engines) > 1 else None
            for name, _, _ in engines:
                rates, ttft, gaps = res[name]
                rate = statistics.mean(rates)
                print("| %d | %s | %.1f | %.1f | %.1f | %.2f | %.2f |%s" % (
                    n, name, rate, percentile(ttft, 0.5) * 1e3, percentile(ttft, 0.99) * 1e3,
                    percentile(gaps, 0.5) * 1e3, percentile(gaps, 0.99) * 1e3,
                    " %.2f |" % (rate / base) if base else ""))
    finally:
        for _, _, p in engines:
            p.terminate()
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    main()
