"""The parsed form of a SQL92 selector: one frozen node class per RocketMQ expression class.

Every node knows its Java type statically (``jtype``), which is what makes compiling to closures
cheap: a property is always a String (or null) because message properties are strings, a literal
has the type its token gives (Integer when it fits in 32 bits, else Long; Double; String;
Boolean; null), a negation has its operand's type, and everything else is Boolean.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

__all__ = [
    "BOOL", "DOUBLE", "INT", "LONG", "NULL", "STRING",
    "And", "BoolCast", "Compare", "Const", "Equal", "In", "Negate", "Node", "Not", "Or", "Prop",
    "is_boolean", "jtype",
]

JType = Literal["int", "long", "double", "string", "bool", "null"]
INT: Final = "int"
LONG: Final = "long"
DOUBLE: Final = "double"
STRING: Final = "string"
BOOL: Final = "bool"
NULL: Final = "null"
NUMBERS: Final = frozenset({INT, LONG, DOUBLE})


@dataclass(frozen=True, slots=True)
class Const:
    """A literal; ``TRUE``/``FALSE``/``NULL`` are BooleanConstantExpressions in Java."""

    type: JType
    value: int | float | str | bool | None


@dataclass(frozen=True, slots=True)
class Prop:
    name: str


@dataclass(frozen=True, slots=True)
class Negate:
    operand: Node


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node


@dataclass(frozen=True, slots=True)
class BoolCast:
    """A bare property used where a boolean is expected: FALSE for any present string value."""

    operand: Node


@dataclass(frozen=True, slots=True)
class And:
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Or:
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Equal:
    """doCreateEqual: ``=`` and ``IS NULL`` (``<>`` and ``IS NOT NULL`` are Not(Equal))."""

    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Compare:
    """``>``, ``>=``, ``<``, ``<=`` (BETWEEN is an And of two of these)."""

    op: Literal[">", ">=", "<", "<="]
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class In:
    prop: Prop
    values: tuple[str, ...]
    negated: bool


Node = Const | Prop | Negate | Not | BoolCast | And | Or | Equal | Compare | In


def jtype(node: Node) -> JType:
    """The Java class the node evaluates to (when not null)."""
    if isinstance(node, Const):
        return node.type
    if isinstance(node, Prop):
        return STRING
    if isinstance(node, Negate):
        inner = jtype(node.operand)
        return inner if inner in NUMBERS else NULL  # negating anything else yields null
    return BOOL


def is_boolean(node: Node) -> bool:
    """Java's ``instanceof BooleanExpression``: boolean literals (NULL included) and predicates."""
    if isinstance(node, Const):
        return node.type in (BOOL, NULL)
    return not isinstance(node, (Prop, Negate))
