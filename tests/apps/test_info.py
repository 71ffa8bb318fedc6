#!/usr/bin/env python3
"""test_info.py: checks `oxidize info` against an independent pure-Python GGUF parser.

usage: test_info.py PATH/TO/oxidize
Reference models come from $OX_TESTDATA/models (default: ../shared/testdata beside the repo).
Standard library only, so it runs wherever python3 does.
"""
import json
import math
import os
import random
import re
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
MAX_ARRAY = 16  # arrays longer than this are summarized as {"type", "count"}

# ggml tensor types: id -> (name, block size, bytes per block); mirrors OX_DTYPE_LIST.
DTYPES = {
    0: ("f32", 1, 4), 1: ("f16", 1, 2), 2: ("q4_0", 32, 18), 3: ("q4_1", 32, 20),
    6: ("q5_0", 32, 22), 7: ("q5_1", 32, 24), 8: ("q8_0", 32, 34), 9: ("q8_1", 32, 36),
    10: ("q2_K", 256, 84), 11: ("q3_K", 256, 110), 12: ("q4_K", 256, 144),
    13: ("q5_K", 256, 176), 14: ("q6_K", 256, 210), 15: ("q8_K", 256, 292),
    16: ("iq2_xxs", 256, 66), 17: ("iq2_xs", 256, 74), 18: ("iq3_xxs", 256, 98),
    19: ("iq1_s", 256, 50), 20: ("iq4_nl", 32, 18), 21: ("iq3_s", 256, 110),
    22: ("iq2_s", 256, 82), 23: ("iq4_xs", 256, 136), 24: ("i8", 1, 1), 25: ("i16", 1, 2),
    26: ("i32", 1, 4), 27: ("i64", 1, 8), 28: ("f64", 1, 8), 29: ("iq1_m", 256, 56),
    30: ("bf16", 1, 2), 34: ("tq1_0", 256, 54), 35: ("tq2_0", 256, 66),
    39: ("mxfp4", 32, 17), 40: ("nvfp4", 64, 36), 41: ("q1_0", 128, 18), 42: ("q2_0", 64, 18),
}

# GGUF metadata types: id -> (name as ox_gguf_type_name spells it, struct format or None).
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
GTYPES = {
    U8: ("u8", "<B"), I8: ("i8", "<b"), U16: ("u16", "<H"), I16: ("i16", "<h"),
    U32: ("u32", "<I"), I32: ("i32", "<i"), F32: ("f32", "<f"), BOOL: ("bool", "<?"),
    STR: ("str", None), ARR: ("arr", None), U64: ("u64", "<Q"), I64: ("i64", "<q"),
    F64: ("f64", "<d"),
}


# ---- Independent GGUF reader -------------------------------------------------------------

class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.data[self.pos:self.pos + n]
        if len(s) != n:
            raise ValueError("string past end of file")
        self.pos += n
        return s

    def value(self, t):
        """(type, payload): scalars as Python values (f32 kept as its 4 raw bytes), strings as
        bytes, arrays as (elem_type, [values...])."""
        if t == STR:
            return (t, self.string())
        if t == ARR:
            et, n = self.take("<I"), self.take("<Q")
            return (t, (et, [self.value(et) for _ in range(n)]))
        if t == F32:
            raw = self.data[self.pos:self.pos + 4]
            self.pos += 4
            return (t, raw)
        return (t, self.take(GTYPES[t][1]))


def parse_gguf(path):
    with open(path, "rb") as f:
        data = f.read()
    r = Reader(data)
    if r.take("<I") != 0x46554747:
        raise ValueError("bad magic")
    version = r.take("<I")
    n_tensors, n_kv = r.take("<Q"), r.take("<Q")
    kv = []
    for _ in range(n_kv):
        key = r.string().decode("utf-8")
        kv.append((key, r.value(r.take("<I"))))
    tensors = []
    for _ in range(n_tensors):
        name = r.string().decode("utf-8")
        n_dims = r.take("<I")
        ne = [r.take("<Q") for _ in range(n_dims)]
        ttype, offset = r.take("<I"), r.take("<Q")
        tname, blck, tsize = DTYPES[ttype]
        elems = math.prod(ne)
        nbytes = ne[0] // blck * tsize * math.prod(ne[1:])
        tensors.append(dict(name=name, type=tname, shape=ne, offset=offset, bytes=nbytes,
                            elems=elems))
    align = 32
    for key, (t, v) in kv:
        if key == "general.alignment":
            align = v
    data_offset = (r.pos + align - 1) // align * align
    return dict(version=version, alignment=align, data_offset=data_offset, file_size=len(data),
                kv=kv, tensors=tensors)


