#!/usr/bin/env python3
"""make_seeds.py: seed corpora for the libFuzzer targets, so mutations start deep inside the
input formats.
  make_seeds.py gguf DIR        small valid GGUF files (every value type, several tensor types)
  make_seeds.py tokenizer DIR   llama.cpp's tokenizer test inputs, one file per input, with the
                                leading byte that picks the vocabulary and flags
  make_seeds.py jinja DIR       the shared chat templates, each + NUL + a conversation as JSON
  make_seeds.py grammar DIR     the shared GBNF grammars, each + NUL + a sample text
  make_seeds.py json_schema DIR JSON schemas using every supported keyword
  make_seeds.py lora DIR        LoRA adapters for the shared llama-f16 model, good and bad
  make_seeds.py sampler_state DIR  sampler chains' saved states
  make_seeds.py dist DIR        a rank's hello, a frame header from rank 0, rank 0's address
  make_seeds.py split_wire DIR  a split model's calls to other processes' ranks, their answers
"""
import glob
import json
import os
import random
import struct
import sys

T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
SCALARS = {T_U8: "<B", T_I8: "<b", T_U16: "<H", T_I16: "<h", T_U32: "<I", T_I32: "<i",
           T_F32: "<f", T_BOOL: "<B", T_U64: "<Q", T_I64: "<q", T_F64: "<d"}
# (ggml type id, block size, bytes per block)
TYPES = [(0, 1, 4), (1, 1, 2), (30, 1, 2), (2, 32, 18), (8, 32, 34), (12, 256, 144),
         (14, 256, 210), (16, 256, 66), (19, 256, 50), (21, 256, 110), (23, 256, 136),
         (34, 256, 54), (39, 32, 17), (40, 64, 36), (41, 128, 18), (42, 64, 18)]


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def payload(t, v):
    if t == T_STR:
        return gstr(v)
    if t == T_ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(payload(et, x) for x in items)
    return struct.pack(SCALARS[t], v)


