// openai_client.mjs: the official openai npm client (v6), unmodified but for its base URL and
// key, against `oxidize serve`: prints one JSON object with what each call returned.
// usage: node openai_client.mjs NODE_MODULES_DIR BASE_URL KEY PROMPT
import { createRequire } from "node:module";
import path from "node:path";

const [modules, baseURL, apiKey, prompt] = process.argv.slice(2);
const require = createRequire(path.join(modules, "x.js"));
const { default: OpenAI } = await import(require.resolve("openai"));
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
const out = {};
const messages = [{ role: "user", content: "Who made the light?" }];

const chat = await client.chat.completions.create({
  model: "kjv", messages, max_tokens: 12, temperature: 0 });
out.chat = { content: chat.choices[0].message.content, finish: chat.choices[0].finish_reason,
             usage: chat.usage };

const stream = await client.chat.completions.create({
  model: "kjv", messages, max_tokens: 12, temperature: 0, stream: true,
  stream_options: { include_usage: true } });
let text = "", chunks = 0, usage = null;
for await (const chunk of stream) {
  chunks++;
  if (chunk.usage) usage = chunk.usage;
  for (const c of chunk.choices) text += c.delta.content ?? "";
}
out.stream = { content: text, chunks, usage };

const tools = [{ type: "function", function: {
  name: "get_weather", description: "The weather in a city",
  parameters: { type: "object", properties: { city: { type: "string", maxLength: 12 } },
                required: ["city"] } } }];
const call = await client.chat.completions.create({
  model: "kjv", messages: [{ role: "user", content: "What is the weather in Paris?" }], tools,
  tool_choice: "required", max_tokens: 80, temperature: 0 });
out.tool = { calls: call.choices[0].message.tool_calls, finish: call.choices[0].finish_reason };

const completion = await client.completions.create({
  model: "kjv", prompt, max_tokens: 10, temperature: 0 });
out.completion = { text: completion.choices[0].text, usage: completion.usage };

try {
  const emb = await client.embeddings.create({ model: "kjv", input: ["In the beginning", "Amen"] });
  out.embedding = { n: emb.data.length, dims: emb.data.map((d) => d.embedding.length),
                    first: emb.data[0].embedding.slice(0, 4), usage: emb.usage };
} catch (e) {
  out.embedding = { error: e.status ?? String(e) };
}

try {
  await new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 }).models.list();
  out.wrong_key = "accepted";
} catch (e) {
  out.wrong_key = e.status;
}
console.log(JSON.stringify(out));
