"""test_llama.py: the package against the `oxidize` binary and llama-cpp-python's contract, on the
shared kjv model: tokens, greedy and seeded completions, streams, grammars, state, chat,
embeddings, and the errors bad input raises."""
import ctypes
import json
import re

import numpy as np
import pytest

import oxidize
import oxidize as llama_cpp  # the one-line switch the package promises
from conftest import TESTDATA

PROMPT = "In the beginning"


def test_tokenize_matches_cli(llm, kjv_path, cli):
    text = "In the beginning God created the heaven and the earth. Ünïcödé ok?"
    ids = json.loads(cli("tokenize", "-m", kjv_path, "--ids", "-p", text))
    assert llm.tokenize(text.encode()) == ids
    no_bos = json.loads(cli("tokenize", "-m", kjv_path, "--ids", "--no-bos", "-p", text))
    assert llm.tokenize(text.encode(), add_bos=False) == no_bos
    assert llm.detokenize(ids) == text.encode()
    assert llm.token_bos() == ids[0] and llm.n_vocab() == 32000


def test_greedy_matches_cli(llm, kjv_path, cli):
    want = cli("run", "-m", kjv_path, "-p", PROMPT, "-n", "24", "--temp", "0")
    got = llm(PROMPT, max_tokens=24, temperature=0)
    assert want == PROMPT + got["choices"][0]["text"] + "\n"
    assert got["usage"] == {"prompt_tokens": 4, "completion_tokens": 24, "total_tokens": 28}
    assert got["choices"][0]["finish_reason"] == "length"
    assert re.fullmatch(r"cmpl-[0-9a-f-]{36}", got["id"]) and got["object"] == "text_completion"


def test_split_arguments_reach_the_engine(kjv_path, cli):
    # llama_cpp's split_mode / main_gpu / tensor_split: a row split asked of the CPU runs there
    # as the CLI's does; a GPU the machine lacks or a negative share is the engine's error
    want = cli("run", "-m", kjv_path, "-p", PROMPT, "-n", "8", "--temp", "0", "-ngl", "0",
               "-sm", "row", "-ts", "1,1")
    llm = llama_cpp.Llama(kjv_path, n_gpu_layers=0, split_mode=llama_cpp.LLAMA_SPLIT_MODE_ROW,
                          tensor_split=[1, 1], verbose=False)
    assert want == PROMPT + llm(PROMPT, max_tokens=8, temperature=0)["choices"][0]["text"] + "\n"
    with pytest.raises(Exception, match="main_gpu 15, but there are"):
        llama_cpp.Llama(kjv_path, main_gpu=15, verbose=False)
    with pytest.raises(Exception, match="share -1"):
        llama_cpp.Llama(kjv_path, tensor_split=[1, -1], verbose=False)
    with pytest.raises(ValueError, match="at most 16"):
        llama_cpp.Llama(kjv_path, tensor_split=[1] * 17, verbose=False)


def test_seeded_sampling_matches_cli(llm, kjv_path, cli):
    args = ["--seed", "42", "--temp", "0.9", "--top-k", "30", "--top-p", "0.9", "--min-p",
            "0.02", "--repeat-penalty", "1.1"]
    want = cli("run", "-m", kjv_path, "-p", PROMPT, "-n", "40", *args)
    got = llm.create_completion(PROMPT, max_tokens=40, seed=42, temperature=0.9, top_k=30,
                                top_p=0.9, min_p=0.02, repeat_penalty=1.1)
    assert want == PROMPT + got["choices"][0]["text"] + "\n"


def test_stream_concatenates_to_whole(llm):
    whole = llm(PROMPT, max_tokens=40, seed=7)["choices"][0]["text"]
    chunks = list(llm(PROMPT, max_tokens=40, seed=7, stream=True))
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    assert len({c["id"] for c in chunks}) == 1


