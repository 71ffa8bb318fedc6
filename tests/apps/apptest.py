"""apptest.py: what the apps' test scripts share: the binary and data paths, and checks."""
import os
import sys

OXIDIZE = sys.argv[1] if len(sys.argv) > 1 else "oxidize"
REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DATA = os.environ.get("OX_TESTDATA") or os.path.join(REPO, "..", "shared", "testdata")
_counts = {"checks": 0, "failures": 0}


def npm_modules(name, spec):
    """The node_modules folder holding npm package `name` (installed as `spec` when missing, into
    a folder beside the binary under test), for the tests that drive official npm clients."""
    import subprocess
    prefix = os.path.join(os.path.dirname(os.path.abspath(OXIDIZE)), name + "-npm")
    if not os.path.isdir(os.path.join(prefix, "node_modules", name)):
        r = subprocess.run(["npm", "install", "--prefix", prefix, "--no-audit", "--no-fund",
                            "--no-save", spec], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit("npm install %s failed: %s" % (spec, r.stderr[-2000:]))
    return os.path.join(prefix, "node_modules")


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
