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

    __slots__ = ("_cache", "_fn", "_keys", "_lookups", "expression", "names", "required", "tree")

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
        low byte of its length) is set to \x02, so that every entry, the first included, is found
        as "\x02name\x01"."""
        patched = bytearray(data)
        spans = properties_spans(patched, offsets)
        for p0, _ in spans:
            patched[p0 - 1] = 2
        text = bytes(patched)
        rfind = text.rfind
        find = text.find
        out: list[int] = []
        lookups = self._lookups
        cache = self._cache
        for j, (p0, p1) in enumerate(spans):
            values: list[bytes | None] = []
            for key, klen, required in lookups:
                i = rfind(key, p0 - 1, p1)  # the last entry of the name wins
                if i < 0:
                    if required:
                        break
                    values.append(None)
                    continue
                v0 = i + klen
                v1 = find(b"\x02", v0, p1)
                if v1 < 0:
                    v1 = p1
                values.append(text[v0:v1] if v1 > v0 else _earlier_value(text, key, p0 - 1, i))
            else:
                key_values = tuple(values)
                hit = cache.get(key_values)
                if hit is None:
                    hit = self._evaluate_values(key_values)
                if hit:
                    out.append(j)
                    if len(out) >= limit:
                        break
        return out

    def _evaluate_values(self, values: tuple[bytes | None, ...]) -> bool:
        decoded = {k: v.decode("utf-8", "replace") for k, v in zip(self._keys, values, strict=True)
                   if v is not None}
        hit = self.matches(decoded.get)
        cache = self._cache
        if len(cache) >= _CACHE_SIZE:
            cache.clear()
        cache[values] = hit
        return hit


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
