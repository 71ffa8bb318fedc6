"""completion.py MODEL.gguf: a text completion, as llama-cpp-python code writes it."""
import sys

import oxidize as llama_cpp

llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=512, verbose=False)
out = llm("In the beginning", max_tokens=32, temperature=0.7, seed=1, stop=["\n"])
print(out["choices"][0]["text"])
print(out["usage"])
