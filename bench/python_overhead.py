#!/usr/bin/env python3
"""python_overhead.py: the Python package's generation speed against `oxidize run`'s on the same
model, prompt and token count, taking turns (greedy, so both generate the same tokens).

    build/python-venv/bin/python bench/python_overhead.py [MODEL] [TOKENS] [ROUNDS]

`make test-python` makes that venv. Generation only on both sides: `oxidize run`'s
"generation: N tokens, R tokens/s" line, and for Python the time from the first streamed chunk
to the last (the prompt's decode excluded).
"""
import re
import subprocess
import sys
import time
from pathlib import Path

import oxidize

REPO = Path(__file__).resolve().parent.parent
MODEL = sys.argv[1] if len(sys.argv) > 1 else str(
    REPO.parent / "shared" / "testdata" / "models" / "kjv-15m-q4_k_m.gguf")
TOKENS = int(sys.argv[2]) if len(sys.argv) > 2 else 400
ROUNDS = int(sys.argv[3]) if len(sys.argv) > 3 else 3
PROMPT, THREADS = "In the beginning", 2


def cli_rate() -> float:
    err = subprocess.run([str(REPO / "build" / "apps" / "oxidize" / "oxidize"), "run", "-m", MODEL,
                          "-p", PROMPT, "-n", str(TOKENS), "--temp", "0", "-t", str(THREADS)],
                         capture_output=True, check=True).stderr.decode()
    return float(re.search(r"generation: \d+ tokens, ([\d.]+) tokens/s", err).group(1))


def python_rate(llm: "oxidize.Llama") -> float:
    first = last = None
    n = 0
    for chunk in llm(PROMPT, max_tokens=TOKENS, temperature=0, stream=True):
        now = time.perf_counter()
        first = first or now
        last = now
        n += 1
    # chunks after the first one cover TOKENS - 1 tokens (a chunk a token, the last empty)
    return (TOKENS - 1) / (last - first)


llm = oxidize.Llama(MODEL, n_ctx=2048, n_threads=THREADS, verbose=False)
cli, py = [], []
for _ in range(ROUNDS):
    cli.append(cli_rate())
    py.append(python_rate(llm))
print("oxidize run t/s:", " ".join(f"{r:.1f}" for r in cli))
print("python      t/s:", " ".join(f"{r:.1f}" for r in py))
print(f"python / run: {max(py) / max(cli):.3f} (best of {ROUNDS} each)")
