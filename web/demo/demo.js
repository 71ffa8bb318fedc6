// demo.js: the demo page's behaviour: loads the chosen model through the JavaScript API
// (oxidize.js) with download progress, then chats: Enter sends, the answer streams in, and the
// decode speed is shown. Settings may come from the address: ?temperature=0&max_tokens=64.
import { Oxidize } from './oxidize.js';

const $ = (id) => document.getElementById(id);
const status = (text) => { $('status').textContent = text; };
const query = new URLSearchParams(location.search);
const options = { max_tokens: 256 };
for (const [k, v] of query) if (k !== 'model' && k !== 'threads') options[k] = Number(v);
const conversation = [];
let ox = null, generating = false;

function addMessage(kind, text) {
  const div = document.createElement('div');
  div.className = `msg ${kind}`;
  div.textContent = text;
  $('messages').append(div);
  div.scrollIntoView({ block: 'end' });
  return div;
}

function mb(bytes) {
  return (bytes / 1048576).toFixed(1);
}

async function load() {
  const choice = $('model-select').value;
  const source = choice === 'url' ? $('model-url').value
    : choice === 'file' ? $('model-file').files[0] : choice;
  if (!source) return status('Give a URL or pick a file first.');
  $('input').disabled = true;
  $('load').disabled = true;
  try {
    ox = ox || await Oxidize.create({ threads: Number(query.get('threads')) || undefined });
    status('Loading…');
    const info = await ox.load(source, {
      onProgress: (p) => status(p.cached ? `From the browser's storage (${mb(p.loaded)} MB)…`
        : `Downloading ${mb(p.loaded)}${p.total ? ` of ${mb(p.total)}` : ''} MB…`),
    });
    const name = source.name || String(source).split('/').pop();
    status(`${name}: ${info.description}, ${info.nCtx} tokens of context, ${ox.threads} threads`);
    $('status').dataset.loaded = name;
    conversation.length = 0;
    $('messages').replaceChildren();
    $('input').disabled = false;
    $('input').focus();
  } catch (err) {
    status(`Could not load the model: ${err.message}`);
    $('status').dataset.error = err.message;
  } finally {
    $('load').disabled = false;
  }
}

async function send() {
  const text = $('input').value.trim();
  if (!text || generating || !ox) return;
  $('input').value = '';
  generating = true;
  $('stop').disabled = false;
  addMessage('user', text);
  conversation.push({ role: 'user', content: text });
  const div = addMessage('assistant', '');
  let answer = '';
  const run = ox.chat(conversation, options);
  try {
    for await (const piece of run) {
      answer += piece.text;
      div.textContent = answer;
      div.scrollIntoView({ block: 'end' });
    }
    const r = await run.result;
    $('speed').textContent = `${(r.tokens / (r.genMs / 1000)).toFixed(1)} tokens/s`;
    conversation.push({ role: 'assistant', content: answer });
  } catch (err) {
    div.className = 'msg error';
    div.textContent = `Error: ${err.message}`;
    conversation.pop();
  } finally {
    div.dataset.done = '1';
    generating = false;
    $('stop').disabled = true;
  }
}

$('model-select').addEventListener('change', () => {
  $('model-url').hidden = $('model-select').value !== 'url';
  $('model-file').hidden = $('model-select').value !== 'file';
});
$('load').addEventListener('click', load);
$('stop').addEventListener('click', () => ox && ox.abort());
$('input').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey) {
    e.preventDefault();
    send();
  }
});
if (query.get('model')) {
  $('model-select').add(new Option(query.get('model'), query.get('model'), true, true));
}
load();
