// serve.mjs: a static server for the browser build and its demo (`make web-demo`), with the
// headers a page needs for WebAssembly threads (COOP/COEP: SharedArrayBuffer) and Range requests
// (a model download that was cut short resumes). Node's standard library only.
//   node web/serve.mjs ROOT [--port 8090] [--models DIR] [--cut-once BYTES]
// ROOT is served at /, DIR at /models/. With --cut-once (for tests), /models/cut-once/NAME is
// DIR/NAME whose first response ends after BYTES bytes, as a dropped connection would.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const root = path.resolve(args[0] || '.');
const models = option('--models') ? path.resolve(option('--models')) : null;
const port = Number(option('--port', 8090));
const cutOnce = option('--cut-once') ? Number(option('--cut-once')) : 0;
const cutDone = new Set(); // the paths already cut once
const types = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript',
  '.wasm': 'application/wasm', '.css': 'text/css', '.json': 'application/json',
  '.png': 'image/png', '.ts': 'text/plain', '.gguf': 'application/octet-stream',
};

// The file a URL path names under its folder, or null (outside it, or missing).
function resolve(urlPath) {
  let base = root, rel = urlPath;
  let cut = false;
  if (models && cutOnce && urlPath.startsWith('/models/cut-once/')) {
    base = models; rel = urlPath.slice(17); cut = !cutDone.has(urlPath); cutDone.add(urlPath);
  } else if (models && urlPath.startsWith('/models/')) {
    base = models; rel = urlPath.slice(8);
  }
  let name;
  try {
    name = decodeURIComponent(rel);
  } catch {
    return null; /* a malformed %-escape names nothing */
  }
  const file = path.join(base, path.normalize(name).replace(/^(\.\.[/\\])+/, ''));
  if (!file.startsWith(base + path.sep) && file !== base) return null;
  try {
    const st = fs.statSync(file);
    if (st.isDirectory()) return resolve(path.posix.join(urlPath, 'index.html'));
    return { file, size: st.size, cut };
  } catch {
    return null;
  }
}

// "bytes=a-b" / "bytes=a-" / "bytes=-n" as [start, end] within size; null: not satisfiable.
function range(header, size) {
  const m = /^bytes=(\d*)-(\d*)$/.exec(header || '');
  if (!m || (!m[1] && !m[2])) return undefined;
  let start = m[1] ? Number(m[1]) : size - Number(m[2]);
  let end = m[1] && m[2] ? Number(m[2]) : size - 1;
  start = Math.max(0, start);
  end = Math.min(end, size - 1);
  return start <= end ? [start, end] : null;
}

http.createServer((req, res) => {
  res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
  res.setHeader('Cross-Origin-Embedder-Policy', 'require-corp');
  res.setHeader('Cross-Origin-Resource-Policy', 'same-origin');
  res.setHeader('Cache-Control', 'no-store');
  const url = new URL(req.url, 'http://x');
  const found = req.method === 'GET' || req.method === 'HEAD' ? resolve(url.pathname) : null;
  if (!found) {
    res.writeHead(req.method === 'GET' || req.method === 'HEAD' ? 404 : 405);
    return res.end();
  }
  const r = range(req.headers.range, found.size);
  if (r === null) {
    res.writeHead(416, { 'Content-Range': `bytes */${found.size}` });
    return res.end();
  }
  const [start, end] = r || [0, found.size - 1];
  res.writeHead(r ? 206 : 200, {
    'Content-Type': types[path.extname(found.file)] || 'application/octet-stream',
    'Content-Length': end - start + 1, 'Accept-Ranges': 'bytes',
    ...(r ? { 'Content-Range': `bytes ${start}-${end}/${found.size}` } : {}),
  });
  if (req.method === 'HEAD' || found.size === 0) return res.end();
  const stream = fs.createReadStream(found.file, { start, end });
  stream.on('error', () => res.destroy()); // the file went away mid-response
  if (found.cut && end - start + 1 > cutOnce) {
    let sent = 0; // a dropped connection: the socket closes mid-body
    stream.on('data', (chunk) => {
      if (sent + chunk.length >= cutOnce) {
        // the bytes written reach the client (and its reader, which loses what is still queued
        // when the stream fails), then the connection drops
        stream.destroy();
        res.write(chunk.subarray(0, cutOnce - sent), () => setTimeout(() => res.socket.destroy(), 500));
        return;
      }
      sent += chunk.length;
      res.write(chunk);
    });
    stream.on('end', () => res.end());
    return;
  }
  stream.pipe(res);
}).listen(port, '127.0.0.1', () => console.log(`serving ${root} at http://127.0.0.1:${port}/`));
