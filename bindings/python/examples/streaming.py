"""streaming.py MODEL.gguf: text printed as it is generated."""
import sys

import oxidize as llama_cpp

llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=512, verbose=False)
for chunk in llm("And God said", max_tokens=48, stream=True):
    print(chunk["choices"][0]["text"], end="", flush=True)
print()
