"""chat.py MODEL.gguf [FORMAT]: a chat completion in the model's template (or a named format,
e.g. chatml, for a model whose file has none)."""
import sys

import oxidize as llama_cpp

llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=1024, verbose=False,
                      chat_format=sys.argv[2] if len(sys.argv) > 2 else None)
reply = llm.create_chat_completion(
    messages=[{"role": "system", "content": "You answer in one sentence."},
              {"role": "user", "content": "Who made the heaven and the earth?"}],
    max_tokens=48, temperature=0.2)
print(reply["choices"][0]["message"]["content"])
