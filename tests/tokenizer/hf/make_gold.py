#!/usr/bin/env python3
"""make_gold.py: the ids Hugging Face `tokenizers` gives for corpus.json, for the vocabularies
dump_vocab.py wrote out, with each model's tokenizer.json settings as published, rebuilt around
the GGUF's tokens: Qwen2 and Llama 3 a Split on the model's regex (isolated) then ByteLevel
without its own regex, Qwen2's NFC normalizer, Llama 3's ignore_merges; GPT-2 ByteLevel with
its regex; these a BPE over the GGUF's merges, with its added tokens (the GGUF's control tokens
special, its user-defined ones not). BGE (BERT) a WordPiece with BertNormalizer (lowercase,
accents stripped) and BertPreTokenizer, its tokens back from llama.cpp's phantom-space form
("\u2581word" a word's start, "piece" a continuation, "##piece" in the original). Runs where
`tokenizers` is installed (the lent GPU machines); writes gold-<name>.json beside corpus.json.

    make_gold.py DUMP_DIR NAME...
"""
import json
import os
import sys

from tokenizers import AddedToken, Regex, Tokenizer, models, normalizers, pre_tokenizers

LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# per vocabulary: the split regex (None: ByteLevel's own), the normalizer, ignore_merges
CONFIG = {
    "qwen2": (QWEN2_SPLIT, "NFC", False),
    "llama-bpe": (LLAMA3_SPLIT, None, True),
    "gpt-2": (None, None, False),
    "bert-bge": ("WordPiece", "BertNormalizer", False),
    "llama-spm": ("SentencePiece", "Prepend+Replace", False),
    "phi-3": ("SentencePiece", "Prepend+Replace", False),
    # special tokens first in the vocabulary; pre-tokenizers of tokenizers' own kinds
    "starcoder": ("Digits+ByteLevel", None, False),
    "refact": ("Digits+ByteLevel", None, False),
    "mpt": ("ByteLevel", "NFC", False),
    "falcon": ("Punctuation+ByteLevel+Digits+Split", None, False),
    # a Split for each of deepseek_splits.json's regexes (src/tokenizer/pretok.c's, which are
    # llama.cpp's transcription of the tokenizer.json ones), then ByteLevel without its regex
    "deepseek-llm": ("deepseek", None, False),
    "deepseek-coder": ("deepseek", None, False),
}
# Phi-3's tokenizer.json: its added tokens (past the SentencePiece model's 32000 pieces, and
# </s>) take the spaces after them (rstrip), but for these
NO_RSTRIP = {"<unk>", "<s>", "<|endoftext|>"}
NORMAL, UNKNOWN, CONTROL, USER_DEFINED = 1, 2, 3, 4