# ---- Comparing values ---------------------------------------------------------------------

def f32_from_raw(raw):
    return struct.unpack("<f", raw)[0]


def value_mismatch(tv, got, where):
    """None when the JSON value got matches the file's value tv, else a description."""
    t, v = tv
    if t == ARR:
        et, items = v
        if len(items) > MAX_ARRAY:
            want = {"type": GTYPES[et][0], "count": len(items)}
            return None if got == want else f"{where}: {got!r} != {want!r}"
        if not isinstance(got, list) or len(got) != len(items):
            return f"{where}: expected a list of {len(items)}, got {str(got)[:80]}"
        for i, (item, g) in enumerate(zip(items, got)):
            m = value_mismatch(item, g, f"{where}[{i}]")
            if m:
                return m
        return None
    if t in (F32, F64):
        x = f32_from_raw(v) if t == F32 else v
        if not math.isfinite(x):
            return None if got is None else f"{where}: non-finite {x} must be null, got {got!r}"
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            return f"{where}: expected number, got {got!r}"
        # f32 is printed with 9 digits: exact once rounded back to f32; f64 must be exact.
        got = float(got)
        same = struct.pack("<f", got) == v if t == F32 else got == x and (
            math.copysign(1, got) == math.copysign(1, x))
        return None if same else f"{where}: {got!r} != {x!r}"
    if t == STR:
        want = v.decode("utf-8", errors="replace")
        return None if got == want else f"{where}: {got!r:.80} != {want!r:.80}"
    if t == BOOL:
        return None if got is v else f"{where}: {got!r} != {v!r}"
    # Integers must come out exact (u64/i64 included), and not as floats or bools.
    if type(got) is not int or got != v:
        return f"{where}: {got!r} != {v!r}"
    return None


def reject_constant(name):
    raise ValueError(f"non-standard JSON constant {name}")


def strict_json(text):
    """Parse like a strict JSON reader: no NaN/Infinity, no duplicate keys (order kept)."""
    def pairs(kvs):
        keys = [k for k, _ in kvs]
        if len(set(keys)) != len(keys):
            raise ValueError("duplicate key in object")
        return dict(kvs)
    return json.loads(text, parse_constant=reject_constant, object_pairs_hook=pairs)


# ---- Test harness --------------------------------------------------------------------------

class Checks:
    def __init__(self):
        self.n = self.passed = 0
        self.failures = []

    def check(self, name, ok, detail=""):
        self.n += 1
        if ok:
            self.passed += 1
        else:
            self.failures.append(f"{name}: {detail}")
            print(f"FAIL {name}: {detail}", flush=True)
        return ok


