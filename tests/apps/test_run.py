#!/usr/bin/env python3
"""test_run.py: `oxidize run` and `oxidize logits` against llama.cpp's reference outputs.

usage: test_run.py PATH/TO/oxidize   (reference data from $OX_TESTDATA)
"""
import json
import math
import os
import re
import struct
import subprocess
import sys
import tempfile

OXIDIZE = sys.argv[1]
REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DATA = os.environ.get("OX_TESTDATA") or os.path.join(REPO, "..", "shared", "testdata")
checks = failures = 0


def check(cond, what):
    global checks, failures
    checks += 1
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def ref(name):
    with open(os.path.join(DATA, "reference", name + ".json")) as f:
        return json.load(f)


def model(name):
    return os.path.join(DATA, "models", name + ".gguf")


def test_greedy_text():
    """Greedy generation after the reference text gives llama.cpp's continuation, byte for byte."""
    floats = sorted(f[:-5] for f in os.listdir(os.path.join(DATA, "reference"))
                    if f.endswith("f16.json") or f.endswith("f32.json"))
    for name in ["kjv-15m-q4_k_m"] + floats:  # quantized files may tie-break
        r = ref(name)
        out = subprocess.run([OXIDIZE, "run", "-m", model(name), "-p", r["text"], "-n",
                              str(len(r["text_greedy"])), "--temp", "0", "-t", "2"],
                             capture_output=True)
        want = r["text"].encode() + bytes.fromhex(r["text_greedy_detok_hex"])
        check(out.returncode == 0, "%s: rc %d %s" % (name, out.returncode, out.stderr[-200:]))
        got = out.stdout.rstrip(b"\n")
        check(got == want, "%s: greedy text %r != %r" % (name, got[-80:], want[-80:]))
        check(b"tokens/s" in out.stderr, "%s: speed reported" % name)


def kl(a, b):
    ma, mb = max(a), max(b)
    za = sum(math.exp(x - ma) for x in a)
    zb = sum(math.exp(x - mb) for x in b)
    return sum(math.exp(x - ma) / za * ((x - ma - math.log(za)) - (y - mb - math.log(zb)))
               for x, y in zip(a, b))


def test_logits(tmp):
    r = ref("llama-f32")
    n, nv = len(r["prompt"]), r["n_vocab"]
    out, gj, gl = (os.path.join(tmp, f) for f in ("l.f32", "g.json", "g.f32"))
    p = subprocess.run([OXIDIZE, "logits", "-m", model("llama-f32"), "--tokens",
                        ",".join(map(str, r["prompt"])), "--out", out, "--greedy", "16",
                        "--greedy-out", gj, "--greedy-logits", gl], capture_output=True)
    check(p.returncode == 0, "logits: %s" % p.stderr)
    with open(out, "rb") as f, open(os.path.join(DATA, "reference", r["logits"]), "rb") as g:
        ours, theirs = f.read(), g.read()
    check(len(ours) == n * nv * 4, "logits size")
    worst = 0.0
    for i in range(0, n, 7):  # a sample of positions keeps this quick in pure Python
        a = struct.unpack_from("<%df" % nv, theirs, i * nv * 4)
        b = struct.unpack_from("<%df" % nv, ours, i * nv * 4)
        worst = max(worst, kl(a, b))
    check(worst < 1e-5, "logits KL %.3g" % worst)
    with open(gj) as f:
        check(json.load(f)["tokens"] == r["greedy"], "greedy tokens")
    check(os.path.getsize(gl) == 16 * nv * 4, "greedy logits size")


def test_sampling_flags():
    """The extended samplers are wired in: each changes greedy or seeded output on real text,
    seeds reproduce, and out-of-range values are refused."""
    def gen(*args):
        p = subprocess.run([OXIDIZE, "run", "-m", model("kjv-15m-q4_k_m"), "-p", "And God said",
                            "-n", "40", "-t", "2", *args], capture_output=True)  # DRY: repeats
        check(p.returncode == 0, "run %s: %r" % (args, p.stderr[-200:]))
        return p.stdout
    greedy = gen("--temp", "0")
    for args in (["--repeat-penalty", "1.5"], ["--dry-multiplier", "0.8"],
                 ["--presence-penalty", "1.0"], ["--frequency-penalty", "1.0"]):
        check(gen("--temp", "0", *args) != greedy, "%s changes greedy output" % args)
    for args in (["--mirostat", "2"], ["--mirostat", "1"], ["--xtc-probability", "0.5"],
                 ["--typical", "0.5", "--top-n-sigma", "1"]):
        a, b = gen("--seed", "7", *args), gen("--seed", "7", *args)
        check(a == b and len(a) > len(b"And God said"), "%s: seeded runs repeat" % args)
    for args in (["--typical", "2"], ["--mirostat", "3"], ["--repeat-penalty", "0"],
                 ["--xtc-threshold", "nan"], ["--dry-penalty-last-n", "-2"]):
        p = subprocess.run([OXIDIZE, "run", "-m", model("kjv-15m-q4_k_m"), "-p", "x", *args],
                           capture_output=True)
        check(p.returncode == 2, "%s refused" % args)


