#!/usr/bin/env python3
"""test_pull.py: `oxidize pull`, `-hf`, `list` and `rm` against a local HTTP server that answers
as the Hugging Face Hub does (the file list at /api/models/REPO/revision/main, each file's
/resolve/main/FILE redirected to a CDN URL with X-Linked-Etag and X-Linked-Size, Range requests,
401 and 404 bodies): a model pulled byte for byte and run through -hf (also with the Hub gone),
quantizations picked by name, a transfer that breaks off resumed, an interrupted pull that
leaves no whole-looking file and resumes later, a corrupt download refused, gated repositories
with and without a token, names that would leave the cache ignored, split models fetched whole."""
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

from apptest import DATA, OXIDIZE, check, finish

MODEL = open(os.path.join(DATA, "models", "kjv-15m-q4_k_m.gguf"), "rb").read()
FILLER = bytes(range(256)) * 4096  # 1 MiB that is no model

# repo -> {file: bytes}
REPOS = {
    "test/kjv": {"kjv-15m-Q4_K_M.gguf": MODEL, "kjv-15m-Q8_0.gguf": FILLER,
                 "mmproj-kjv-Q4_K_M.gguf": FILLER[:1000], "README.md": b"# kjv\n",
                 "../evil.gguf": FILLER[:10]},
    "test/broken": {"model-Q4_K_M.gguf": MODEL},
    "test/down": {"model-Q4_K_M.gguf": MODEL},
    "test/corrupt": {"model-Q4_K_M.gguf": MODEL},
    "test/gated": {"model.gguf": FILLER},
    "test/split": {"big-Q4_0-00001-of-00002.gguf": FILLER, "big-Q4_0-00002-of-00002.gguf": FILLER[::-1]},
}
STATE = {"break_first": {"test/broken"}, "down": {"test/down"}, "ranges": []}


def sha(b):
    return hashlib.sha256(b).hexdigest()


