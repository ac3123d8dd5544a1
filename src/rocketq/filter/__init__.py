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

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Final

from rocketq.codec.properties import needle, value_span
from rocketq.codec.record import properties_spans
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
_MAX_COPY: Final = 1 << 20  # a batch of records spread wider than this is searched in place
# Properties texts up to this long are matched with the values pattern (its look-aheads backtrack
# from the end, so its cost grows with the text); longer ones are searched name by name.
_PATTERN_SPAN: Final = 1024
_CACHE_SIZE: Final = 4096  # results remembered per expression (by the values of the names it reads)


def is_tag_type(expression_type: str | None) -> bool:
    """ExpressionType.isTagType: no type at all means TAG (clients before 4.1 send none)."""
    return not expression_type or expression_type == EXPRESSION_TAG


class FilterExpression:
    """A compiled SQL92 selector. ``names`` are the properties it reads; ``required`` those that
    must all be set for it to match.

    Matching a stored record costs one regular-expression scan of its properties for the names
    the expression reads (nothing else is decoded), then a look-up: the result is remembered per
    tuple of those values (bounded), because a filter sees the same few values again and again
    (a region, a tag, an amount), while evaluating means parsing numbers the way Java does. A
    record lacking a required name is refused before any of that: the pre-filter.
    """

    __slots__ = ("_cache", "_fn", "_keys", "_lookups", "_values", "expression", "names", "required", "tree")

    def __init__(self, expression: str, tree: Node) -> None:
        self.expression = expression
        self.tree = tree
        self.names = _all_names(tree)
        self.required = required_properties(tree)
        self._fn: Evaluator = compile_node(tree)
        self._keys = tuple(sorted(self.names))
        # "\x02name\x01" found in "\x02" + properties starts an entry of that name, wherever it is;
        # a required name that is absent ends the match at once (the pre-filter).
        self._lookups = tuple((b"\x02" + needle(n).encode(), len(needle(n)) + 1, n in self.required)
                              for n in self._keys)
        self._values = _values_pattern(self._keys, self.required).match
        self._cache: dict[tuple[bytes | None, ...], bool] = {}

    def __repr__(self) -> str:
        return f"FilterExpression({self.expression!r})"

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
        """Match the stored message record at ``record[at:]`` by its properties."""
        return bool(self.select_records(record, (at,), 1))

    def select_records(self, buf: bytes | bytearray | memoryview, offsets: Sequence[int],
                       limit: int) -> list[int]:
        """Which of the stored records at ``offsets`` in ``buf`` match: their positions in
        ``offsets``, in order, at most ``limit``. Only the properties the expression names are read.

        The batch is copied once (cheaper than slicing a mapped view per record), or record by
        record when it is spread wide."""
        if len(buf) <= _MAX_COPY:
            return self._select(buf, offsets, limit)
        out: list[int] = []
        for j, at in enumerate(offsets):
            size = int.from_bytes(buf[at:at + 4], "big")
            if self._select(bytes(buf[at:at + size]), (0,), 1):
                out.append(j)
                if len(out) >= limit:
                    break
        return out

    def _select(self, data: bytes | bytearray | memoryview, offsets: Sequence[int], limit: int) -> list[int]:
        """The hot loop of a filtered pull: one call per batch of records, kept inline.

        Works on a private copy of the batch in which the byte before each properties text (the
        low byte of its length) is set to \x02, so that every entry, the first included, starts
        with "\x02name\x01". One match of the expression's values pattern then answers, in C,
        the tuple of values a record's properties give the names (or no match when a required one
        is absent); only a long properties text is searched name by name instead."""
        patched = bytearray(data)
        spans = properties_spans(patched, offsets)
        for p0, _ in spans:
            patched[p0 - 1] = 2
        text = bytes(patched)
        values_of = self._values
        search = self._values_by_search
        found = [values_of(text, p0 - 1, p1) if p1 - p0 <= _PATTERN_SPAN else search(text, p0 - 1, p1)
                 for p0, p1 in spans]
        cache = self._cache
        out: list[int] = []
        for j, m in enumerate(found):
            if m is None:
                continue
            values = m.groups()
            hit = cache.get(values)
            if hit is None:
                hit = self._evaluate_values(values)
            if hit:
                out.append(j)
                if len(out) >= limit:
                    break
        return out

    def _values_by_search(self, text: bytes, start: int, end: int) -> _Found | None:
        """What the values pattern answers, found with rfind: linear in the text whatever its size."""
        values: list[bytes | None] = []
        for key, klen, required in self._lookups:
            i = text.rfind(key, start, end)  # the last entry of the name wins
            if i < 0:
                if required:
                    return None
                values.append(None)
                continue
            v0 = i + klen
            v1 = text.find(b"\x02", v0, end)
            if v1 < 0:
                v1 = end
            value = text[v0:v1] if v1 > v0 else _earlier_value(text, key, start, i)
            if value is None and required:
                return None
            values.append(value)
        return _Found(values)

    def _evaluate_values(self, values: tuple[bytes | None, ...]) -> bool:
        decoded = {k: v.decode("utf-8", "replace") for k, v in zip(self._keys, values, strict=True)
                   if v is not None}
        hit = self.matches(decoded.get)
        cache = self._cache
        if len(cache) >= _CACHE_SIZE:
            cache.clear()
        cache[values] = hit
        return hit


class _Found(tuple[bytes | None, ...]):
    """Values found by search, answering ``groups()`` as a match of the values pattern does."""

    __slots__ = ()

    def groups(self) -> tuple[bytes | None, ...]:
        return tuple(self)


def _values_pattern(keys: Sequence[str], required: frozenset[str]) -> re.Pattern[bytes]:
    """One look-ahead per name, in ``keys`` order, each capturing the value of the name's last
    entry with a non-empty value (the greedy ``.*`` backtracks from the end, and ``[^\x02]+``
    skips an empty one as ``decode_properties`` does); a required name's look-ahead must match,
    the others may capture nothing (None)."""
    parts = []
    for name in keys:
        look = b"(?=.*\x02" + re.escape(needle(name).encode()) + b"([^\x02]+))"
        parts.append(look if name in required else b"(?:" + look + b")?")
    return re.compile(b"".join(parts), re.DOTALL)


def _earlier_value(text: bytes, key: bytes, start: int, end: int) -> bytes | None:
    """The last entry of the name has an empty value, which does not count: an earlier one may
    (``text[start]`` is the \x02 put before the properties)."""
    span = value_span(text, key[1:], start + 1, end)
    return None if span is None else text[span[0]:span[1]]


@lru_cache(maxsize=1024)
def compile_sql92(expression: str, *, strict: bool = True) -> FilterExpression:
    """Parse and compile once (cached: every pull of a lite-pull consumer carries its expression).

    ``strict=False`` accepts what Java's parser accepts, trailing input ignored (the broker)."""
    if expression is None or not expression.strip():
        raise FilterExpressionError.at(expression or "", 0, "Expression can't be null!")
    return FilterExpression(expression, parse(expression, strict=strict))


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