def test_grammar(tmp):
    """--grammar-file: the continuation is exactly a sentence of the grammar, ended where the
    grammar ends; a grammar that does not parse is refused with its reason."""
    g = os.path.join(tmp, "g.gbnf")
    with open(g, "w") as f:
        f.write('root ::= " unto " ("the LORD" | "Moses") ", " [A-Z] [a-z]+ "."\n')
    for seed in ("1", "2", "3"):
        p = subprocess.run([OXIDIZE, "run", "-m", model("kjv-15m-q4_k_m"), "-p", "And God said",
                            "-n", "40", "--seed", seed, "-t", "2", "--grammar-file", g],
                           capture_output=True)
        out = p.stdout.decode("utf-8", "replace").rstrip("\n")[len("And God said"):]
        check(p.returncode == 0 and re.fullmatch(r" ?unto (the LORD|Moses), [A-Z][a-z]+\.", out),
              "grammar seed %s: %r" % (seed, out))
    with open(g, "w") as f:
        f.write('root ::= "a" missing\n')
    p = subprocess.run([OXIDIZE, "run", "-m", model("kjv-15m-q4_k_m"), "-p", "x", "--grammar-file",
                        g], capture_output=True)
    check(p.returncode == 1 and b"missing" in p.stderr, "undefined rule refused: %r" % p.stderr)


SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 15, "maximum": 312},
        "color": {"enum": ["red", "green", "blue"]},
        "ok": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 3},
        "note": {"type": "string", "pattern": "^[A-Z][a-z]{0,8}$"},
    },
    "required": ["name", "age", "color", "ok", "tags"],
    "additionalProperties": False,
}


def satisfies(v):
    """SCHEMA checked by hand (no jsonschema module here)."""
    props = SCHEMA["properties"]
    return (isinstance(v, dict) and set(SCHEMA["required"]) <= set(v) and set(v) <= set(props)
            and list(v) == [k for k in props if k in v]  # declared order, as generated
            and isinstance(v["name"], str) and len(v["name"]) <= 20
            and type(v["age"]) is int and 15 <= v["age"] <= 312
            and v["color"] in ("red", "green", "blue") and type(v["ok"]) is bool
            and isinstance(v["tags"], list) and len(v["tags"]) <= 3
            and all(isinstance(t, str) and len(t) <= 10 for t in v["tags"])
            and ("note" not in v or re.fullmatch(r"[A-Z][a-z]{0,8}", v["note"]) is not None))