class Hub(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, code, body=b"", headers=(), head=False):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def error(self, code, msg, head=False):
        self.reply(code, json.dumps({"error": msg}).encode(), [("Content-Type", "application/json")], head)

    def route(self, head):
        path = self.path
        if path.startswith("/api/models/") and path.endswith("/revision/main"):
            repo = path[len("/api/models/"):-len("/revision/main")]
            if repo not in REPOS:
                return self.error(404, "Repository not found", head)
            if repo == "test/gated" and self.headers.get("Authorization") != "Bearer secret":
                return self.error(401, "Access to model test/gated is restricted.", head)
            body = json.dumps({"id": repo, "siblings": [{"rfilename": f} for f in REPOS[repo]]})
            return self.reply(200, body.encode(), [("Content-Type", "application/json")], head)
        if "/resolve/main/" in path:
            repo, file = path.split("/resolve/main/", 1)
            repo, file = repo.lstrip("/"), urllib_unquote(file)
            if repo == "test/gated" and self.headers.get("Authorization") != "Bearer secret":
                return self.error(401, "Access restricted", head)
            if file not in REPOS.get(repo, {}):
                return self.error(404, "Entry not found", head)
            data = REPOS[repo][file]
            return self.reply(302, b"", [("Location", "/cdn/%s/%s" % (repo, file)),
                                         ("X-Linked-Etag", '"%s"' % sha(data)),
                                         ("X-Linked-Size", str(len(data)))], head)
        if path.startswith("/cdn/"):
            repo, file = path[5:].split("/", 2)[:2], path[5:].split("/", 2)[2]
            repo = "/".join(repo)
            data = REPOS[repo][urllib_unquote(file)]
            if repo == "test/corrupt":
                data = data[:100] + b"X" + data[101:]
            start = 0
            rng = self.headers.get("Range")
            if rng:
                start = int(rng.split("=")[1].split("-")[0])
                STATE["ranges"].append((repo, start))
            body = data[start:]
            headers = [("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))] if rng else []
            if head:
                return self.reply(206 if rng else 200, body, headers, True)
            cut = repo in STATE["down"] or (repo in STATE["break_first"] and not rng)
            self.send_response(206 if rng else 200)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if cut:  # a transfer that breaks off a third of the way
                STATE["break_first"].discard(repo)
                self.wfile.write(body[: len(body) // 3])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(2)
                return
            self.wfile.write(body)
            return
        self.error(404, "no route", head)

    def do_GET(self):
        self.route(False)

    def do_HEAD(self):
        self.route(True)


def urllib_unquote(s):
    import urllib.parse
    return urllib.parse.unquote(s)


def run(args, env, timeout=120):
    return subprocess.run([OXIDIZE] + args, env=env, capture_output=True, text=True, timeout=timeout)


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    cache = tempfile.mkdtemp(prefix="ox-pull-")
    env = dict(os.environ, OX_CACHE=cache, HF_ENDPOINT="http://127.0.0.1:%d/" % server.server_port)
    env.pop("HF_TOKEN", None)
    try:
        # a model by its quantization; the path is the last line; progress lines on stderr
        r = run(["pull", "test/kjv:q4_k_m"], env)
        path = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
        check(r.returncode == 0 and path.endswith("test/kjv/kjv-15m-Q4_K_M.gguf"), "pull: %r %r" % (r.stdout, r.stderr))
        check(os.path.exists(path) and open(path, "rb").read() == MODEL, "pull: the bytes")
        check("100%" in r.stderr, "pull: progress lines: %r" % r.stderr)
        check(not any(f.endswith(".part") for f in os.listdir(os.path.dirname(path))), "pull: no .part left")
        r = run(["pull", "test/kjv:Q4_K_M"], env)
        check(r.returncode == 0 and "up to date" in r.stderr, "pull again: %r" % r.stderr)
        # -hf runs it, and its text is -m's
        prompt = ["-p", "In the beginning", "-n", "12", "--temp", "0", "-t", "2"]
        a = run(["run", "-hf", "test/kjv:Q4_K_M"] + prompt, env)
        b = run(["run", "-m", path] + prompt, env)
        check(a.returncode == 0 and a.stdout == b.stdout and len(a.stdout) > 20, "-hf run: %r %r" % (a.stdout, a.stderr))
        # the default quantization is Q4_K_M; several matches and none list the repository
        r = run(["pull", "test/kjv"], env)
        check(r.returncode == 0 and r.stdout.strip().endswith("kjv-15m-Q4_K_M.gguf"), "default quant: %r" % r.stderr)
        r = run(["pull", "test/kjv:Q"], env)
        check(r.returncode == 1 and "more than one" in r.stderr and "kjv-15m-Q8_0.gguf" in r.stderr, "ambiguous: %r" % r.stderr)
        r = run(["pull", "test/kjv:IQ2_XXS"], env)
        check(r.returncode == 1 and "no model matches" in r.stderr and "kjv-15m-Q4_K_M.gguf" in r.stderr
              and "mmproj" not in r.stderr and "evil" not in r.stderr, "no match: %r" % r.stderr)
        r = run(["pull", "test/kjv/README.md"], env)
        check(r.returncode == 0 and open(r.stdout.strip(), "rb").read() == b"# kjv\n", "a file by path: %r" % r.stderr)
        for bad in ["test", "test/kjv/../x", "../x/y", "test/kjv:Q4 K", "-x/y"]:
            r = run(["pull", bad], env)
            check(r.returncode in (1, 2) and "oxidize pull" in r.stderr, "bad reference %r: %r" % (bad, r.stderr))
        check(not os.path.exists(os.path.join(cache, "hub", "test", "evil.gguf")), "a name leaving the repository ignored")
        # unknown repository, gated without and with a token
        r = run(["pull", "test/nothing"], env)
        check(r.returncode == 1 and "404" in r.stderr and "Repository not found" in r.stderr, "404: %r" % r.stderr)
        r = run(["pull", "test/gated"], env)
        check(r.returncode == 1 and "401" in r.stderr and "HF_TOKEN" in r.stderr, "401: %r" % r.stderr)
        r = run(["pull", "test/gated", "--hf-token", "secret"], env)
        check(r.returncode == 0, "--hf-token: %r" % r.stderr)
        r = run(["pull", "test/gated"], dict(env, HF_TOKEN="secret"))
        check(r.returncode == 0 and "up to date" in r.stderr, "HF_TOKEN: %r" % r.stderr)
        # a transfer that breaks off is resumed with a Range request
        r = run(["pull", "test/broken"], env)
        check(r.returncode == 0 and open(r.stdout.strip(), "rb").read() == MODEL, "resumed: %r" % r.stderr)
        check("resuming" in r.stderr and any(x[0] == "test/broken" and x[1] > 0 for x in STATE["ranges"]),
              "resumed by Range: %r %r" % (r.stderr, STATE["ranges"]))
        # a pull that keeps breaking fails, leaving a .part and no whole-looking file; later it resumes
        r = run(["pull", "test/down"], env)
        dest = os.path.join(cache, "hub", "test", "down", "model-Q4_K_M.gguf")
        check(r.returncode == 1 and not os.path.exists(dest) and os.path.exists(dest + ".part"), "interrupted: %r" % r.stderr)
        STATE["down"].clear()
        STATE["ranges"].clear()
        r = run(["pull", "test/down"], env)
        check(r.returncode == 0 and open(dest, "rb").read() == MODEL and not os.path.exists(dest + ".part"), "later: %r" % r.stderr)
        check(any(x[0] == "test/down" and x[1] > 0 for x in STATE["ranges"]), "later: from the .part on")
        # a corrupt download is refused and deleted
        r = run(["pull", "test/corrupt"], env)
        dest = os.path.join(cache, "hub", "test", "corrupt", "model-Q4_K_M.gguf")
        check(r.returncode == 1 and "corrupt" in r.stderr and not os.path.exists(dest)
              and not os.path.exists(dest + ".part"), "corrupt: %r" % r.stderr)
        # a split model: every part, in order; -hf loads its first part (these are no GGUF files)
        r = run(["pull", "test/split:Q4_0"], env)
        lines = r.stdout.strip().splitlines()
        check(r.returncode == 0 and len(lines) == 2 and lines[0].endswith("00001-of-00002.gguf")
              and open(lines[1], "rb").read() == FILLER[::-1], "split: %r %r" % (r.stdout, r.stderr))
        r = run(["run", "-hf", "test/split:Q4_0", "-p", "x"], env)
        check(r.returncode == 1 and "gguf" in r.stderr and "magic" in r.stderr, "split -hf: %r" % r.stderr)
        # list, then -hf with the Hub gone (from the cache), then rm
        r = run(["list"], env)
        check(r.returncode == 0 and "kjv-15m-Q4_K_M.gguf" in r.stdout and "test/broken" in r.stdout, "list: %r" % r.stdout)
        server.shutdown()
        server.server_close()
        a = run(["run", "-hf", "test/kjv:Q4_K_M"] + prompt, env)
        check(a.returncode == 0 and a.stdout == b.stdout, "-hf offline: %r" % a.stderr)
        r = run(["pull", "test/kjv:Q4_K_M"], env)
        check(r.returncode == 1 and "oxidize pull" in r.stderr, "pull offline fails clearly: %r" % r.stderr)
        r = run(["rm", "test/kjv:Q4_K_M"], env)
        check(r.returncode == 0 and "removed 1 file" in r.stdout and not os.path.exists(path), "rm quant: %r %r" % (r.stdout, r.stderr))
        r = run(["run", "-hf", "test/kjv:Q4_K_M"] + prompt, env)
        check(r.returncode == 1 and "oxidize run" in r.stderr, "-hf after rm, offline: %r" % r.stderr)
        r = run(["rm", "test/broken"], env)
        check(r.returncode == 0 and not os.path.exists(os.path.join(cache, "hub", "test", "broken")), "rm repo: %r" % r.stderr)
        r = run(["rm", "test/broken"], env)
        check(r.returncode == 1 and "not in the cache" in r.stderr, "rm again: %r" % r.stderr)
        r = run(["list"], env)
        check("test/broken" not in r.stdout and "kjv-15m-Q4_K_M" not in r.stdout, "list after rm: %r" % r.stdout)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return finish("test_pull")


if __name__ == "__main__":
    sys.exit(main())
