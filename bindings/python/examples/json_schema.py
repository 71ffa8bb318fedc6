"""json_schema.py MODEL.gguf: output constrained to JSON matching a schema, through a chat
completion's response_format and through a grammar on a plain completion."""
import json
import sys

import oxidize as llama_cpp

schema = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 20},
                         "age": {"type": "integer", "minimum": 0, "maximum": 150}},
          "required": ["name", "age"]}
llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=1024, verbose=False, chat_format="chatml")
reply = llm.create_chat_completion(
    messages=[{"role": "user", "content": "Describe a person as JSON."}],
    response_format={"type": "json_object", "schema": schema}, max_tokens=64, temperature=0)
print(json.loads(reply["choices"][0]["message"]["content"]))
grammar = llama_cpp.LlamaGrammar.from_json_schema(json.dumps(schema))
out = llm("A person:", grammar=grammar, max_tokens=64, temperature=0)
print(json.loads(out["choices"][0]["text"]))
