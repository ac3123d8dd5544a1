"""Tokens of RocketMQ's SQL92 selector language (filter/parser/SelectorParser.jj, 4.9.7).

Keywords (NOT AND OR BETWEEN IN TRUE FALSE NULL IS) and names are case-insensitive where the
grammar says so; a name is ``[a-zA-Z_$][a-zA-Z0-9_$]*`` and keeps its spelling. Numbers are a
DECIMAL_LITERAL (``0`` or ``[1-9][0-9]*`` with an optional ``L``) or a FLOATING_POINT_LITERAL;
strings are single-quoted with ``''`` for a quote. Whitespace, ``-- line`` and ``/* block */``
comments are skipped. Like JavaCC's token manager, the longest match wins and a keyword beats a
name of the same length, so ``NOTE`` is a name and ``007`` is three numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from rocketq.errors import FilterExpressionError

__all__ = ["KEYWORDS", "Token", "tokenize"]

KEYWORDS: Final = frozenset({"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS"})

# Alternatives in the order a longest match is decided: a float before a decimal ("5.5", "5E3").
_TOKEN_RE: Final = re.compile(
    r"""
    (?P<ws>[ \t\n\r\f]+)
  | (?P<comment>--[^\n\r]*(?:\r\n|\n|\r|$) | /\*[^*]*\*+(?:[^*/][^*]*\*+)*/)
  | (?P<float>(?:[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)? | \.[0-9]+(?:[eE][+-]?[0-9]+)? | [0-9]+[eE][+-]?[0-9]+))
  | (?P<decimal>0|[1-9][0-9]*[lL]?)
  | (?P<string>'(?:''|[^'])*')
  | (?P<id>[a-zA-Z_$][a-zA-Z0-9_$]*)
  | (?P<op><>|<=|>=|[=<>(),+-])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class Token:
    """``kind`` is a keyword (upper case), ``ID``, ``DECIMAL``, ``FLOAT``, ``STRING``, an operator's
    own text, or ``EOF``; ``text`` is the source text; ``pos`` its 0-based offset."""

    kind: str
    text: str
    pos: int


def tokenize(source: str) -> list[Token]:
    """Every token of ``source``, ending with EOF; ``FilterExpressionError`` at the first character
    that starts no token (an unterminated string or comment included)."""
    out: list[Token] = []
    pos, n = 0, len(source)
    match = _TOKEN_RE.match
    while pos < n:
        m = match(source, pos)
        if m is None:
            if source[pos] == "'":
                what = "unterminated string"
            elif source.startswith("/*", pos):
                what = "unterminated comment"
            else:
                what = f"unexpected character {source[pos]!r}"
            raise FilterExpressionError.at(source, pos, f"Lexical error: {what}")
        kind = m.lastgroup
        text = m.group()
        if kind == "id":
            upper = text.upper()
            out.append(Token(upper if upper in KEYWORDS else "ID", text, pos))
        elif kind == "op":
            out.append(Token(text, text, pos))
        elif kind in ("float", "decimal", "string"):
            out.append(Token(kind.upper(), text, pos))
        pos = m.end()
    out.append(Token("EOF", "", n))
    return out