def test_stop_strings(llm):
    whole = llm(PROMPT, max_tokens=30, temperature=0)["choices"][0]["text"]
    cut = whole.split(" the ", 1)
    out = llm(PROMPT, max_tokens=30, temperature=0, stop=[" the "])
    assert out["choices"][0]["text"] == cut[0] and out["choices"][0]["finish_reason"] == "stop"
    streamed = "".join(c["choices"][0]["text"]
                       for c in llm(PROMPT, max_tokens=30, temperature=0, stop=" the ",
                                    stream=True))
    assert streamed == cut[0]


def test_grammar_constrains_output(llm):
    g = llama_cpp.LlamaGrammar.from_string('root ::= ("yes" | "no") " " [0-9] [0-9]')
    for seed in range(3):
        text = llm("Answer:", max_tokens=10, grammar=g, seed=seed)["choices"][0]["text"]
        assert re.fullmatch(r"(yes|no) \d\d", text), text
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    g = llama_cpp.LlamaGrammar.from_json_schema(json.dumps(schema))
    out = llm("JSON:", max_tokens=30, grammar=g, temperature=0)
    assert isinstance(json.loads(out["choices"][0]["text"])["n"], int)


def test_save_and_load_state_reproduce(llm):
    llm.set_seed(1337)
    llm.eval(llm.tokenize(PROMPT.encode()))
    state = llm.save_state()
    first = llm(PROMPT, max_tokens=16)["choices"][0]["text"]
    second = llm(PROMPT, max_tokens=16)["choices"][0]["text"]
    assert first != second  # no seed given: each call draws from the last call's seed
    llm.load_state(state)
    assert llm(PROMPT, max_tokens=16)["choices"][0]["text"] == first


def test_state_bytes_move_between_instances(llm, tmp_path):
    """The state carries the cache itself: a second Llama on the same model loads it (through a
    pickle on disk) and answers as the first does; another model's state is refused."""
    import pickle
    llm.reset()
    llm.eval(llm.tokenize(PROMPT.encode()))
    state = llm.save_state()
    assert state.llama_state and state.llama_state_size == len(state.llama_state)
    want = llm(PROMPT, max_tokens=12, temperature=0)["choices"][0]["text"]
    path = tmp_path / "state.pkl"
    path.write_bytes(pickle.dumps(state))
    other = llama_cpp.Llama(model_path=llm.model_path, n_ctx=llm.n_ctx(), verbose=False)
    other.load_state(pickle.loads(path.read_bytes()))
    assert other.n_tokens == state.n_tokens
    assert other(PROMPT, max_tokens=12, temperature=0)["choices"][0]["text"] == want
    stranger = llama_cpp.Llama(model_path=str(TESTDATA / "models" / "llama-q8_0.gguf"),
                               n_ctx=256, verbose=False)
    with pytest.raises(Exception, match="another model"):
        stranger.load_state(state)


def test_generate_eval_sample(llm):
    tokens = llm.tokenize(PROMPT.encode())
    llm.reset()
    greedy = [t for _, t in zip(range(5), llm.generate(tokens, temp=0))]
    want = llm(PROMPT, max_tokens=5, temperature=0)["choices"][0]["text"]
    assert llm.detokenize(greedy).decode() == want
    llm.reset()
    llm.eval(tokens)
    assert llm.n_tokens == len(tokens) and llm.sample(temp=0) == greedy[0]


def test_logits_processor_and_stopping_criteria(llm):
    tokens = llm.tokenize(PROMPT.encode())
    llm.reset()
    first = next(iter(llm.generate(tokens, temp=0)))
    seen = []

    def ban(input_ids, scores):
        seen.append(len(input_ids))
        scores[first] = -np.inf
        return scores

    llm.reset()
    got = next(iter(llm.generate(tokens, temp=0,
                                 logits_processor=llama_cpp.LogitsProcessorList([ban]))))
    assert got != first and seen == [len(tokens)]
    stop_after = llama_cpp.StoppingCriteriaList([lambda ids, logits: len(ids) >= 7])
    out = llm(PROMPT, max_tokens=20, temperature=0, stopping_criteria=stop_after)
    assert out["usage"]["completion_tokens"] == 3 and out["choices"][0]["finish_reason"] == "stop"


