#!/usr/bin/env python3
"""make_corpus.py: writes corpus.json, the hard strings the Hugging Face gold ids are made for:
scripts, emoji, combining marks and what NFC composes, whitespace runs, code, numbers, and text
that looks like special tokens. Written as escapes here so every code point is plain to see."""
import json
import os

CORPUS = [
    # scripts
    "The quick brown fox jumps over the lazy dog.",
    "天地玄黄，宇宙洪荒。日月盈昃，辰宿列张。",
    "日本語のテキストと　全角スペース、カタカナ　ﾊﾝｶｸ",
    "한국어 문장입니다. 띄어쓰기도 있습니다.",
    "مرحبا بالعالم، هذا نص عربي.",
    "שלום עולם, זה טקסט בעברית.",
    "नमस्ते दुनिया, यह हिंदी पाठ है।",
    "สวัสดีชาวโลก นี่คือข้อความภาษาไทย",
    "Привет, мир! Ёжик в тумане.",
    "Γειά σου Κόσμε! ΑΒΓ αβγ ς",
    "Tiếng Việt có dấu: Nguyễn, ướt, ở, ữ",
    # combining marks, and what NFC composes (or leaves)
    "e\u0301cole, cafe\u0301, nai\u0308ve",
    "A\u030angstro\u0308m, \u212b, \u00c5, \u2126hm",
    "\u1100\u1161\u11a8 \uac01",
    "Vie\u0323\u0302t Nam, o\u031b\u0301",
    "\u0915\u093c \u0958 \u09a1\u09bc",
    "\ufb01ne \ufb02ow \u2460 \u00bd \uff21\uff22\uff23",
    "q\u0307\u0323 \u1e0b\u0323 d\u0323\u0307",
    "\u0041\u0300\u0301\u0302 \u00c0\u0301",
    "\u0f73 \u0f75 \u0344 \u0340\u0341",
    # emoji
    "I \u2764\ufe0f this \U0001f600\U0001f44d\U0001f3fd",
    "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 family, \U0001f1fa\U0001f1f8 \U0001f1ef\U0001f1f5 flags",
    "\U0001f9d1\U0001f3ff\u200d\U0001f4bb\U0001f3f3\ufe0f\u200d\U0001f308",
    # whitespace runs
    "   leading and trailing   ",
    "tab\tseparated\t\tvalues\t",
    "line one\nline two\r\nline three\n\n\n",
    "no\u00a0break\u2009thin\u3000ideographic\u200bzero-width",
    "\n\n\n\n",
    "        indented by eight",
    " \t \n \r\n \t",
    # code
    "def f(x):\n    return {'a': [1, 2, 3], \"b\": x ** 2}  # comment\n",
    "int main(void) { printf(\"%d\\n\", a[i++]); return 0; }",
    "const re = /^(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+)$/gi;",
    "{\"key\": \"value\", \"n\": [1.5e-10, -2, null, true]}",
    "<div class=\"x\">&amp; &lt;tag&gt;</div>",
    "SELECT * FROM t WHERE a >= 10 AND b <> 'x';",
    # numbers and contractions
    "1234567890 12 123 1234 3.14159 -0.5 1e10 1,000,000",
    "I'm you're he'll she'd we've they're IT'S DON'T O'Neil",
    "$100.00 €50 ¥1000 100% #1 @user",
    # text like special tokens
    "<|im_start|>user\nHi<|im_end|>",
    "<|im_end <|im_end|x <| im_end |> <|IM_END|>",
    "<|endoftext|><|endoftext|>",
    "</s> <s> <unk> [INST] [/INST]",
    "<think>\nstep\n</think>",
    "<tool_call>{\"name\": \"f\"}</tool_call>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<|reserved_special_token_5|> <|finetune_right_pad_id|>",
    "<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>",
    # odd mixes
    "ＡＢＣ１２３ ａｂｃ",
    "a\u0000b\u0007c\u001bd",
    "\u202eright-to-left override\u202c \u200f\u200e",
    "a\u0378b c\U000e0041d e\U0010fffdf g\ufff0h",
    "\u039f\u0394\u039f\u03a3 \u03a3\u039f\u03a6\u039f\u03a3, \u03a3 \u0391\u03a3.",
    "\u0130stanbul \u1e9e STRASSE \u01c5 \u2126 \u212a",
    "x" * 300,
    "🙂" * 20,
]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "corpus.json"), "w", encoding="utf-8") as f:
        json.dump(CORPUS, f, ensure_ascii=True, indent=0)
        f.write("\n")


if __name__ == "__main__":
    main()
