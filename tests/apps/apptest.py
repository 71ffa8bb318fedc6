"""apptest.py: what the apps' test scripts share: the binary and data paths, and checks."""
import os
import sys

OXIDIZE = sys.argv[1] if len(sys.argv) > 1 else "oxidize"
REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DATA = os.environ.get("OX_TESTDATA") or os.path.join(REPO, "..", "shared", "testdata")
_counts = {"checks": 0, "failures": 0}


def check(cond, what):
    """Count a check; print what failed."""
    _counts["checks"] += 1
    if not cond:
        _counts["failures"] += 1
        print("FAIL:", what, file=sys.stderr)


def finish(name):
    """The summary line, and the exit status it means."""
    c, f = _counts["checks"], _counts["failures"]
    print("%s: %d checks, %d passed, %d failed" % (name, c, c - f, f))
    return 1 if f else 0