def test_logprobs_need_logits_all(llm, kjv_path):
    with pytest.raises(ValueError, match="logits_all"):
        llm(PROMPT, max_tokens=2, logprobs=3)
    full = llama_cpp.Llama(kjv_path, n_ctx=128, logits_all=True, verbose=False)
    out = full(PROMPT, max_tokens=4, temperature=0, logprobs=3)
    lp = out["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == 4 and "".join(lp["tokens"]) == out["choices"][0]["text"]
    assert all(p <= 0 for p in lp["token_logprobs"])
    assert all(max(top.values()) == pytest.approx(p, abs=1e-6) or len(top) == 4
               for top, p in zip(lp["top_logprobs"], lp["token_logprobs"]))
    chunks = list(full(PROMPT, max_tokens=4, temperature=0, logprobs=3, stream=True))
    streamed = [c["choices"][0]["logprobs"] for c in chunks if c["choices"][0]["logprobs"]]
    assert [t for s in streamed for t in s["tokens"]] == lp["tokens"]
    assert [p for s in streamed for p in s["token_logprobs"]] == \
        pytest.approx(lp["token_logprobs"], abs=1e-3)  # the prompt re-read in another batch
    x = np.random.default_rng(0).normal(size=(3, 50)).astype(np.single)
    lse = llama_cpp.Llama.logits_to_logprobs(x)
    assert np.allclose(np.exp(lse).sum(axis=-1), 1.0, atol=1e-5)


def test_chat_matches_cli(llm, kjv_path, cli, tmp_path):
    from oxidize._chat import BUILTIN_FORMATS
    template = tmp_path / "chatml.jinja"
    template.write_text(BUILTIN_FORMATS["chatml"][0])
    chat = llama_cpp.Llama(kjv_path, n_ctx=512, chat_format="chatml", verbose=False)
    messages = [{"role": "system", "content": "You speak like the King James Bible."},
                {"role": "user", "content": "Who made the heaven?"}]
    want = cli("run", "-m", kjv_path, "--chat", "--chat-template", str(template), "--system",
               messages[0]["content"], "-p", messages[1]["content"], "-n", "20", "--temp", "0",
               "--stop", "<|im_end|>")
    got = chat.create_chat_completion(messages, max_tokens=20, temperature=0)
    assert got["choices"][0]["message"]["content"] + "\n" == want
    assert got["object"] == "chat.completion" and got["id"].startswith("chatcmpl-")
    chunks = list(chat.create_chat_completion(messages, max_tokens=20, temperature=0,
                                              stream=True))
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    assert chunks[-1]["choices"][0]["delta"] == {}
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == \
        got["choices"][0]["message"]["content"]


def test_chat_json_and_forced_tool(kjv_path):
    chat = llama_cpp.Llama(kjv_path, n_ctx=512, chat_format="chatml", verbose=False)
    messages = [{"role": "user", "content": "Give a number."}]
    schema = {"type": "object", "properties": {"count": {"type": "integer"}},
              "required": ["count"]}
    out = chat.create_chat_completion(
        messages, max_tokens=40, temperature=0,
        response_format={"type": "json_object", "schema": schema})
    assert isinstance(json.loads(out["choices"][0]["message"]["content"])["count"], int)
    tools = [{"type": "function", "function": {"name": "count", "parameters": schema}}]
    out = chat.create_chat_completion(messages, max_tokens=40, temperature=0, tools=tools,
                                      tool_choice={"type": "function",
                                                   "function": {"name": "count"}})
    call = out["choices"][0]["message"]["tool_calls"][0]
    assert out["choices"][0]["finish_reason"] == "tool_calls"
    assert call["function"]["name"] == "count"
    assert isinstance(json.loads(call["function"]["arguments"])["count"], int)
    with pytest.raises(ValueError, match="not found"):
        chat.create_chat_completion(messages, tools=tools,
                                    tool_choice={"type": "function", "function": {"name": "x"}})


def test_embeddings_list_equals_one_by_one():
    from conftest import BERT
    if not BERT.exists():
        pytest.skip("no embedding model")
    emb = llama_cpp.Llama(str(BERT), embedding=True, verbose=False)
    texts = ["In the beginning", "God created the heaven", "and the earth"]
    together = emb.embed(texts)
    assert len(together) == 3 and len(together[0]) == emb.n_embd()
    for text, vec in zip(texts, together):
        assert np.allclose(emb.embed(text), vec, rtol=1e-4, atol=1e-6)
    resp = emb.create_embedding(texts)
    assert resp["object"] == "list" and [d["index"] for d in resp["data"]] == [0, 1, 2]
    assert resp["usage"]["prompt_tokens"] == resp["usage"]["total_tokens"] > 0


def test_bad_inputs_raise(llm, kjv_path, tmp_path):
    with pytest.raises(ValueError, match="Model path does not exist"):
        llama_cpp.Llama(str(tmp_path / "missing.gguf"), verbose=False)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\xff" * 60)
    with pytest.raises(oxidize.FormatError):
        llama_cpp.Llama(str(bad), verbose=False)
    small = llama_cpp.Llama(kjv_path, n_ctx=16, verbose=False)
    with pytest.raises(ValueError, match="exceed context window of 16"):
        small(" the" * 40, max_tokens=4)
    with pytest.raises(oxidize.FormatError):
        llm(PROMPT, max_tokens=2, grammar=llama_cpp.LlamaGrammar.from_string("root ::= ("))
    with pytest.raises(oxidize.FormatError):
        llama_cpp.LlamaGrammar.from_json_schema("{not json")
    with pytest.raises(TypeError):
        llm.tokenize("a str, not bytes")
    with pytest.raises(RuntimeError, match="embedding=True"):
        llm.embed("x")
    with pytest.raises(oxidize.InvalidArgumentError):
        llm(PROMPT, max_tokens=2, top_p=float("nan"))
    assert llm(PROMPT, max_tokens=3, temperature=0)["usage"]["completion_tokens"] == 3


@pytest.mark.parametrize("script,model", [
    ("completion.py", "kjv"), ("chat.py", "kjv"), ("streaming.py", "kjv"),
    ("embeddings.py", "bert"), ("json_schema.py", "kjv"), ("async_streams.py", "kjv")])
def test_examples_run(script, model, kjv_path):
    import subprocess
    import sys
    from pathlib import Path
    from conftest import BERT
    path = kjv_path if model == "kjv" else str(BERT)
    args = [sys.executable, str(Path(__file__).parent.parent / "examples" / script), path]
    if script == "chat.py":
        args.append("chatml")
    out = subprocess.run(args, capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.strip()


BAD_ARGUMENTS = [
    dict(max_tokens="many"), dict(temperature=None), dict(top_k="forty"), dict(top_p=float("nan")),
    dict(min_p=-1.0), dict(repeat_penalty=float("inf")), dict(seed="s"), dict(stop=3),
    dict(logit_bias={"x": 1.0}), dict(logit_bias={-5: 1.0}), dict(mirostat_mode=1, mirostat_tau=-1.0),
    dict(grammar="root ::= x"), dict(logits_processor=[lambda ids, scores: None]),
    dict(suffix=5), dict(suffix="no fill-in-the-middle tokens"), dict(logprobs=2),
]


@pytest.mark.parametrize("kwargs", BAD_ARGUMENTS, ids=[repr(k) for k in BAD_ARGUMENTS])
def test_bad_arguments_raise_and_lose_nothing(llm, kwargs):
    with pytest.raises(Exception):
        llm(PROMPT, **{"max_tokens": 3, **kwargs})
    assert llm(PROMPT, max_tokens=3, temperature=0)["usage"]["completion_tokens"] == 3


def test_bad_prompts_and_messages(llm, kjv_path):
    with pytest.raises(Exception):
        llm(None, max_tokens=2)
    with pytest.raises(Exception):
        llm([llm.n_vocab() + 5], max_tokens=2)  # a token id the vocabulary does not have
    chat = llama_cpp.Llama(kjv_path, n_ctx=128, chat_format="chatml", verbose=False)
    with pytest.raises(Exception):
        chat.create_chat_completion("not a list of messages")
    with pytest.raises(ValueError, match="Invalid chat handler"):
        llama_cpp.Llama(kjv_path, n_ctx=64, chat_format="nope",
                        verbose=False).create_chat_completion([{"role": "user", "content": "x"}])
    assert llm(PROMPT, max_tokens=2, temperature=0)["usage"]["completion_tokens"] == 2


def test_random_arguments_never_crash(llm):
    """Seeded random values of the wrong types and ranges for every sampling argument: each call
    returns or raises a Python exception, and the model answers after all of them."""
    import random
    rng = random.Random(1234)
    values = [None, -1, 0, 1, 3, 2 ** 40, -2 ** 40, 0.5, -0.5, float("nan"), float("inf"), "",
              "x", b"\xff", [], [1], {}, {1: 2.0}, {"a": 1}, True, object()]
    names = ["max_tokens", "temperature", "top_p", "top_k", "min_p", "typical_p",
             "repeat_penalty", "frequency_penalty", "presence_penalty", "seed", "stop",
             "mirostat_mode", "mirostat_tau", "mirostat_eta", "logit_bias", "echo"]
    for _ in range(300):
        kwargs = {n: rng.choice(values) for n in rng.sample(names, rng.randint(1, 4))}
        kwargs.setdefault("max_tokens", 2)
        if not isinstance(kwargs["max_tokens"], int) or kwargs["max_tokens"] > 4:
            kwargs["max_tokens"] = 2  # bound the work; its bad values are tested above
        try:
            llm(PROMPT, **kwargs)
        except Exception:
            pass
    assert llm(PROMPT, max_tokens=3, temperature=0)["usage"]["completion_tokens"] == 3


def test_pickle_and_tokenizer(kjv_path):
    import pickle
    llm = llama_cpp.Llama(kjv_path, n_ctx=128, vocab_only=True, verbose=False)
    again = pickle.loads(pickle.dumps(llm))
    assert again.n_ctx() == 128 and again.model_path == kjv_path
    assert again.tokenize(b"In the beginning") == llm.tokenize(b"In the beginning")
    tok = llama_cpp.LlamaTokenizer.from_ggml_file(kjv_path)
    ids = tok.encode("And God said")
    assert ids == llm.tokenize(b"And God said", special=True) and tok.decode(ids) == "And God said"
    with pytest.raises(RuntimeError, match="vocab_only"):
        llm("x", max_tokens=1)


def test_metadata(llm, kjv_path, cli):
    assert llm.metadata["general.architecture"] == "llama"
    assert int(llm.metadata["llama.context_length"]) > 0
    info = cli("info", kjv_path)
    assert llm.metadata["llama.embedding_length"] in info
    assert "tokenizer.ggml.tokens" not in llm.metadata  # arrays are left out


def test_suffix_builds_an_infill_prompt(kjv_path):
    fim = llama_cpp.Llama(kjv_path, n_ctx=256, verbose=False)
    with pytest.raises(ValueError, match="fill-in-the-middle"):
        fim("def f(", suffix="):", max_tokens=2)
    # the kjv model has no FIM tokens: give it three ordinary ones to check the assembly
    pre, suf, mid = 100, 101, 102
    fim.metadata.update({"tokenizer.ggml.fim_pre_token_id": str(pre),
                         "tokenizer.ggml.fim_suf_token_id": str(suf),
                         "tokenizer.ggml.fim_mid_token_id": str(mid)})
    want = ([fim.token_bos(), pre] + fim.tokenize(b"In the", add_bos=False) + [suf]
            + fim.tokenize(b" beginning", add_bos=False) + [mid])
    got = fim("In the", suffix=" beginning", max_tokens=4, temperature=0)
    assert got["usage"]["prompt_tokens"] == len(want)
    plain = fim(want, max_tokens=4, temperature=0)
    assert got["choices"][0]["text"] == plain["choices"][0]["text"]


CONVERSATION = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Who?"}]
RENDERINGS = {
    "chatml": "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
              "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nWho?<|im_end|>\n"
              "<|im_start|>assistant\n",
    "llama-3": "<s><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
               "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
               "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
               "<|start_header_id|>user<|end_header_id|>\n\nWho?<|eot_id|>"
               "<|start_header_id|>assistant<|end_header_id|>\n\n",
    "llama-2": "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello. </s>"
               "<s>[INST] Who? [/INST]",
    "mistral-instruct": "<s>[INST] Be brief.\n\nHi [/INST]Hello.</s>[INST] Who? [/INST]",
    "gemma": "<s><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
             "Hello.<end_of_turn>\n<start_of_turn>user\nWho?<end_of_turn>\n"
             "<start_of_turn>model\n",
    "zephyr": "<|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello.</s>\n"
              "<|user|>\nWho?</s>\n<|assistant|>\n",
}


@pytest.mark.parametrize("fmt", sorted(RENDERINGS))
def test_builtin_chat_formats(kjv_path, fmt):
    import jinja2
    from oxidize._chat import BUILTIN_FORMATS, render
    chat = llama_cpp.Llama(kjv_path, n_ctx=256, chat_format=fmt, verbose=False)
    text, stop = render(chat, CONVERSATION)
    assert text == RENDERINGS[fmt]
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)  # as transformers renders
    assert text == env.from_string(BUILTIN_FORMATS[fmt][0]).render(
        messages=CONVERSATION, bos_token="<s>", eos_token="</s>", add_generation_prompt=True)
    out = chat.create_chat_completion(CONVERSATION, max_tokens=4, temperature=0)
    assert out["choices"][0]["finish_reason"] in ("stop", "length") and stop


def test_registered_format_and_chat_handler(kjv_path):
    from oxidize import llama_chat_format

    @llama_chat_format.register_chat_format("test-plain")
    def plain(*, messages, **kwargs):
        text = "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:"
        return llama_chat_format.ChatFormatterResponse(prompt=text, stop=["\nuser:"])

    chat = llama_cpp.Llama(kjv_path, n_ctx=256, chat_format="test-plain", verbose=False)
    messages = [{"role": "user", "content": "And God said"}]
    got = chat.create_chat_completion(messages, max_tokens=12, temperature=0)
    want = chat("user: And God said\nassistant:", max_tokens=12, temperature=0,
                stop=["\nuser:"])
    assert got["choices"][0]["message"]["content"] == want["choices"][0]["text"]
    jinja = llama_chat_format.Jinja2ChatFormatter(
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:",
        eos_token="</s>", bos_token="<s>")
    handled = llama_cpp.Llama(kjv_path, n_ctx=256, chat_handler=jinja.to_chat_handler(),
                              verbose=False)
    again = handled.create_chat_completion(messages, max_tokens=12, temperature=0)
    assert again["choices"][0]["message"]["content"] == got["choices"][0]["message"]["content"]
    with pytest.raises(llama_chat_format.LlamaChatCompletionHandlerNotFoundException):
        llama_chat_format.get_chat_completion_handler("no-such-format")


def test_lora_path_and_scale(cli):
    """lora_path / lora_scale apply a GGUF LoRA adapter as `oxidize run --lora-scaled` does;
    scale 0 is the plain model; a missing or unfitting adapter raises."""
    import subprocess
    from conftest import OX_BIN, REPO, TESTDATA
    model = str(TESTDATA / "models" / "llama-f16.gguf")
    lora = str(REPO / "tests" / "data" / "lora" / "llama-lora-f32.gguf")
    prompt = "Once upon a time"

    def greedy(**kw):
        llm = llama_cpp.Llama(model, n_ctx=128, verbose=False, **kw)
        return prompt + llm(prompt, max_tokens=8, temperature=0)["choices"][0]["text"]

    def run(*extra):
        out = subprocess.run([str(OX_BIN), "run", "-m", model, "-p", prompt, "-n", "8", "--temp",
                              "0", "-ngl", "0", *extra], check=True, capture_output=True)
        return out.stdout.decode("utf-8", errors="ignore").removesuffix("\n")

    plain, half = greedy(), greedy(lora_path=lora, lora_scale=0.5)
    assert half != plain and half == run("--lora-scaled", lora, "0.5")
    assert greedy(lora_path=lora) == run("--lora", lora)
    assert greedy(lora_path=lora, lora_scale=0.0) == plain
    with pytest.raises(ValueError, match="LoRA path does not exist"):
        llama_cpp.Llama(model, lora_path="/no/such.gguf", verbose=False)
    with pytest.raises(oxidize.InvalidArgumentError, match="not an adapter"):
        llama_cpp.Llama(model, lora_path=model, verbose=False)


def test_draft_model_prompt_lookup(kjv_path):
    """draft_model=LlamaPromptLookupDecoding(...), as llama_cpp.llama_speculative's: completions
    (greedy, seeded, streamed with a stop string) and a chat give the text without it; its
    drafts do get taken; bad sizes raise."""
    from oxidize.llama_speculative import LlamaDraftModel, LlamaPromptLookupDecoding
    prompt = "And the waters were as the waters, and the waters were as the waters, and the"
    plain = llama_cpp.Llama(kjv_path, n_ctx=1024, verbose=False)

    class Counting(LlamaPromptLookupDecoding):
        calls = drafted = 0

        def __call__(self, input_ids, /, **kwargs):
            out = super().__call__(input_ids, **kwargs)
            Counting.calls += 1
            Counting.drafted += len(out)
            return out

    spec = llama_cpp.Llama(kjv_path, n_ctx=1024, verbose=False,
                           draft_model=Counting(max_ngram_size=3, num_pred_tokens=6))
    for kw in ({"temperature": 0}, {"temperature": 0.8, "seed": 11}):
        want = plain(prompt, max_tokens=200, **kw)["choices"][0]["text"]
        assert spec(prompt, max_tokens=200, **kw)["choices"][0]["text"] == want
    streamed = [plain(prompt, max_tokens=80, temperature=0, stream=True, stop=["tree"]),
                spec(prompt, max_tokens=80, temperature=0, stream=True, stop=["tree"])]
    texts = ["".join(c["choices"][0]["text"] for c in s) for s in streamed]
    assert texts[0] == texts[1] and texts[0]
    assert Counting.calls > 10 and Counting.drafted > 0
    msgs = [{"role": "user", "content": prompt}]
    tmpl = llama_cpp.Llama(kjv_path, n_ctx=1024, verbose=False, chat_format="chatml",
                           draft_model=LlamaPromptLookupDecoding())
    plain_chat = llama_cpp.Llama(kjv_path, n_ctx=1024, verbose=False, chat_format="chatml")
    got = tmpl.create_chat_completion(msgs, max_tokens=40, temperature=0)
    assert got["choices"][0]["message"] == plain_chat.create_chat_completion(
        msgs, max_tokens=40, temperature=0)["choices"][0]["message"]
    assert isinstance(LlamaPromptLookupDecoding(), LlamaDraftModel)
    for bad in ({"max_ngram_size": 0}, {"num_pred_tokens": 0}, {"num_pred_tokens": 1000}):
        with pytest.raises(ValueError):
            LlamaPromptLookupDecoding(**bad)


def test_struct_sizes_checked_against_the_library():
    from oxidize import _lib
    # every declared struct agrees with the library's (the import checked it too)
    for tag, struct in _lib.STRUCT_TAGS.items():
        assert _lib.lib.ox_struct_size(tag.encode()) == ctypes.sizeof(struct) > 0
    assert _lib.lib.ox_struct_size(b"ox_no_such_struct") == 0

    class ShortParams(ctypes.Structure):  # an older oxidize.h's ox_model_params, one field short
        _fields_ = _lib.ModelParams._fields_[:-1]

    with pytest.raises(ImportError, match="ox_model_params is .* bytes, this package's"):
        _lib.check_struct_sizes(_lib.lib, {"ox_model_params": ShortParams})