def run(binary, *args, timeout=120):
    p = subprocess.run([binary, *args], capture_output=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def check_json(c, binary, path, label):
    """Run --json on path, compare everything with parse_gguf; returns the parsed ref."""
    ref = parse_gguf(path)
    rc, out, err = run(binary, "info", "--json", path)
    if not c.check(f"{label}: exit 0", rc == 0, f"rc={rc} stderr={err[:300]!r}"):
        return ref
    try:
        j = strict_json(out.decode("utf-8"))
    except ValueError as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        c.check(f"{label}: valid JSON", False, str(e))
        return ref
    c.check(f"{label}: valid JSON", isinstance(j, dict), type(j).__name__)
    for field in ("version", "alignment", "data_offset", "file_size"):
        c.check(f"{label}: {field}", j.get(field) == ref[field], f"{j.get(field)} != {ref[field]}")
    meta = j.get("metadata", {})
    keys = [k for k, _ in ref["kv"]]
    c.check(f"{label}: metadata keys in order", list(meta) == keys,
            f"{list(meta)[:5]}... vs {keys[:5]}...")
    bad = [m for k, tv in ref["kv"] if (m := value_mismatch(tv, meta.get(k), k))]
    c.check(f"{label}: metadata values", not bad, "; ".join(bad[:5]))
    check_tensors(c, j, ref, label)
    rc2, out2, _ = run(binary, "info", path, "--json")
    c.check(f"{label}: --json after the path", rc2 == 0 and out2 == out, f"rc={rc2}")
    return ref


def check_tensors(c, j, ref, label):
    got = j.get("tensors", [])
    want = [{k: t[k] for k in ("name", "type", "shape", "offset", "bytes")}
            for t in ref["tensors"]]
    c.check(f"{label}: tensor count", len(got) == len(want), f"{len(got)} != {len(want)}")
    bad = [f"{w['name']}: {g} != {w}" for g, w in zip(got, want) if g != w]
    c.check(f"{label}: tensors", not bad, "; ".join(bad[:3]))
    n_params = sum(t["elems"] for t in ref["tensors"])
    n_bytes = sum(t["bytes"] for t in ref["tensors"])
    c.check(f"{label}: n_params", j.get("n_params") == n_params, f"{j.get('n_params')} != {n_params}")
    c.check(f"{label}: n_bytes", j.get("n_bytes") == n_bytes, f"{j.get('n_bytes')} != {n_bytes}")


def check_text(c, binary, path, ref, label):
    rc, out, err = run(binary, "info", path)
    if not c.check(f"{label}: text exit 0", rc == 0, f"rc={rc} stderr={err[:300]!r}"):
        return
    try:
        text = out.decode("utf-8")
    except UnicodeDecodeError as e:
        c.check(f"{label}: text is UTF-8", False, str(e))
        return
    arch = dict(ref["kv"]).get("general.architecture", (STR, b""))[1].decode("utf-8", "replace")
    c.check(f"{label}: text names the architecture", f"architecture: {arch}" in text, arch)
    # every shared model's architecture is one oxidize runs, and info says how; the
    # synthetic file's "synth" is refused with the supported list
    says = "oxidize does not support it (supported: llama" if arch == "synth" else "oxidize runs it with "
    c.check(f"{label}: text says how oxidize runs the architecture", says in text, arch)
    missing = [t["name"] for t in ref["tensors"] if t["name"] not in text]
    c.check(f"{label}: text lists every tensor", not missing, str(missing[:5]))
    n_params = sum(t["elems"] for t in ref["tensors"])
    c.check(f"{label}: text shows the parameter count", str(n_params) in text, str(n_params))


def expect_failure(c, binary, path, label, want_rc=1, args=("info",)):
    rc, out, err = run(binary, *args, path)
    msg = err.decode("utf-8", "replace")
    # Exactly one line: anything more (a sanitizer report, say) means something went wrong.
    prefix = f"oxidize info: {path}: "
    ok = (rc == want_rc and msg.startswith(prefix) and msg.endswith("\n")
          and msg.count("\n") == 1 and len(msg.strip()) > len(prefix.strip()))
    c.check(f"{label}: exit {want_rc} with a message", ok, f"rc={rc} stderr={msg[:200]!r}")


# ---- Synthetic file with every value kind --------------------------------------------------

def gguf_string(b):
    return struct.pack("<Q", len(b)) + b


def gguf_value(t, v):
    if t == STR:
        return gguf_string(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(gguf_value(et, x) for x in items)
    return struct.pack(GTYPES[t][1], v)


SYNTH_KV = [
    (b"general.architecture", STR, b"synth"),
    (b"general.alignment", U32, 64),
    (b"synth.block_count", U32, 2),
    (b"synth.u8", U8, 255), (b"synth.i8", I8, -128), (b"synth.u16", U16, 65535),
    (b"synth.i16", I16, -32768), (b"synth.u32", U32, 2**32 - 1), (b"synth.i32", I32, -2**31),
    (b"synth.u64", U64, 2**64 - 1), (b"synth.i64", I64, -2**63),
    (b"synth.f32", F32, 1e-5), (b"synth.f32_tiny", F32, 1e-45), (b"synth.f32_neg0", F32, -0.0),
    (b"synth.f32_nan", F32, float("nan")), (b"synth.f32_inf", F32, float("-inf")),
    (b"synth.f64", F64, 0.1), (b"synth.f64_big", F64, 1.7976931348623157e308),
    (b"synth.f64_inf", F64, float("inf")),
    (b"synth.true", BOOL, True), (b"synth.false", BOOL, False),
    (b"test.empty", STR, b""),
    (b"test.escapes", STR, b"q\" b\\ n\n r\r t\t b\b f\f nul\x00 esc\x1b del\x7f /"),
    (b"test.utf8", STR, "h\u00e9llo \u20ac \U0001F600 \u2028".encode("utf-8")),
    (b"test.bad_utf8", STR, b"a\xffb\xc0\xafc\xe2\x82d\xed\xa0\x80e\xf0\x9f\x98f\xf4\x90\x80\x80"
                            b"g\xc3"),
    (b"test.long", STR, ("x" * 100 + "\u00e9" * 50 + "\nline2").encode("utf-8")),
    (b"test.arr_empty", ARR, (U32, [])),
    (b"test.arr_16", ARR, (I32, list(range(-8, 8)))),
    (b"test.arr_17", ARR, (I32, list(range(17)))),
    (b"test.arr_str", ARR, (STR, [b"a", b"\xff", b"c\"d"])),
    (b"test.arr_f32", ARR, (F32, [0.5, float("nan"), 3.4028234663852886e38])),
    (b"test.arr_bool", ARR, (BOOL, [True, False])),
    (b"test.nested", ARR, (ARR, [(U8, [1, 2]), (STR, [b"x"]), (ARR, [(I64, [-1])]),
                                 (U16, list(range(20)))])),
    (b"test.nested_long", ARR, (ARR, [(U8, [i]) for i in range(17)])),
    (b"tokenizer.ggml.model", STR, b"gpt2"),
    (b"tokenizer.ggml.tokens", ARR, (STR, [bytes([65 + i % 26]) * (1 + i % 3) for i in range(40)])),
    (b"tokenizer.ggml.bos_token_id", U32, 1),
    (b"tokenizer.chat_template", STR, b"{{ messages }}"),
]


def encode_kv_value(t, v):
    """The SYNTH_KV payload with nested (type, items) pairs turned into plain items."""
    if t == ARR:
        et, items = v
        if et == ARR:
            return (et, [encode_kv_value(ARR, x) for x in items])
        return (et, items)
    return v


def write_synth(path):
    """A small GGUF v3 file with every metadata kind, alignment 64 and two tensors."""
    tensors = [(b"a.weight", 0, [8, 4]), (b"b.weight", 8, [64, 2])]  # f32, q8_0
    kv = b"".join(gguf_string(k) + struct.pack("<I", t) + gguf_value(t, encode_kv_value(t, v))
                  for k, t, v in SYNTH_KV)
    head = struct.pack("<IIQQ", 0x46554747, 3, len(tensors), len(SYNTH_KV)) + kv
    offset, blobs = 0, []
    for name, ttype, ne in tensors:
        _, blck, tsize = DTYPES[ttype]
        nbytes = ne[0] // blck * tsize * math.prod(ne[1:])
        head += gguf_string(name) + struct.pack("<I", len(ne)) + b"".join(
            struct.pack("<Q", n) for n in ne) + struct.pack("<IQ", ttype, offset)
        blob = bytes(nbytes) + bytes(-nbytes % 64)
        blobs.append(blob)
        offset += len(blob)
    head += bytes(-len(head) % 64)
    with open(path, "wb") as f:
        f.write(head + b"".join(blobs))


def check_synth(c, binary, tmp):
    path = os.path.join(tmp, "synth.gguf")
    write_synth(path)
    ref = check_json(c, binary, path, "synth")
    check_text(c, binary, path, ref, "synth")
    rc, out, _ = run(binary, "info", "--json", path)
    if rc != 0:
        return
    meta = strict_json(out.decode("utf-8"))["metadata"]
    # A few spelled-out expectations, so the test does not only agree with itself.
    c.check("synth: nan is null", meta["synth.f32_nan"] is None and meta["synth.f64_inf"] is None)
    c.check("synth: u64 max exact", meta["synth.u64"] == 2**64 - 1, str(meta["synth.u64"]))
    c.check("synth: bad utf-8 replaced", meta["test.bad_utf8"] ==
            "a\ufffdb\ufffd\ufffdc\ufffdd\ufffd\ufffd\ufffde\ufffdf\ufffd\ufffd\ufffd\ufffdg\ufffd",
            repr(meta["test.bad_utf8"]))
    c.check("synth: 17-element array summarized",
            meta["test.arr_17"] == {"type": "i32", "count": 17}, str(meta["test.arr_17"]))
    c.check("synth: nested arrays", meta["test.nested"] ==
            [[1, 2], ["x"], [[-1]], {"type": "u16", "count": 20}], str(meta["test.nested"]))
    rc, out, _ = run(binary, "info", path)
    lines = out.decode("utf-8", "replace").splitlines()
    long_lines = [ln for ln in lines if "test." in ln and len(ln) > 200]
    c.check("synth: text keeps strings to one short line", not long_lines, str(long_lines[:1]))
    c.check("synth: text shows long arrays as [type x count]",
            any("[i32 x 17]" in ln for ln in lines), "no '[i32 x 17]'")


# ---- Broken inputs -------------------------------------------------------------------------

def check_broken(c, binary, tmp, model):
    ref = parse_gguf(model)
    with open(model, "rb") as f:
        data = f.read()
    data_end = ref["data_offset"] + max((t["offset"] + t["bytes"] for t in ref["tensors"]),
                                        default=0)
    cuts = {"3 bytes": 3, "header only": 24, "half the metadata": ref["data_offset"] // 2,
            "no tensor data": ref["data_offset"], "last byte of data missing": data_end - 1}
    for what, n in cuts.items():
        path = os.path.join(tmp, f"truncated-{n}.gguf")
        with open(path, "wb") as f:
            f.write(data[:n])
        expect_failure(c, binary, path, f"truncated ({what})")
    rng = random.Random(1234)
    randoms = {"random bytes": bytes(rng.getrandbits(8) for _ in range(4096)),
               "magic then random": b"GGUF\x03\x00\x00\x00" + bytes(
                   rng.getrandbits(8) for _ in range(4096)),
               "empty file": b""}
    for what, blob in randoms.items():
        path = os.path.join(tmp, what.replace(" ", "_") + ".gguf")
        with open(path, "wb") as f:
            f.write(blob)
        expect_failure(c, binary, path, what)
    expect_failure(c, binary, os.path.join(tmp, "does-not-exist.gguf"), "missing file")
    expect_failure(c, binary, tmp, "a directory")
    check_mutations(c, binary, tmp, data, ref["data_offset"], rng)


def check_mutations(c, binary, tmp, data, header_len, rng, count=100):
    """Random byte flips in the header: the file may open or be rejected, but never crash."""
    path = os.path.join(tmp, "mutated.gguf")
    bad = []
    for i in range(count):
        blob = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            blob[rng.randrange(header_len)] = rng.getrandbits(8)
        with open(path, "wb") as f:
            f.write(blob)
        rc, out, err = run(binary, "info", "--json", path)
        if rc == 0:
            try:
                strict_json(out.decode("utf-8"))
            except ValueError as e:
                bad.append(f"mutation {i}: invalid JSON ({e})")
        elif rc != 1 or not err.startswith(b"oxidize info: ") or err.count(b"\n") != 1:
            bad.append(f"mutation {i}: rc={rc} stderr={err[:200]!r}")
    c.check(f"{count} header mutations exit 0 or 1, JSON always valid", not bad, "; ".join(bad[:3]))


def check_cli(c, binary):
    rc, out, err = run(binary)
    c.check("no args: exit 2 with usage", rc == 2 and b"usage" in err, f"rc={rc}")
    rc, out, err = run(binary, "info")
    c.check("info without a file: exit 2 with usage", rc == 2 and b"usage" in err, f"rc={rc}")
    rc, out, err = run(binary, "info", "--bogus", "x.gguf")
    c.check("info --bogus: exit 2", rc == 2, f"rc={rc}")
    # --architectures: one supported general.architecture a line, the ones the shared and the
    # repository's reference models have among them; with a file it is bad usage
    rc, out, err = run(binary, "info", "--architectures")
    names = out.decode().split("\n")
    c.check("info --architectures: one name a line", rc == 0 and names[-1] == "" and
            {"llama", "qwen3moe", "gemma3", "qwen35"} <= set(names) and
            all(n and " " not in n and "," not in n for n in names[:-1]), f"rc={rc} {names[:20]}")
    rc, out, err = run(binary, "info", "--architectures", "x.gguf")
    c.check("info --architectures FILE: exit 2", rc == 2, f"rc={rc}")
    rc, out, err = run(binary, "frobnicate")
    c.check("unknown command: exit 2 with usage", rc == 2 and b"usage" in err, f"rc={rc}")
    rc, out, err = run(binary, "--help")
    c.check("--help: exit 0, lists info", rc == 0 and b"info" in out, f"rc={rc}")
    with open(os.path.join(REPO, "include", "oxidize.h")) as f:
        version = re.search(r'#define OX_VERSION_STRING "([^"]+)"', f.read()).group(1)
    rc, out, err = run(binary, "--version")
    c.check("--version prints OX_VERSION_STRING", rc == 0 and version.encode() in out,
            f"rc={rc} out={out[:80]!r}")
    lines = out.decode().split("\n")
    commit = re.search(r"\(commit ([0-9a-f]{7,}(-dirty)?|unknown)\)", lines[0])
    c.check("--version names the commit", commit is not None, lines[0])
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO,
                          capture_output=True).stdout.decode().strip()
    c.check("--version's commit is the checkout's (when built from it)",
            not head or commit is not None and commit.group(1).startswith(head[:7]) or
            commit is not None and commit.group(1) == "unknown", f"{lines[0]} head={head}")
    c.check("--version lists the backends",
            any(re.fullmatch(r"backends: cpu(, cuda \((device found|no device)\))?", ln)
                for ln in lines), out.decode())
    for typo, meant in (("rnu", "run"), ("tokenise", "tokenize"), ("serv", "serve"),
                        ("quant", "quantize")):
        rc, out, err = run(binary, typo)
        c.check(f"'{typo}' suggests '{meant}'",
                rc == 2 and f"did you mean '{meant}'?".encode() in err, err[:120])
    rc, out, err = run(binary, "frobnicate")
    c.check("a name far from every command suggests none", b"did you mean" not in err, err[:120])


def main():
    if len(sys.argv) != 2:
        print("usage: test_info.py PATH/TO/oxidize", file=sys.stderr)
        return 2
    binary = os.path.abspath(sys.argv[1])
    testdata = os.environ.get("OX_TESTDATA") or os.path.join(REPO, "..", "shared", "testdata")
    models_dir = os.path.join(testdata, "models")
    models = sorted(m for m in os.listdir(models_dir) if m.endswith(".gguf"))
    c = Checks()
    c.check("reference models found", bool(models), models_dir)
    check_cli(c, binary)
    for m in models:
        path = os.path.join(models_dir, m)
        ref = check_json(c, binary, path, m)
        check_text(c, binary, path, ref, m)
    with tempfile.TemporaryDirectory(prefix="ox_test_info_") as tmp:
        check_synth(c, binary, tmp)
        smallest = min((os.path.join(models_dir, m) for m in models), key=os.path.getsize)
        check_broken(c, binary, tmp, smallest)
    failed = c.n - c.passed
    print(f"test_info: {c.n} checks, {c.passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
