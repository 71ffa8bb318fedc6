#!/usr/bin/env python3
"""dump_vocab.py: a GGUF vocabulary's tokens, token types and merges as JSON, for make_gold.py
(which runs where Hugging Face `tokenizers` is installed: the lent GPU machines).

    dump_vocab.py VOCAB.gguf OUT.json
"""
import json
import struct
import sys

# GGUF value types (gguf.h): the scalar ones' struct formats; 8 string, 9 array
SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
          11: "<q", 12: "<d"}


class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.at)[0]
        self.at += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.data[self.at:self.at + n].decode("utf-8")
        self.at += n
        return s

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("<I"), self.take("<Q")
            return [self.value(et) for _ in range(n)]
        return self.take(SCALAR[t])


def main():
    with open(sys.argv[1], "rb") as f:
        r = Reader(f.read())
    if r.data[:4] != b"GGUF":
        sys.exit("not a GGUF file")
    r.at = 4
    r.take("<I")  # version
    r.take("<Q")  # tensors
    kv = {}
    for _ in range(r.take("<Q")):
        key = r.string()
        kv[key] = r.value(r.take("<I"))
    out = {k[len("tokenizer.ggml."):]: v for k, v in kv.items()
           if k in ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                    "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.scores",
                    "tokenizer.ggml.add_space_prefix", "tokenizer.ggml.unknown_token_id",
                    "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id")}
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
