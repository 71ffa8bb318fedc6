#!/usr/bin/env python3
"""real_templates.py: chat templates found in other repositories, each rendered on the five
shared test conversations by oxidize and by Jinja2 set up as transformers sets it up
(jinja_diff.py's environment, {% generation %} included), compared byte for byte (a template
Jinja2 fails on must fail in oxidize too). The templates are other projects' files, so they
stay out of this repository: point it at folders of them (fetched mirrors' *.jinja files, or
tokenizer_config.json files with a chat_template). real_templates.tsv lists the corpus measured
on 2026-11-26 (sha256, repository, commit, path): a run says how many of those it found.

    real_templates.py JINJA_RENDER DIR... [--show]
"""
import glob
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from jinja_diff import environment, jinja2_render, oxidize_render  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("OX_TESTDATA") or os.path.join(HERE, "..", "..", "..", "shared", "testdata")


def conversations():
    """The shared chat cases' inputs (every expected file holds the same five)."""
    path = sorted(glob.glob(os.path.join(DATA, "chat", "expected", "*.json")))[0]
    with open(path, encoding="utf-8") as f:
        ref = json.load(f)
    return [(name, dict(ref["context"], **case["input"])) for name, case in ref["cases"].items()]


def templates(dirs):
    """(label, source) of every template under dirs, each distinct text once."""
    seen = set()
    for d in dirs:
        for path in sorted(glob.glob(os.path.join(d, "**", "*"), recursive=True)):
            sources = []
            if path.endswith((".jinja", ".jinja2")):
                with open(path, encoding="utf-8", newline="") as f:  # \r\n kept, as Jinja2 gets it
                    sources.append(f.read())
            elif os.path.basename(path) == "tokenizer_config.json":
                with open(path, encoding="utf-8") as f:
                    t = json.load(f).get("chat_template")
                sources += [t] if isinstance(t, str) else [x["template"] for x in t or []]
            for s in sources:
                digest = hashlib.sha256(s.encode()).hexdigest()
                if digest not in seen:
                    seen.add(digest)
                    yield os.path.relpath(path, d) if len(dirs) == 1 else path, s


def main():
    binary, show = sys.argv[1], "--show" in sys.argv
    dirs = [a for a in sys.argv[2:] if a != "--show"]
    convs = conversations()
    env = environment()
    found = list(templates(dirs))
    pairs = [(src, ctx) for _, src in found for _, ctx in convs]
    ours = oxidize_render(binary, pairs)
    bad = 0
    for i, (label, src) in enumerate(found):
        diffs = []
        for j, (name, ctx) in enumerate(convs):
            want, got = jinja2_render(env, src, ctx), ours[i * len(convs) + j]
            if not (got == want or (got.startswith("ERR:") and want.startswith("ERR:"))):
                diffs.append((name, want, got))
        bad += bool(diffs)
        if diffs or show:
            print("%s %s" % ("DIFF" if diffs else "same", label))
        for name, want, got in diffs:
            print("  %s\n    jinja2:  %r\n    oxidize: %r" % (name, want[:300], got[:300]))
    with open(os.path.join(HERE, "real_templates.tsv"), encoding="utf-8") as f:
        listed = {line.split("\t")[0] for line in f if not line.startswith("#")}
    known = sum(hashlib.sha256(src.encode()).hexdigest() in listed for _, src in found)
    print("real_templates: %d templates (%d of the %d in real_templates.tsv) x %d conversations, "
          "%d differ from Jinja2" % (len(found), known, len(listed), len(convs), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
