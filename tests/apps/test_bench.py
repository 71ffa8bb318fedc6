#!/usr/bin/env python3
"""test_bench.py: `oxidize bench`: its JSON and markdown output, test lists and errors.

Timings are never asserted (they depend on the machine and the build); only that they exist,
are finite and positive. Token counts are tiny so the sanitizer build stays quick.

usage: test_bench.py PATH/TO/oxidize   (reference data from $OX_TESTDATA)
"""
import json
import math
import os
import subprocess
import sys
import tempfile

OXIDIZE = sys.argv[1]
REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DATA = os.environ.get("OX_TESTDATA") or os.path.join(REPO, "..", "shared", "testdata")
MODEL = os.path.join(DATA, "models", "kjv-15m-q4_k_m.gguf")
checks = failures = 0


def check(cond, what):
    global checks, failures
    checks += 1
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def run(*args):
    return subprocess.run([OXIDIZE, "bench", *args], capture_output=True)


def rows(r, what):
    """The JSON rows of a run that should have succeeded ([] after a failed check)."""
    check(r.returncode == 0, "%s run exit %d: %r" % (what, r.returncode, r.stderr[-300:]))
    try:
        return json.loads(r.stdout)
    except ValueError:
        return []


def positive(x):
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def test_json():
    r = run("-m", MODEL, "-p", "16", "-n", "4", "-r", "2", "-t", "2", "-o", "json")
    check(r.returncode == 0, "json run exit %d: %r" % (r.returncode, r.stderr[-300:]))
    try:
        tests = json.loads(r.stdout)
    except ValueError:
        check(False, "not JSON: %r" % r.stdout[-300:])
        return
    check([t.get("test") for t in tests] == ["pp16", "tg4"], "tests %r" % tests)
    for t, (p, n) in zip(tests, ((16, 0), (0, 4))):
        name = t.get("test")
        check((t.get("n_prompt"), t.get("n_gen")) == (p, n), "%s: n_prompt/n_gen %r" % (name, t))
        check(positive(t.get("avg_ts")), "%s: avg_ts %r" % (name, t.get("avg_ts")))
        sd = t.get("stddev_ts")
        check(isinstance(sd, (int, float)) and math.isfinite(sd) and sd >= 0,
              "%s: stddev_ts %r" % (name, sd))
        samples = t.get("samples_ts") or []
        check(len(samples) == 2 and all(positive(s) for s in samples),
              "%s: samples_ts %r" % (name, samples))
        if len(samples) == 2 and positive(t.get("avg_ts")):
            check(abs(sum(samples) / 2 / t["avg_ts"] - 1) < 1e-9, "%s: avg is the mean" % name)
        check("llama" in t.get("model_type", ""), "%s: model_type %r" % (name, t.get("model_type")))
        check(t.get("n_threads") == 2 and t.get("n_batch") == 512, "%s: threads/batch" % name)
        for key in ("model_size", "model_n_params", "peak_rss_mib"):
            check(positive(t.get(key)), "%s: %s %r" % (name, key, t.get(key)))
        check(isinstance(t.get("load_ms"), (int, float)) and t["load_ms"] >= 0, "%s: load_ms" % name)
    check(b"peak RSS" in r.stderr, "load time and peak RSS on stderr: %r" % r.stderr[-300:])


def test_markdown():
    """Lists run every non-zero value, prompts first; chunks of -b smaller than the prompt."""
    r = run("-m", MODEL, "-p", "8,0,12", "-n", "0,3", "-b", "5", "-r", "1", "-t", "1")
    check(r.returncode == 0, "md run exit %d: %r" % (r.returncode, r.stderr[-300:]))
    lines = r.stdout.decode().splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")] if lines else []
    check(header == ["model", "size", "params", "backend", "threads", "test", "t/s"],
          "header %r" % header)
    check(len(lines) == 5 and lines[1].startswith("| ---"), "table lines %r" % lines)
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    check([row[5] for row in rows if len(row) == 7] == ["pp8", "pp12", "tg3"], "rows %r" % rows)
    for line, row in zip(lines[2:], rows):
        if len(row) != 7:
            continue
        check(row[0].startswith("llama") and row[3] == "CPU" and row[4] == "1", "row %r" % row)
        check(row[1].endswith(" MiB") and row[2].endswith(" M"), "size/params %r" % row)
        try:
            avg, sd = (float(x) for x in row[6].split(" \u00b1 "))
        except ValueError:
            avg, sd = 0.0, -1.0
        check(positive(avg) and sd >= 0, "t/s %r" % row[6])
        check(len(line) == len(lines[0]), "columns line up: %r" % line)  # '\u00b1' is one column