def test_json_schema(tmp):
    """--json-schema / -j / --json-schema-file: the continuation is JSON that satisfies the
    schema; a bad schema, or two output constraints at once, is refused with a clear message."""
    prompt = "And God said"
    sf = os.path.join(tmp, "s.json")
    with open(sf, "w") as f:
        json.dump(SCHEMA, f)
    runs = [("--json-schema", json.dumps(SCHEMA), seed, temp)
            for seed, temp in (("1", "0.8"), ("2", "1.5"), ("3", "0"), ("4", "3"))]
    runs += [("-j", json.dumps(SCHEMA), "5", "1"), ("--json-schema-file", sf, "6", "1")]
    for opt, arg, seed, temp in runs:
        p = subprocess.run([OXIDIZE, "run", "-m", model("kjv-15m-q4_k_m"), "-p", prompt, "-n",
                            "400", "--seed", seed, "--temp", temp, "-t", "2", opt, arg],
                           capture_output=True)
        out = p.stdout.decode("utf-8", "replace")
        check(p.returncode == 0 and out.startswith(prompt), "%s seed %s: %r" % (opt, seed, p.stderr))
        try:
            v = json.loads(out[len(prompt):])
        except ValueError:
            v = None
        check(satisfies(v), "%s seed %s temp %s: %r" % (opt, seed, temp, out[len(prompt):]))
    # Prompt tokens feed the penalties, not the grammar: the prompt "X" (token " X") must not
    # count as the grammar's first " X", which the answer itself has to produce.
    p = subprocess.run([OXIDIZE, "run", "-m", model("kjv-15m-q4_k_m"), "-p", "X", "-n", "20",
                        "--grammar", 'root ::= " X" [a-z]{1,8} "."'], capture_output=True)
    out = p.stdout.decode("utf-8", "replace").rstrip("\n")
    check(p.returncode == 0 and re.fullmatch(r"X X[a-z]{1,8}\.", out) is not None,
          "the prompt advanced the grammar: %r" % out)
    base = [OXIDIZE, "run", "-m", model("kjv-15m-q4_k_m"), "-p", prompt, "-n", "5"]
    for args, rc, words in (
            (["--json-schema", '{"type": "integer", "minimum": 5, "maximum": 1}'], 1,
             [b"--json-schema", b"json schema", b"minimum"]),
            (["--json-schema", '{"type": '], 1, [b"not valid JSON"]),
            (["--json-schema", '{"$ref": "http://x/s.json"}'], 1, [b"remote $ref"]),
            (["--json-schema-file", os.path.join(tmp, "none.json")], 1, [b"none.json"]),
            (["--grammar-file", sf, "--json-schema", "{}"], 2, [b"only one of"]),
            (["--grammar", 'root ::= "x"', "-j", "{}"], 2, [b"only one of"])):
        p = subprocess.run(base + args, capture_output=True)
        check(p.returncode == rc and all(w in p.stderr for w in words),
              "%s: rc %d %r" % (args, p.returncode, p.stderr))
    p = subprocess.run(base[:-2] + ["-n", "20", "--grammar", 'root ::= " unto Moses."'],
                       capture_output=True)
    check(p.returncode == 0 and p.stdout.rstrip(b"\n") in (prompt.encode() + b" unto Moses.",
                                                           prompt.encode() + b"unto Moses."),
          "--grammar inline: %r" % p.stdout)  # the first piece's space is dropped, as above


def test_stop():
    """--stop: output ends right before the first stop string (never printed, even when it
    spans tokens); the earliest of several wins; one that never appears changes nothing."""
    def gen(*args):
        p = subprocess.run([OXIDIZE, "run", "-m", model("kjv-15m-q4_k_m"), "-p", "And God said",
                            "-n", "40", "--temp", "0", "-t", "2", *args], capture_output=True)
        check(p.returncode == 0, "run %s: %r" % (args, p.stderr[-200:]))
        return p.stdout.rstrip(b"\n")
    full = gen()
    for stop in (b"of hosts", b"LORD,", b"D, I"):  # "D, I" spans three generated tokens
        if stop in full:
            check(gen("--stop", stop.decode()) == full[:full.index(stop)], "--stop %r" % stop)
    check(gen("--stop", "never appears") == full, "absent stop string")
    # two stops taken from the generated text (its greedy words differ between instruction-set
    # levels), the one found later given first: output ends before the one found first
    prompt_end = len(b"And God said")
    early, late = full[prompt_end + 8:prompt_end + 14], full[-7:]
    at = {s: full.index(s, prompt_end) for s in (early, late)}
    check(at[early] != at[late], "two stops found apart: %r" % at)
    cut = gen("--stop", late.decode(errors="ignore"), "--stop", early.decode(errors="ignore"))
    check(cut == full[:min(at.values())], "earliest of %r, %r: %r" % (late, early, cut[-30:]))
    p = subprocess.run([OXIDIZE, "run", "-m", model("kjv-15m-q4_k_m"), "-p", "x", "--stop", ""],
                       capture_output=True)
    check(p.returncode == 2, "empty --stop refused")


