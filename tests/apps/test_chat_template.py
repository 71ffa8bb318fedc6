#!/usr/bin/env python3
"""test_chat_template.py: `oxidize chat-template`, the interface reviewers use, renders every
shared chat case exactly as Jinja2 configured like Hugging Face transformers did, and exits 1
with the template's message where Jinja2 raised. The stored renders are plain Jinja2's: where
a template uses transformers' {% generation %} tag (which they reject), the expected text is
Jinja2's with that tag defined as transformers defines it (tests/chat/jinja_diff.py).

usage: test_chat_template.py PATH/TO/oxidize
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

OXIDIZE = sys.argv[1]
HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("OX_TESTDATA") or os.path.join(HERE, "..", "..", "..", "shared", "testdata")
CHAT = os.path.join(DATA, "chat")
sys.path.insert(0, os.path.join(HERE, "..", "chat"))
from jinja_diff import environment, jinja2_render  # noqa: E402 -- after the path is set


def transformers_case(template, ref, case):
    """The case as transformers renders it, for a template with {% generation %}, else None."""
    with open(template, encoding="utf-8") as f:
        source = f.read()
    if "error" not in case or not re.search(r"{%-?\s*generation\s*-?%}", source):
        return None
    got = jinja2_render(environment(), source, dict(ref["context"], **case["input"]))
    return {"output": got[3:]} if got.startswith("OK:") else {"error": got}


def main():
    passed = total = 0
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(glob.glob(os.path.join(CHAT, "expected", "*.json"))):
            with open(path, encoding="utf-8") as f:
                ref = json.load(f)
            template = os.path.join(CHAT, "templates", ref["template"])
            for name, case in ref["cases"].items():
                total += 1
                args = [OXIDIZE, "chat-template", "--template", template,
                        "--bos", ref["context"]["bos_token"], "--eos", ref["context"]["eos_token"],
                        "--now", "1768473000"]  # strftime_now fixed at 2026-01-15 10:30:00
                inp = case["input"]
                msgs = os.path.join(tmp, "m.json")
                with open(msgs, "w", encoding="utf-8") as f:
                    json.dump(inp["messages"], f, ensure_ascii=False)
                args += ["--messages", msgs]
                if "tools" in inp:
                    tools = os.path.join(tmp, "t.json")
                    with open(tools, "w", encoding="utf-8") as f:
                        json.dump(inp["tools"], f, ensure_ascii=False)
                    args += ["--tools", tools]
                if not inp.get("add_generation_prompt", False):
                    args.append("--no-generation-prompt")
                p = subprocess.run(args, capture_output=True)
                case = transformers_case(template, ref, case) or case
                if "output" in case:
                    ok = p.returncode == 0 and p.stdout.decode("utf-8", "replace") == case["output"]
                else:  # Jinja2 raised: so must we, with a message
                    ok = p.returncode == 1 and p.stderr.strip() != b""
                passed += ok
                if not ok:
                    failures.append("%s/%s: rc %d %r" % (ref["template"], name, p.returncode,
                                                          p.stderr[-160:]))
    for f in failures[:20]:
        print("FAIL:", f)
    print("test_chat_template: %d of %d cases pass" % (passed, total))
    sys.exit(0 if total > 0 and passed == total else 1)


if __name__ == "__main__":
    main()