def gguf(kvs, tensors, rng, align=32):
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, t, v in kvs:
        out += gstr(key) + struct.pack("<I", t) + payload(t, v)
    offset, blobs = 0, []
    for name, (tid, bs, size), ne in tensors:
        out += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        out += struct.pack("<IQ", tid, offset)
        n = 1
        for x in ne:
            n *= x
        blob = bytes(rng.getrandbits(8) for _ in range(n // bs * size))
        blobs.append(blob)
        offset += (len(blob) + align - 1) // align * align
    out += b"\0" * (-len(out) % align)
    for blob in blobs:
        out += blob + b"\0" * (-len(blob) % align)
    return out


def tokenizer_seeds(dest):
    data = os.environ.get("OX_TESTDATA") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "testdata")
    vocab_dir = os.path.join(data, "vocab")
    k = 0
    for name in sorted(os.listdir(vocab_dir)):
        if not name.endswith(".inp"):
            continue
        with open(os.path.join(vocab_dir, name), "rb") as f:
            cases = f.read().split(b"\n__ggml_vocab_test__\n")
        for case in cases:
            with open(os.path.join(dest, "seed_%04d" % k), "wb") as f:
                f.write(bytes([k % 256]) + case)
            k += 1


def gguf_seeds(dest):
    rng = random.Random(1)
    kvs = [("general.architecture", T_STR, "llama"), ("llama.block_count", T_U32, 2),
           ("t.u8", T_U8, 7), ("t.i8", T_I8, -7), ("t.u16", T_U16, 700), ("t.i16", T_I16, -700),
           ("t.i32", T_I32, -70000), ("t.f32", T_F32, 0.5), ("t.bool", T_BOOL, 1),
           ("t.u64", T_U64, 1 << 40), ("t.i64", T_I64, -(1 << 40)), ("t.f64", T_F64, 2.5),
           ("tokenizer.ggml.tokens", T_ARR, (T_STR, ["<s>", "a", "bc"])),
           ("tokenizer.ggml.scores", T_ARR, (T_F32, [0.0, -1.0, -2.0])),
           ("t.nested", T_ARR, (T_ARR, [(T_U32, [1, 2]), (T_STR, ["x"])]))]
    for i, ty in enumerate(TYPES):
        tensors = [("blk.0.w", ty, [ty[1] * 2, 2]), ("norm", TYPES[0], [8])]
        with open(os.path.join(dest, "seed_%02d.gguf" % i), "wb") as f:
            f.write(gguf(kvs[: 3 + i % len(kvs)], tensors, rng))
    with open(os.path.join(dest, "seed_align64.gguf"), "wb") as f:
        f.write(gguf([("general.alignment", T_U32, 64)] + kvs, [("a", TYPES[3], [64])], rng, 64))


def testdata():
    here = os.path.dirname(os.path.abspath(__file__))
    return os.environ.get("OX_TESTDATA") or os.path.join(here, "..", "..", "..", "shared",
                                                         "testdata")


def jinja_seeds(dest):
    ctx = json.dumps({"messages": [{"role": "system", "content": "Be brief."},
                                   {"role": "user", "content": "Hi \"there\"\n"},
                                   {"role": "assistant", "content": "Hello!"}],
                      "add_generation_prompt": True, "bos_token": "<s>", "eos_token": "</s>",
                      "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]})
    for i, path in enumerate(sorted(glob.glob(os.path.join(testdata(), "chat", "templates", "*")))):
        with open(path, "rb") as f, open(os.path.join(dest, "t%02d" % i), "wb") as g:
            g.write(f.read() + b"\0" + ctx.encode())
    # the constructs past the shared templates': blocks through filters, with, varargs, Markup
    extra = [
        "{% filter upper | replace('A', '<') %}{% for m in messages %}{{ m.content|e }}"
        "{{ loop.changed(m.role) }}{% endfor %}{% endfilter %}",
        "{% set t | trim | indent(2, true) %}\n x\n\n y {% endset %}{% with a = t|length, "
        "b = t|truncate(5) %}{{ a }}{{ b }}{{ t|center(9) }}{% endwith %}",
        "{% macro m(x, y=2) %}{{ varargs }}{{ kwargs }}{{ x ~ y }}{% endmacro %}{{ m(1, 2, 3, k=4) }}"
        "{{ m.name }}{{ (messages|first).content|e + '<&>' }}",
        "{{ messages|batch(2)|list }}{{ messages|slice(2)|list }}{{ {'a b': '<c>'}|urlencode }}"
        "{{ '<p>x &amp; y</p>'|striptags }}{{ messages|tojson(separators=(',', ':')) }}"
        "{{ none|select|list }}{{ 2.675|round(2) }}{{ 'ab'|safe|e is escaped }}",
        "{% macro w(t) %}<{{ caller(t) }}>{% endmacro %}{% for m in messages recursive %}"
        "{% call(x) w(loop.depth) %}{{ x }}{{ '%-4s|%+.2e' % (m.role, 3.5) }}{% endcall %}"
        "{{ loop([]) }}{% endfor %}{{ '{:*^9}|{:05d}|{:>{}}'.format('a', 4, 'b', 3) }}{{ messages|groupby('role') }}",
        "{% for m in messages %}{%- if m.role == 'assistant' -%}{% generation %}{% set x = m %}"
        "{{ x.content }}{% endgeneration %}{%- endif %}{% endfor %}",
    ]
    for i, t in enumerate(extra):
        with open(os.path.join(dest, "x%02d" % i), "wb") as g:
            g.write(t.encode() + b"\0" + ctx.encode())


def grammar_seeds(dest):
    texts = [b'{"a": [1, 2.5, "x"]}', b"(1+2)*3", b"- item\n- two\n", b"1. e4 e5 2. Nf3", b"x"]
    for i, path in enumerate(sorted(glob.glob(os.path.join(testdata(), "grammars", "*.gbnf")))):
        with open(path, "rb") as f:
            src = f.read()
        for j, t in enumerate(texts):
            with open(os.path.join(dest, "g%02d_%d" % (i, j)), "wb") as g:
                g.write(src + b"\0" + t)


def json_schema_seeds(dest):
    int_range = {"type": "integer", "minimum": 15, "maximum": 312}
    schemas = [
        {"type": "object", "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 20},
            "age": int_range, "ok": {"type": "boolean"}, "none": {"type": "null"},
            "x": {"type": "number"}, "tags": {"type": "array", "items": {"type": "string"},
                                             "minItems": 1, "maxItems": 3}},
         "required": ["name", "age"], "additionalProperties": {"type": "integer"}},
        {"type": "string", "pattern": "^(ab|[^c-e\\d]\\w*)+?x{2,3}(?:\\.\\$)?$"},
        {"type": "string", "pattern": "a.b"},
        {"enum": ["red", 1, None, {"a": [True, 2.5]}]},
        {"const": {"k": "v"}},
        {"anyOf": [{"type": "integer", "exclusiveMinimum": -7}, {"type": ["string", "null"]}]},
        {"oneOf": [{"type": "integer", "maximum": -100}, {"type": "boolean"}]},
        {"allOf": [{"$ref": "#/definitions/a"}, {"properties": {"b": {"type": "string"}}}],
         "definitions": {"a": {"type": "object", "properties": {"a": int_range}, "required": ["a"]}}},
        {"$defs": {"node": {"type": "object", "properties": {
            "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            "required": ["v"]}}, "$ref": "#/$defs/node"},
        {"type": "array", "prefixItems": [{"type": "string", "format": "date"},
                                          {"type": "string", "format": "time"},
                                          {"type": "string", "format": "date-time"},
                                          {"type": "string", "format": "uuid"}]},
        {"type": "object", "properties": {"a": {}, "b": True}, "additionalProperties": False},
        {},
    ]
    for i, s in enumerate(schemas):
        with open(os.path.join(dest, "s%02d" % i), "w") as f:
            json.dump(s, f)


def hub_seeds(dest):
    """References, then header lines and a repository's file names (fuzz_hub.c's layout)."""
    files = ("X-Linked-Etag: \"%s\"\r\nX-Linked-Size: 12345\r\nx-linked-etag: W/\"%s\"\n"
             "model-Q4_K_M.gguf\nmodel-Q8_0.gguf\nbig-Q4_0-00001-of-00002.gguf\n"
             "big-Q4_0-00002-of-00002.gguf\nmmproj-model-f16.gguf\nsub/dir/x.gguf\n../evil.gguf\n"
             % ("ab" * 32, "0F" * 32))
    refs = ["owner/repo", "owner/repo:Q4_K_M", "owner/repo:q8_0", "owner/repo/sub/dir/x.gguf",
            "owner/repo:Q4_0", "owner/repo/../x", "a/b:", "x", "owner/repo/big-Q4_0-00002-of-00002.gguf"]
    for i, r in enumerate(refs):
        with open(os.path.join(dest, "h%02d" % i), "wb") as f:
            f.write(r.encode() + b"\0" + files.encode())


def lora_seeds(dest):
    """Adapters for the shared llama-f16 model (n_embd 256, k/v 128, FFN 768): f32 and f16
    pairs on attention and FFN weights, and ones it refuses (another architecture, an
    embedding, a lone half)."""
    rng = random.Random(7)
    f32, f16 = TYPES[0], TYPES[1]
    head = [("general.architecture", T_STR, "llama"), ("general.type", T_STR, "adapter"),
            ("adapter.type", T_STR, "lora"), ("adapter.lora.alpha", T_F32, 8.0)]
    seeds = [
        (head, [("blk.0.attn_q.weight.lora_a", f32, [256, 4]),
                ("blk.0.attn_q.weight.lora_b", f32, [4, 256])]),
        (head, [("blk.1.ffn_down.weight.lora_a", f16, [768, 2]),
                ("blk.1.ffn_down.weight.lora_b", f16, [2, 256]),
                ("blk.0.attn_k.weight.lora_a", f16, [256, 2]),
                ("blk.0.attn_k.weight.lora_b", f16, [2, 128]),
                ("output.weight.lora_a", f32, [256, 2]), ("output.weight.lora_b", f32, [2, 2048])]),
        (head[:3], [("blk.0.ffn_up.weight.lora_a", f32, [256, 2]),
                    ("blk.0.ffn_up.weight.lora_b", f32, [2, 768])]),
        ([("general.architecture", T_STR, "qwen2")] + head[1:],
         [("blk.0.attn_q.weight.lora_a", f32, [256, 4]), ("blk.0.attn_q.weight.lora_b", f32, [4, 256])]),
        (head, [("token_embd.weight.lora_a", f32, [256, 2]), ("token_embd.weight.lora_b", f32, [2, 2048])]),
        (head, [("blk.0.attn_v.weight.lora_a", f32, [256, 4])]),
    ]
    for i, (kvs, tensors) in enumerate(seeds):
        with open(os.path.join(dest, "l%02d.gguf" % i), "wb") as f:
            f.write(gguf(kvs, tensors, rng))


def sampler_state_seeds(dest):
    """A chain byte (fuzz_sampler_state.c's: 0 penalties/DRY/XTC/dist, 1 mirostat, 2 grammar)
    and a state of that chain, as ox_sampler_state_save writes it."""
    def stage(kind, name=b"", state=b""):
        return bytes([kind, len(name)]) + name + struct.pack("<Q", len(state)) + state
    ring = lambda toks: struct.pack("<Q", len(toks)) + b"".join(struct.pack("<i", t) for t in toks)
    mt = b"".join(struct.pack("<I", (i * 2654435761) & 0xffffffff) for i in range(624)) + \
        struct.pack("<I", 624)
    head = lambda n: struct.pack("<III", 0x5353584f, 1, n)
    seeds = [
        bytes([0]) + head(4) + stage(6, b"penalties", ring([1, 2, 3])) +
        stage(6, b"dry", ring([5, 6])) + stage(6, b"xtc", mt) + stage(1, b"", mt),
        bytes([1]) + head(1) + stage(6, b"mirostat", struct.pack("<f", 10.0) + mt),
        bytes([2]) + head(2) + stage(6, b"grammar", struct.pack("<Q", 2) +
                                    struct.pack("<ii", 64, 65)) + stage(1, b"", mt),
    ]
    for i, seed in enumerate(seeds):
        with open(os.path.join(dest, "s%02d" % i), "wb") as f:
            f.write(seed)


def server_seeds(dest):
    """A route byte (fuzz_server.c's table) and a body for it."""
    chat = {"messages": [{"role": "system", "content": "Be brief."},
                         {"role": "user", "content": "Who made the light?"}], "max_tokens": 8}
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}}]
    bodies = [
        (0, {"prompt": "In the beginning", "max_tokens": 4, "stop": ["\n"], "logprobs": 2}),
        (1, dict(chat, tools=tools, tool_choice="required")),
        (1, dict(chat, response_format={"type": "json_schema", "json_schema": {"schema": {
            "type": "object", "properties": {"x": {"type": "integer"}}}}})),
        (2, {"prompt": [1, "and", 2], "n_predict": 4, "grammar": "root ::= [a-z]+", "n_probs": 3}),
        (2, {"prompt": "and the waters", "n_predict": 8, "speculative.n_max": 4, "n_keep": 2}),
        (3, {"content": "In the beginning", "add_special": True}),
        (4, {"tokens": [1, 2, 3]}),
        (5, chat),
        (6, {"input": ["a", "b"]}),
        (7, {"model": "m", "prompt": "Hi", "system": "s", "context": [1, 2], "format": "json",
             "options": {"num_predict": 4, "temperature": 0.5, "top_k": 3, "stop": ["x"]}}),
        (7, {"model": "m", "prompt": "Hi", "raw": True, "stream": False}),
        (8, {"model": "m", "messages": [{"role": "user", "content": "Hi",
                                         "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}],
             "tools": tools, "format": {"type": "object"}}),
        (9, {"model": "m"}),
        (10, {"model": "m", "input": "text"}),
        (11, {"model": "m", "prompt": "text"}),
        (12, {}),
        (13, {"filename": "a.bin"}),
        (16, [{"id": 0, "scale": 0.5}, {"id": 1, "scale": 1}]),
    ]
    for i, (route, body) in enumerate(bodies):
        with open(os.path.join(dest, "r%02d" % i), "wb") as f:
            f.write(bytes([route]) + json.dumps(body).encode())


def dist_seeds(dest):
    """fuzz_dist.c's input: a hello (32 bytes), a frame header (16), an address; as
    src/backend/dist/dist_wire.c writes them: "OXDG", version 1, kind, then little-endian."""
    hello = b"OXDG" + struct.pack("<HHIIQII", 1, 1, 3, 8, 0x0123456789ABCDEF, 128, 0)
    frames = [struct.pack("<HHII", 1, kind, length, 0) for kind, length in
              [(2, 128), (3, 40), (4, 70000), (5, 0)]]
    addrs = [b"10.0.0.2:29500", b"[fe80::1]:1", b"node-7.cluster:65535", b"node:0", b"::1:80"]
    for i, frame in enumerate(frames):
        for j, addr in enumerate(addrs):
            with open(os.path.join(dest, "d%d%d" % (i, j)), "wb") as f:
                f.write(hello + b"OXDG" + frame + addr)


def split_wire_seeds(dest):
    """fuzz_split_wire.c's input: a byte (even: a call, odd: an answer), then the bytes as
    src/model/split_wire.c writes them: "OXSC", 21 little-endian words and the state part's
    size, the tokens (positions, sequences, logit flags), the part; "OXSA", status, message
    length, 0, a 64-bit number, the message and bytes."""
    def call(kind, n=0, flags=0, part=b"", save=0, pooling=0):
        words = [0x4353584F, kind, 3, 1, 0, 8, 20, 1, 96, 64, 1, 2, 1, 1, n, flags, pooling,
                 save, 0, 0, 0]
        body = struct.pack("<21IQ", *words, len(part))
        ints = 1 + (flags & 1) + ((flags >> 1) & 1)
        body += struct.pack("<%di" % (n * ints), *range(n * ints))
        body += bytes([1] * n if flags & 4 else [])
        return b"\x00" + body + part
    calls = [call(0), call(1), call(2, 4, 0), call(2, 3, 7), call(3, 5, 8, pooling=1), call(4),
             call(5), call(6, save=100), call(7, part=b"OXSTATE1" + bytes(40))]
    answers = [b"\x01" + struct.pack("<IIIIQ", 0x4153584F, 0, 0, 0, 77),
               b"\x01" + struct.pack("<IIIIQ", 0x4153584F, 3, 5, 0, 0) + b"error" + b"bytes"]
    for i, seed in enumerate(calls + answers):
        with open(os.path.join(dest, "s%02d" % i), "wb") as f:
            f.write(seed)


if __name__ == "__main__":
    kind, dest = sys.argv[1], sys.argv[2]
    os.makedirs(dest, exist_ok=True)
    {"gguf": gguf_seeds, "tokenizer": tokenizer_seeds, "jinja": jinja_seeds,
     "grammar": grammar_seeds, "json_schema": json_schema_seeds, "hub": hub_seeds, "server": server_seeds,
     "lora": lora_seeds, "sampler_state": sampler_state_seeds, "dist": dist_seeds,
     "split_wire": split_wire_seeds}[kind](dest)