def test_chat():
    """--chat renders the prompt as a user message (after -sys) with the chat template; a model
    without one is refused unless --chat-template gives one."""
    tmpl = os.path.join(DATA, "chat", "templates", "Qwen-Qwen3-0.6B.jinja")

    def prompt_tokens(*args):
        p = subprocess.run([OXIDIZE, "run", "-m", model("kjv-15m-q4_k_m"), "-p", "Who made it?",
                            "-n", "4", "--temp", "0", "-t", "2", *args], capture_output=True)
        m = re.search(rb"prompt: (\d+) tokens", p.stderr)
        check(p.returncode == 0 and m, "run %s: %r" % (args, p.stderr[-200:]))
        return int(m.group(1)) if m else 0
    plain = prompt_tokens()
    chat = prompt_tokens("--chat", "--chat-template", tmpl)
    with_sys = prompt_tokens("--chat", "--chat-template", tmpl, "-sys", "Be brief.")
    check(plain < chat < with_sys, "chat prompt sizes %d %d %d" % (plain, chat, with_sys))
    p = subprocess.run([OXIDIZE, "run", "-m", model("kjv-15m-q4_k_m"), "-p", "x", "--chat"],
                       capture_output=True)
    check(p.returncode == 1 and b"has none" in p.stderr, "no template: %r" % p.stderr)


def test_errors():
    long_prompt = "word " * 3000
    p = subprocess.run([OXIDIZE, "run", "-m", model("llama-f32"), "-p", long_prompt, "-c", "64"],
                       capture_output=True)
    check(p.returncode == 1 and b"context holds" in p.stderr, "long prompt: %s" % p.stderr)
    vocab_only = os.path.join(DATA, "vocab", "ggml-vocab-llama-spm.gguf")  # no weights
    for args in (["-m", vocab_only, "-p", "x"], ["-m", "/nonexistent.gguf", "-p", "x"]):
        p = subprocess.run([OXIDIZE, "run", *args], capture_output=True)
        check(p.returncode == 1 and p.stderr.startswith(b"oxidize run:"), "error: %s" % p.stderr)
    p = subprocess.run([OXIDIZE, "run", "-m", model("llama-f32"), "-p", "x", "--top-p", "2"],
                       capture_output=True)
    check(p.returncode == 2, "bad --top-p")
    p = subprocess.run([OXIDIZE, "logits", "-m", model("llama-f32"), "--tokens", "1,x",
                        "--out", "/dev/null"], capture_output=True)
    check(p.returncode == 2, "bad --tokens")
    # the split over GPUs: bad values are usage errors; a GPU the machine lacks, the model's
    for args, code, why in ((["-sm", "rows"], 2, b"none, layer or row"),
                            (["-ts", "1,2,"], 2, b"--tensor-split"),
                            (["-ts", "1,-1"], 2, b"--tensor-split"),
                            (["-mg", "x"], 2, b"--main-gpu"),
                            (["-sm"], 2, b"missing value"),
                            (["--dist-world", "2"], 2, b"needs rank 0's --dist-addr"),
                            (["--dist-world", "2", "--dist-addr", "h:1", "--dist-rank", "2"], 2,
                             b"below 2"),
                            (["--dist-rank", "x"], 2, b"--dist-rank"),
                            (["-mg", "15"], 1, b"main_gpu 15, but there are")):
        p = subprocess.run([OXIDIZE, "run", "-m", model("llama-f32"), "-p", "x", "-n", "1", *args],
                           capture_output=True)
        check(p.returncode == code and why in p.stderr, "%s: %d %s" % (args, p.returncode,
                                                                      p.stderr[-200:]))
    env = dict(os.environ, WORLD_SIZE="x")  # torchrun's variables stand for the options
    p = subprocess.run([OXIDIZE, "run", "-m", model("llama-f32"), "-p", "x"], capture_output=True,
                       env=env)
    check(p.returncode == 2 and b"WORLD_SIZE" in p.stderr, "WORLD_SIZE=x: %s" % p.stderr[-200:])
    p = subprocess.run([OXIDIZE, "run", "-m", model("llama-f32"), "-p", "x", "-n", "1", "-ngl",
                        "0", "-sm", "row", "-ts", "1,1"], capture_output=True)
    check(p.returncode == 0, "-sm row on the CPU runs it there: %s" % p.stderr[-200:])