def test_batch():
    """--batch N decodes N sequences together: one tg row per value, aggregate tokens/s."""
    r = run("-m", MODEL, "-p", "0", "-n", "4", "--batch", "1,3,130", "-r", "1", "-t", "2", "-o",
            "json")
    tests = rows(r, "batch")
    check([(t["test"], t["n_parallel"]) for t in tests] ==
          [("tg4", 1), ("tg4 x3", 3), ("tg4 x130", 130)], "batch rows %r" % tests)
    check(all(t["avg_ts"] > 0 and t["backends"] in ("CPU", "CUDA") for t in tests), "batch t/s")


def test_depth():
    """-d D fills the cache with D tokens (untimed) before each test: rows "pp8 @ d16", n_depth."""
    r = run("-m", MODEL, "-p", "8", "-n", "2", "-d", "0,16", "-r", "1", "-t", "2", "-o", "json")
    tests = rows(r, "depth")
    check([(t["test"], t["n_depth"]) for t in tests] ==
          [("pp8", 0), ("tg2", 0), ("pp8 @ d16", 16), ("tg2 @ d16", 16)], "depth rows %r" % tests)
    check(all(positive(t["avg_ts"]) for t in tests), "depth t/s")
    r = run("-m", MODEL, "-p", "0", "-n", "2", "-d", "4", "-r", "1", "-t", "1")
    check(r.returncode == 0 and b"tg2 @ d4" in r.stdout, "depth markdown %r" % r.stdout[-300:])


def test_errors(tmp):
    missing = os.path.join(tmp, "none.gguf")
    vocab_only = os.path.join(DATA, "vocab", "ggml-vocab-llama-spm.gguf")  # no weights
    for args, code, why in ((["-m", missing], 1, b"none.gguf"),
                            (["-m", vocab_only], 1, b"token_embd"),
                            ([], 2, b"need -m"),
                            (["-m", MODEL, "-r", "0"], 2, b"-r"),
                            (["-m", MODEL, "-p", "16,x"], 2, b"-p"),
                            (["-m", MODEL, "-n", "-4"], 2, b"-n"),
                            (["-m", MODEL, "-p", "99999999"], 2, b"-p"),
                            (["-m", MODEL, "-b", "0"], 2, b"-b"),
                            (["-m", MODEL, "-t", "0"], 2, b"-t"),
                            (["-m", MODEL, "-o", "csv"], 2, b"md or json"),
                            (["-m", MODEL, "-p", "0", "-n", "0"], 2, b"nothing to measure"),
                            (["-m", MODEL, "--bogus"], 2, b"unknown option"),
                            (["-m", MODEL, "-p"], 2, b"missing value"),
                            (["-m", MODEL, "--batch", "257"], 2, b"--batch"),
                            (["-m", MODEL, "--batch", "0"], 2, b"--batch"),
                            (["-m", MODEL, "-ngl", "-2"], 2, b"-ngl"),
                            (["-m", MODEL, "-d", "-1"], 2, b"-d"),
                            (["-m", MODEL, "-d", "8", "--batch", "2"], 2, b"--batch"),
                            (["-m", MODEL, "-d", ",".join(["1"] * 64), "-n",
                              ",".join(["1"] * 64), "--batch", ",".join(["1"] * 64)], 2,
                             b"more than")):
        r = run(*args)
        check(r.returncode == code and r.stderr.startswith(b"oxidize bench:") and why in r.stderr,
              "%s -> %d %r" % (args, r.returncode, r.stderr[-300:]))
    r = run("--help")
    check(r.returncode == 0 and b"usage: oxidize bench" in r.stdout, "--help")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_json()
        test_markdown()
        test_batch()
        test_depth()
        test_errors(tmp)
    print("test_bench: %d checks, %d passed, %d failed" % (checks, checks - failures, failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
