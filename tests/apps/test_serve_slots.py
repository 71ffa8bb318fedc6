#!/usr/bin/env python3
"""test_serve_slots.py: llama-server's POST /slots/{id}?action=save|restore|erase on `oxidize
serve --slot-save-path DIR`: a slot's state saved, erased and restored (GET /slots follows it); a
request after the restore decodes only the last prompt token and answers what the same request
gives without it; file names with a path, missing files, unknown slots and actions, a server
without the folder, and another model's file are refused. And --context-shift: a generation
past its slot's context goes on to n_predict, its text until the first shift that of a server
that stops there."""
import os
import re
import sys
import tempfile
import urllib.request

from apptest import DATA, check, finish
from test_serve import call, start

KJV = os.path.join(DATA, "models", "kjv-15m-q4_k_m.gguf")
OTHER = os.path.join(DATA, "models", "llama-q8_0.gguf")
PROMPT = "In the beginning God created the heaven and the earth. And the earth was"


def prompt_tokens_total(base):
    """llamacpp:prompt_tokens_total from /metrics."""
    text = urllib.request.urlopen(base + "/metrics").read().decode()
    m = re.search(r"^llamacpp:prompt_tokens_total (\S+)$", text, re.M)
    return float(m.group(1)) if m else -1


def complete(base):
    status, body = call(base, "/completion", {"prompt": PROMPT, "n_predict": 8, "temperature": 0})
    return body.get("content") if status == 200 else None


def main():
    folder = tempfile.mkdtemp(prefix="ox-slots-")
    p, base = start(KJV, "-np", "2", "-c", "1024", "--slot-save-path", folder)
    try:
        want = complete(base)
        status, slots = call(base, "/slots")
        n_past = slots[0]["n_past"] if status == 200 else 0
        check(want and n_past > 10, "first request: %r %s" % (want, slots))
        status, body = call(base, "/slots/0?action=save", {"filename": "kjv.slot"})
        check(status == 200 and body.get("n_saved") == n_past and body.get("filename") == "kjv.slot"
              and body.get("n_written", 0) > 0 and os.path.exists(os.path.join(folder, "kjv.slot")),
              "save: %s %s" % (status, body))
        status, body = call(base, "/slots/0?action=erase", method="POST", raw=b"")
        check(status == 200 and body == {"id_slot": 0, "n_erased": n_past}, "erase: %s %s" % (status, body))
        status, slots = call(base, "/slots")
        check(slots[0]["n_past"] == 0, "erased: %s" % slots)
        status, body = call(base, "/slots/0?action=restore", {"filename": "kjv.slot"})
        check(status == 200 and body.get("n_restored") == n_past, "restore: %s %s" % (status, body))
        status, slots = call(base, "/slots")
        check(slots[0]["n_past"] == n_past, "restored: %s" % slots)
        before = prompt_tokens_total(base)
        got = complete(base)
        check(got == want and prompt_tokens_total(base) - before == 1,
              "after the restore: %r vs %r, %s prompt tokens decoded" % (got, want,
                                                                        prompt_tokens_total(base) - before))
        # refusals
        for name, code in [("../kjv.slot", 400), ("a/b", 400), (".hidden", 400), ("", 400),
                           ("missing.slot", 404)]:
            status, body = call(base, "/slots/0?action=restore", {"filename": name})
            check(status == code and "error" in body, "restore %r: %s %s" % (name, status, body))
        status, body = call(base, "/slots/9?action=save", {"filename": "x.slot"})
        check(status == 400, "slot 9: %s" % status)
        status, body = call(base, "/slots/0?action=fly", {"filename": "x.slot"})
        check(status == 400, "action fly: %s" % status)
        status, body = call(base, "/slots/0?action=save", method="GET")
        check(status == 405, "GET: %s" % status)
    finally:
        p.terminate()
        p.wait(timeout=30)
    p, base = start(OTHER, "-np", "1", "-c", "256", "--slot-save-path", folder)
    try:
        status, body = call(base, "/slots/0?action=restore", {"filename": "kjv.slot"})
        check(status == 400 and "another model" in body.get("error", {}).get("message", ""),
              "another model: %s %s" % (status, body))
    finally:
        p.terminate()
        p.wait(timeout=30)
    long = {"prompt": "In the beginning", "n_predict": 300, "temperature": 0, "n_keep": 2}
    p, base = start(KJV, "-np", "1", "-c", "128")
    try:
        status, body = call(base, "/slots/0?action=save", {"filename": "x.slot"})
        check(status == 501, "no --slot-save-path: %s %s" % (status, body))
        status, body = call(base, "/slots/0?action=erase", method="POST", raw=b"")
        check(status == 200, "erase without a folder: %s %s" % (status, body))
        status, plain = call(base, "/completion", long)
        check(status == 200 and plain.get("tokens_predicted", 0) < 128, "no shift: %s" % plain)
    finally:
        p.terminate()
        p.wait(timeout=30)
    p, base = start(KJV, "-np", "1", "-c", "128", "--context-shift")
    try:
        status, shifted = call(base, "/completion", long)
        check(status == 200 and shifted.get("tokens_predicted") == 300 and
              shifted.get("content", "").startswith(plain.get("content", "")[:-1]) and
              len(shifted.get("content", "")) > len(plain.get("content", "")) + 200,
              "shift: %s" % {k: shifted.get(k) for k in ("tokens_predicted", "stop_type")})
    finally:
        p.terminate()
        p.wait(timeout=30)
    return finish("test_serve_slots")


if __name__ == "__main__":
    sys.exit(main())