def test_isa():
    """OX_CPU_ISA: the scalar level gives the float model's greedy text of the best level, and a
    name this build does not know is refused before anything runs."""
    best = subprocess.run([OXIDIZE, "--version"], capture_output=True, text=True).stdout
    check(re.search(r"^isa: \S+$", best, re.M) is not None, "--version has no isa: line")
    args = [OXIDIZE, "run", "-m", model("llama-f32"), "-p", "Hello", "-n", "8", "--temp", "0"]
    texts = {}
    for level in ("", "scalar"):
        p = subprocess.run(args, capture_output=True, env=dict(os.environ, OX_CPU_ISA=level))
        check(p.returncode == 0, "OX_CPU_ISA=%s: %s" % (level, p.stderr))
        texts[level] = p.stdout
    check(texts[""] == texts["scalar"], "scalar level: %r vs %r" % (texts["scalar"], texts[""]))
    p = subprocess.run(args, capture_output=True, env=dict(os.environ, OX_CPU_ISA="avx9000"))
    check(p.returncode == 1 and b"unknown instruction set" in p.stderr, "bad level: %s" % p.stderr)


def test_prompt_cache(tmp):
    """--prompt-cache: the second run reuses all but the last prompt token and writes the same
    text; a prompt sharing a prefix reuses that prefix and writes what it writes without the
    cache; --prompt-cache-ro leaves the file as it was; another model's cache is not used."""
    cache = os.path.join(tmp, "prompt.cache")
    base = [OXIDIZE, "run", "-m", model("kjv-15m-q4_k_m"), "-n", "16", "--temp", "0", "-t", "2"]
    prompt = "In the beginning God created the heaven and the earth. And the earth was"
    runs = [subprocess.run(base + ["-p", prompt, "--prompt-cache", cache], capture_output=True,
                           text=True) for _ in range(2)]
    plain = subprocess.run(base + ["-p", prompt], capture_output=True, text=True)
    n = re.search(r"of (\d+) tokens reused", runs[0].stderr)
    n = int(n.group(1)) if n else 0
    check(all(r.returncode == 0 for r in runs) and "0 of %d tokens reused" % n in runs[0].stderr
          and "%d of %d tokens reused" % (n - 1, n) in runs[1].stderr, "prompt cache: %s" % runs[1].stderr)
    check(runs[0].stdout == runs[1].stdout == plain.stdout and n > 10, "prompt cache text: %r" % runs[1].stdout)
    before = open(cache, "rb").read()
    other = "In the beginning God created the light"
    r = subprocess.run(base + ["-p", other, "--prompt-cache", cache, "--prompt-cache-ro"],
                       capture_output=True, text=True)
    p = subprocess.run(base + ["-p", other], capture_output=True, text=True)
    check(r.returncode == 0 and re.search(r"prompt cache: [1-9]\d* of \d+ tokens reused", r.stderr)
          and r.stdout == p.stdout, "prompt cache prefix: %s %r %r" % (r.stderr, r.stdout, p.stdout))
    check(open(cache, "rb").read() == before, "--prompt-cache-ro rewrote the file")
    r = subprocess.run([OXIDIZE, "run", "-m", model("llama-q8_0"), "-p", "x y", "-n", "2",
                        "--prompt-cache", cache, "--prompt-cache-ro"], capture_output=True, text=True)
    check(r.returncode == 0 and "another model" in r.stderr and "0 of" in r.stderr,
          "another model's cache: %s" % r.stderr)


def test_context_shift():
    """--context-shift: past a full context of 64 the generation goes on to -n, and its text
    until the first shift is the text of the run that stops there."""
    base = [OXIDIZE, "run", "-m", model("kjv-15m-q4_k_m"), "-p", "In the beginning", "-n", "200",
            "-c", "64", "--temp", "0", "-t", "2"]
    plain = subprocess.run(base, capture_output=True, text=True)
    shifted = subprocess.run(base + ["--context-shift", "--keep", "2"], capture_output=True,
                             text=True)
    check(plain.returncode == 0 and "the context is full" in plain.stderr, "no shift: %s" % plain.stderr)
    check(shifted.returncode == 0 and "generation: 200 tokens" in shifted.stderr and
          "context is full" not in shifted.stderr, "shift: %s" % shifted.stderr)
    check(shifted.stdout.startswith(plain.stdout.rstrip("\n")) and
          len(shifted.stdout) > len(plain.stdout) + 100, "shifted text: %r vs %r" % (shifted.stdout, plain.stdout))


