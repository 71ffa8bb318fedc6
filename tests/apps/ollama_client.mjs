// ollama_client.mjs: the official `ollama` npm client, unmodified, against `oxidize serve`
// (driven by test_ollama_client.py). Prints one JSON object of what each call gave.
//   node ollama_client.mjs NODE_MODULES HOST PROMPT
import { createRequire } from 'node:module';
import path from 'node:path';

const [modules, host, prompt] = process.argv.slice(2);
const require = createRequire(path.join(modules, 'x.js'));
const { Ollama } = require('ollama');
const ollama = new Ollama({ host });
const out = {};
const opts = { num_predict: 12, temperature: 0 };

out.version = (await ollama.version()).version;
out.list = (await ollama.list()).models.map((m) => ({ name: m.name, family: m.details.family, size: m.size }));
out.ps = (await ollama.ps()).models.map((m) => m.name);
const shown = await ollama.show({ model: 'kjv' });
out.show = { family: shown.details.family, capabilities: shown.capabilities, has_template: shown.template.length > 0 };

const gen = await ollama.generate({ model: 'kjv', prompt, raw: true, options: opts });
out.generate = { response: gen.response, done: gen.done, reason: gen.done_reason, eval_count: gen.eval_count,
                 context: gen.context };
let text = '', parts = 0, last = null;
for await (const part of await ollama.generate({ model: 'kjv', prompt, raw: true, options: opts, stream: true })) {
  text += part.response; parts++; last = part;
}
out.generate_stream = { response: text, parts, done: last.done, eval_count: last.eval_count };
const next = await ollama.generate({ model: 'kjv', prompt: ' And', raw: true, context: gen.context, options: opts });
out.generate_context = { response: next.response, prompt_eval_count: next.prompt_eval_count };

const messages = [{ role: 'user', content: 'Who made the light?' }];
const chat = await ollama.chat({ model: 'kjv', messages, options: opts });
out.chat = { role: chat.message.role, content: chat.message.content, reason: chat.done_reason };
text = ''; parts = 0;
for await (const part of await ollama.chat({ model: 'kjv', messages, options: opts, stream: true })) {
  text += part.message.content; parts++; last = part;
}
out.chat_stream = { content: text, parts, done: last.done, reason: last.done_reason };

const tools = [{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'] } } }];
// tool_choice (OpenAI's, which oxidize also takes here): the Bible model would never call it
const tool = await ollama.chat({ model: 'kjv', messages: [{ role: 'user', content: 'Weather in Paris?' }], tools,
  tool_choice: 'required', options: { num_predict: 80, temperature: 0 } });
out.tool = { calls: tool.message.tool_calls || [] };

const fmt = await ollama.chat({ model: 'kjv', messages, format: 'json', options: { num_predict: 48, temperature: 0 } });
out.format = fmt.message.content;

const emb = await ollama.embed({ model: 'kjv', input: ['In the beginning', 'God created'] });
out.embed = { n: emb.embeddings.length, dim: emb.embeddings[0].length, first: emb.embeddings[0].slice(0, 4) };

try {
  await ollama.chat({ model: 'kjv', messages: 'not a list' });
  out.error = 'none';
} catch (e) {
  out.error = String(e.message || e);
}
console.log(JSON.stringify(out));