def wordpiece(dump):
    def original(t):  # llama.cpp's convert_hf_to_gguf phantom space, undone
        if t.startswith("[") and t.endswith("]"):
            return t
        return t[1:] if t.startswith("\u2581") else "##" + t
    vocab = {original(t): i for i, t in enumerate(dump["tokens"])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=None, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = [t for t, k in zip(dump["tokens"], dump["token_type"]) if k in (UNKNOWN, CONTROL)]
    tok.add_special_tokens(specials)
    return tok


def sentencepiece(dump, name):
    """Llama 2's tokenizer.json: the normalizer prepends U+2581 and makes spaces U+2581, no
    pre-tokenizer, a BPE with byte fallback whose merges are those transformers' converter
    derives from the SentencePiece scores (every split of a piece into two pieces, ranked by
    the piece's score, best first). Phi-3's: the same over the model's 32000 pieces, then its
    added tokens."""
    kinds = dump["token_type"]
    model_n = 32000 if name == "phi-3" else len(dump["tokens"])
    pieces = dump["tokens"][:model_n]
    vocab = {t: i for i, t in enumerate(pieces)}
    scored = []
    for t, score in zip(pieces, dump["scores"]):
        local = [(t[:i], t[i:]) for i in range(1, len(t)) if t[:i] in vocab and t[i:] in vocab]
        local.sort(key=lambda m: (vocab[m[0]], vocab[m[1]]))
        scored += [(m, score) for m in local]
    scored.sort(key=lambda x: x[1], reverse=True)
    tok = Tokenizer(models.BPE(vocab, [m for m, _ in scored], unk_token="<unk>",
                               byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                           normalizers.Replace(" ", "\u2581")])
    rstrip = name == "phi-3"
    tok.add_tokens([AddedToken(t, special=k != USER_DEFINED, normalized=False,
                               rstrip=rstrip and t not in NO_RSTRIP)
                    for t, k in zip(pieces, kinds) if k in (UNKNOWN, CONTROL, USER_DEFINED)])
    for i in range(model_n, len(dump["tokens"])):  # added in order: their ids as in the GGUF
        t = dump["tokens"][i]
        tok.add_tokens([AddedToken(t, special=kinds[i] != USER_DEFINED, normalized=False,
                                   rstrip=t not in NO_RSTRIP)])
        if tok.token_to_id(t) != i:
            sys.exit("%s: added token %r got id %s, not %d" % (name, t, tok.token_to_id(t), i))
    return tok


def in_vocab(dump, name):
    """StarCoder's, Refact's, GPT-NeoX's (MPT) and Falcon's tokenizer.json: every token in
    the BPE's vocabulary, the added ones (GGUF control and user-defined tokens) marked there
    at their ids, and pre-tokenizers of tokenizers' own kinds: StarCoder's single digits then
    ByteLevel with its regex; GPT-NeoX's ByteLevel after an NFC normalizer; Falcon's runs of
    punctuation, ByteLevel, digit runs, then threes of digits."""
    kind, norm, _ = CONFIG[name]
    vocab = {t: i for i, t in enumerate(dump["tokens"])}
    merges = [tuple(m.split(" ", 1)) for m in dump["merges"]]
    tok = Tokenizer(models.BPE(vocab, merges))
    if norm == "NFC":
        tok.normalizer = normalizers.NFC()
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    steps = {"Digits+ByteLevel": [pre_tokenizers.Digits(individual_digits=True), byte_level],
             "ByteLevel": [byte_level],
             "Punctuation+ByteLevel+Digits+Split": [
                 pre_tokenizers.Punctuation(behavior="contiguous"), byte_level,
                 pre_tokenizers.Digits(individual_digits=False),
                 pre_tokenizers.Split(Regex("[0-9][0-9][0-9]"), behavior="isolated",
                                      invert=False)]}[kind]
    tok.pre_tokenizer = pre_tokenizers.Sequence(steps)
    for i, (t, k) in enumerate(zip(dump["tokens"], dump["token_type"])):
        if k in (CONTROL, USER_DEFINED):
            tok.add_tokens([AddedToken(t, special=k == CONTROL, normalized=k == USER_DEFINED)])
            if tok.token_to_id(t) != i:
                sys.exit("%s: added token %r has id %s, not %d" % (name, t, tok.token_to_id(t), i))
    return tok


def build(dump, name):
    split, norm, ignore_merges = CONFIG[name]
    if split in ("Digits+ByteLevel", "ByteLevel", "Punctuation+ByteLevel+Digits+Split"):
        return in_vocab(dump, name)
    if split == "WordPiece":
        return wordpiece(dump)
    if split == "SentencePiece":
        return sentencepiece(dump, name)
    vocab = {t: i for i, (t, k) in enumerate(zip(dump["tokens"], dump["token_type"]))
             if k == NORMAL}
    merges = [tuple(m.split(" ", 1)) for m in dump["merges"]]
    tok = Tokenizer(models.BPE(vocab, merges, ignore_merges=ignore_merges))
    if norm == "NFC":
        tok.normalizer = normalizers.NFC()
    if split == "deepseek":
        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "deepseek_splits.json"), encoding="utf-8") as f:
            splits = json.load(f)[name]
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(r), behavior="isolated", invert=False) for r in splits] +
            [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    elif split:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(split), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    added = [(i, t, k) for i, (t, k) in enumerate(zip(dump["tokens"], dump["token_type"]))
             if k in (CONTROL, USER_DEFINED)]
    for i, t, k in added:  # ids as in the GGUF: added in order, after the model's vocabulary
        tok.add_tokens([AddedToken(t, special=k == CONTROL, normalized=False)])
        if tok.token_to_id(t) != i:
            sys.exit("%s: added token %r got id %s, not %d" % (name, t, tok.token_to_id(t), i))
    return tok


def main():
    import tokenizers
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "corpus.json"), encoding="utf-8") as f:
        corpus = json.load(f)
    for name in sys.argv[2:]:
        with open(os.path.join(sys.argv[1], name + ".json"), encoding="utf-8") as f:
            tok = build(json.load(f), name)
        cases = [{"text": t, "ids": tok.encode(t, add_special_tokens=False).ids} for t in corpus]
        split, norm, ignore_merges = CONFIG[name]
        gold = {"vocab": "ggml-vocab-%s.gguf" % name, "tokenizers": tokenizers.__version__,
                "normalizer": norm, "split": split, "ignore_merges": ignore_merges,
                "cases": cases}
        with open(os.path.join(here, "gold-%s.json" % name), "w", encoding="utf-8") as f:
            json.dump(gold, f, ensure_ascii=True, indent=0)
            f.write("\n")
        print(name, len(cases), "cases")


if __name__ == "__main__":
    main()
