"""embeddings.py MODEL.gguf: embeddings of a few sentences (an embedding model, e.g. BERT) and
their cosine similarities."""
import sys

import numpy as np

import oxidize as llama_cpp

llm = llama_cpp.Llama(model_path=sys.argv[1], embedding=True, verbose=False)
texts = ["The cat sat on the mat.", "A cat was sitting on a mat.", "Stocks fell sharply."]
vectors = np.array(llm.embed(texts, normalize=True))
print(np.round(vectors @ vectors.T, 3))
