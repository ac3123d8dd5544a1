"""Message filters by expression (RocketMQ's filter module): SQL92 selectors over message properties.

Sans-I/O: text in, a compiled predicate out. ``compile_sql92(expr)`` parses once (lexer +
recursive descent, `parser.py`) and compiles the tree into closures (`evaluate.py`); the result
answers ``matches(get)`` for any property lookup, ``matches_properties(dict)`` for a decoded
message and ``matches_record(buf)`` for a stored record, reading only the properties the
expression names and skipping the evaluation when one it needs is absent (the pre-filter).
The broker filters pulls with it; the client parses at ``subscribe()`` so that a malformed
expression fails there, with its position (``FilterExpressionError``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Final

from rocketq.codec.properties import needle, value_span
from rocketq.codec.record import properties_span
from rocketq.errors import FilterExpressionError
from rocketq.filter.ast import In, Node, Prop
from rocketq.filter.evaluate import Evaluator, Getter, compile_node, required_properties
from rocketq.filter.parser import parse
from rocketq.filter.values import JavaError

__all__ = [
    "EXPRESSION_SQL92",
    "EXPRESSION_TAG",
    "FilterExpression",
    "FilterExpressionError",
    "compile_sql92",
    "is_tag_type",
    "parse",
]

EXPRESSION_TAG: Final = "TAG"
EXPRESSION_SQL92: Final = "SQL92"


def is_tag_type(expression_type: str | None) -> bool:
    """ExpressionType.isTagType: no type at all means TAG (clients before 4.1 send none)."""
    return not expression_type or expression_type == EXPRESSION_TAG


@dataclass(frozen=True, slots=True)
class FilterExpression:
    """A compiled SQL92 selector. ``names`` are the properties it reads; ``required`` those that
    must all be set for it to match (messages lacking one are refused without evaluating)."""

    expression: str
    tree: Node = field(repr=False)
    names: frozenset[str]
    required: tuple[bytes, ...] = field(repr=False)
    _fn: Evaluator = field(repr=False, compare=False)
    _needles: dict[str, bytes] = field(repr=False, compare=False)

    def evaluate(self, get: Getter) -> object:
        """The root's Java value (True / False / None); raises ``ValueError`` where Java throws."""
        return self._fn(get)

    def matches(self, get: Getter) -> bool:
        """True only when the expression is TRUE; errors and unknown are no match, as in RocketMQ."""
        try:
            return self._fn(get) is True
        except JavaError:
            return False

    def matches_properties(self, properties: Mapping[str, str] | None) -> bool:
        return self.matches((properties or {}).get)

    def matches_record(self, record: bytes | bytearray | memoryview, at: int = 0) -> bool:
        """Match a stored message record by its properties, never decoding the whole record."""
        p0, p1 = properties_span(record, at)
        props = bytes(record[p0:p1])
        for key in self.required:
            if key not in props:
                return False
        needles = self._needles

        def get(name: str) -> str | None:
            key = needles.get(name)
            if key is None:
                key = needle(name).encode()
            span = value_span(props, key)
            return None if span is None else props[span[0]:span[1]].decode("utf-8", "replace")
        return self.matches(get)


@lru_cache(maxsize=1024)
def compile_sql92(expression: str, *, strict: bool = True) -> FilterExpression:
    """Parse and compile once (cached: every pull of a lite-pull consumer carries its expression).

    ``strict=False`` accepts what Java's parser accepts, trailing input ignored (the broker)."""
    if expression is None or not expression.strip():
        raise FilterExpressionError.at(expression or "", 0, "Expression can't be null!")
    tree = parse(expression, strict=strict)
    names = _all_names(tree)
    needles = {n: needle(n).encode() for n in names}
    # A cheap substring test first: the name followed by \x01 must appear somewhere.
    required = tuple(needles[n] for n in sorted(required_properties(tree)))
    return FilterExpression(expression, tree, names, required, compile_node(tree), needles)


def _all_names(node: Node) -> frozenset[str]:
    if isinstance(node, Prop):
        return frozenset({node.name})
    if isinstance(node, In):
        return frozenset({node.prop.name})
    out: frozenset[str] = frozenset()
    for attr in ("operand", "left", "right"):
        child = getattr(node, attr, None)
        if child is not None:
            out |= _all_names(child)
    return out