def test_speculative():
    """--spec ngram and -md: the text of plain decoding, greedy on every shared model with a
    language-model head and seeded sampling on kjv, with the drafts' acceptance reported;
    beside a context shift too; bad values, a draft of another vocabulary and a recurrent
    model refused with a message."""
    skip = {"bert-f16"}  # an encoder: no text to generate
    names = sorted(f[:-5] for f in os.listdir(os.path.join(DATA, "models"))
                   if f.endswith(".gguf") and f[:-5] not in skip)
    prompt = "And the waters were as the waters, and the waters were as the waters, and the"
    for name in names:
        base = [OXIDIZE, "run", "-m", model(name), "-p", prompt, "-n", "40", "--temp", "0",
                "-t", "2"]
        plain = subprocess.run(base, capture_output=True)
        spec = subprocess.run(base + ["--spec", "ngram"], capture_output=True)
        check(plain.returncode == 0 and spec.returncode == 0 and plain.stdout == spec.stdout,
              "%s: --spec ngram text %r != %r (%s)" % (name, spec.stdout[-60:], plain.stdout[-60:],
                                                       spec.stderr[-200:]))
        check(re.search(rb"speculative: \d+ steps, \d+ tokens drafted, \d+ accepted", spec.stderr),
              "%s: acceptance reported: %s" % (name, spec.stderr[-200:]))
    kjv = [OXIDIZE, "run", "-m", model("kjv-15m-q4_k_m"), "-p", prompt, "-n", "120", "-t", "2"]
    for extra in (["--temp", "0.8", "--seed", "7"], ["-c", "64", "--context-shift", "--temp", "0"]):
        plain = subprocess.run(kjv + extra, capture_output=True)
        for spec in (["--spec", "ngram", "--draft-max", "8"],
                     ["-md", model("kjv-15m-q4_k_m"), "--draft-p-min", "0.5"]):
            r = subprocess.run(kjv + extra + spec, capture_output=True)
            check(r.returncode == 0 and r.stdout == plain.stdout and len(plain.stdout) > 300,
                  "kjv %s %s: %r != %r" % (extra, spec, r.stdout[-60:], plain.stdout[-60:]))
    pair = [OXIDIZE, "run", "-m", model("llama-q8_0"), "-p", "Once upon a time", "-n", "40",
            "--temp", "0", "-t", "2"]
    plain = subprocess.run(pair, capture_output=True)
    r = subprocess.run(pair + ["-md", model("llama-q4_0"), "--draft-max", "4", "--draft-p-min", "0"],
                       capture_output=True)
    m = re.search(rb"(\d+) tokens drafted, (\d+) accepted", r.stderr)
    check(r.returncode == 0 and r.stdout == plain.stdout and m and int(m.group(2)) > 0,
          "q4_0 draft for q8_0: %r %s" % (r.stdout[-60:], r.stderr[-200:]))
    for bad in (["--spec", "lookahead"], ["--draft-max", "0"], ["--draft-min", "-1"],
                ["--draft-p-min", "2"], ["--spec-ngram-min", "0"]):
        r = subprocess.run(pair + bad, capture_output=True, text=True)
        check(r.returncode == 2 and "bad option or value" in r.stderr, "%s: %s" % (bad, r.stderr))
    r = subprocess.run(pair + ["--spec", "ngram", "--draft-max", "8", "--draft-min", "9"],
                       capture_output=True, text=True)
    check(r.returncode == 1 and "draft_min" in r.stderr, "draft-min over draft-max: %s" % r.stderr)
    r = subprocess.run(pair + ["-md", model("kjv-15m-q4_k_m")], capture_output=True, text=True)
    check(r.returncode == 1 and "vocabulary" in r.stderr, "another vocabulary: %s" % r.stderr)
    r = subprocess.run(pair + ["-md", os.path.join(DATA, "models", "missing.gguf")],
                       capture_output=True, text=True)
    check(r.returncode == 1 and "missing.gguf" in r.stderr, "a missing draft: %s" % r.stderr)
    recurrent = os.path.join(REPO, "tests", "data", "arch", "models", "qwen35-f16.gguf")
    if os.path.exists(recurrent):
        r = subprocess.run([OXIDIZE, "run", "-m", recurrent, "-p", "Hi", "-n", "4", "--spec",
                            "ngram"], capture_output=True, text=True)
        check(r.returncode == 1 and "recurrent" in r.stderr, "recurrent target: %s" % r.stderr)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_greedy_text()
        test_logits(tmp)
        test_sampling_flags()
        test_grammar(tmp)
        test_json_schema(tmp)
        test_stop()
        test_chat()
        test_errors()
        test_isa()
        test_prompt_cache(tmp)
        test_context_shift()
        test_speculative()
    print("test_run: %d checks, %d passed, %d failed" % (checks, checks - failures, failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
