"""llama_grammar.py: LlamaGrammar, a GBNF grammar (llama.cpp's format) that constrains sampling,
from its text, a file or a JSON Schema (liboxidize's json-schema-to-grammar)."""
from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any, Union

from . import _lib
from ._errors import check

LLAMA_GRAMMAR_DEFAULT_ROOT = "root"

# A JSON value (the grammar `response_format={"type": "json_object"}` asks for).
JSON_GBNF = r'''
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( member ("," ws member)* )? "}" ws
member ::= string ":" ws value
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" char* "\"" ws
char   ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" hex hex hex hex)
hex    ::= [0-9a-fA-F]
number ::= "-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [-+]? [0-9]+)? ws
ws     ::= (" " | "\n" [ \t]*)?
'''


class LlamaGrammar:
    """A grammar's text; it is parsed when a completion builds its sampler (a grammar that does
    not parse raises oxidize.FormatError there, with the line and the reason)."""

    def __init__(self, *args: Any, _grammar: str, **kwargs: Any) -> None:
        self._grammar = _grammar
        self._root = LLAMA_GRAMMAR_DEFAULT_ROOT

    @classmethod
    def from_string(cls, grammar: str, verbose: bool = True) -> "LlamaGrammar":
        if not isinstance(grammar, str) or not grammar.strip():
            raise ValueError("from_string: the grammar is empty")
        return cls(_grammar=grammar)

    @classmethod
    def from_file(cls, file: Union[str, Path], verbose: bool = True) -> "LlamaGrammar":
        try:
            text = Path(file).read_text(encoding="utf-8")
        except Exception as err:
            raise Exception(f"from_file: error reading grammar file: {err}") from err
        if not text.strip():
            raise ValueError("from_file: error parsing grammar file: params_grammer is empty")
        return cls.from_string(text, verbose=verbose)

    @classmethod
    def from_json_schema(cls, json_schema: str, verbose: bool = True) -> "LlamaGrammar":
        """json_schema: a JSON Schema as JSON text."""
        return cls.from_string(json_schema_to_gbnf(json_schema), verbose=verbose)


def json_schema_to_gbnf(schema: str, prop_order: Any = None) -> str:
    """A JSON Schema (JSON text) as a GBNF grammar with a `root` rule; bad JSON and unsupported
    schemas raise oxidize.FormatError."""
    data = schema.encode("utf-8")
    out, length = ctypes.c_void_p(), ctypes.c_size_t()
    check(_lib.lib.ox_json_schema_to_grammar(data, len(data), ctypes.byref(out),
                                              ctypes.byref(length)), "json schema")
    return _lib.take_string(out, length)
