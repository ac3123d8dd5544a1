"""Compile a parsed selector into nested closures, once; evaluate them per message.

Each node becomes ``f(get) -> value`` where ``get(name)`` answers a property's string or None,
and a value is None (SQL's unknown, Java's null), a bool, a number or a string. The semantics
are RocketMQ 4.9.7's expression classes, null handling included:

- a comparison with a null side is null; ``x = y`` is null when only ``x`` is null but FALSE
  when only ``y`` is (so ``5 <> a`` is TRUE for a missing ``a`` while ``a <> 5`` is null);
- AND is FALSE if either side is FALSE, OR is TRUE if either side is TRUE, else null if a side
  is null; NOT of null is null; the left side is evaluated first and may decide alone;
- IN / NOT IN of a missing property is null; a bare property as a boolean is FALSE when set;
- what Java throws while evaluating (a property that does not parse as the literal's number)
  fails the whole message, as the broker's filter catches it and answers "no match".

A message matches only when the root is TRUE. Common shapes (a property against a literal) get
their own closures; the rest go through ``values.compare``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, Final

from rocketq.filter.ast import (
    BOOL,
    DOUBLE,
    INT,
    LONG,
    NULL,
    STRING,
    And,
    BoolCast,
    Compare,
    Const,
    Equal,
    In,
    Negate,
    Node,
    Not,
    Or,
    Prop,
    jtype,
)
from rocketq.filter.values import compare, double_compare, java_boolean, java_double, java_int, java_long

__all__ = ["Evaluator", "Getter", "compile_node", "required_properties"]

Getter = Callable[[str], "str | None"]
Evaluator = Callable[[Getter], Any]

_OPS: Final[dict[str, Callable[[int, int], bool]]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le,
}
_PARSE: Final[dict[str, Callable[[str], Any]]] = {INT: java_int, LONG: java_long, DOUBLE: java_double}


def compile_node(node: Node) -> Evaluator:
    """The closure computing ``node``'s Java value."""
    if isinstance(node, Const):
        value = node.value
        return lambda get: value
    if isinstance(node, Prop):
        name = node.name
        return lambda get: get(name)
    if isinstance(node, Negate):
        return _negate(node)
    if isinstance(node, Not):
        inner = compile_node(node.operand)

        def not_(get: Getter) -> Any:
            v = inner(get)
            return None if v is None else not v
        return not_
    if isinstance(node, BoolCast):
        inner = compile_node(node.operand)

        def cast(get: Getter) -> Any:
            v = inner(get)
            return None if v is None else (v if isinstance(v, bool) else False)
        return cast
    if isinstance(node, And):
        return _and(compile_node(node.left), compile_node(node.right))
    if isinstance(node, Or):
        return _or(compile_node(node.left), compile_node(node.right))
    if isinstance(node, In):
        return _in(node)
    if isinstance(node, Equal):
        return _equal(node)
    return _compare(node)


def _negate(node: Negate) -> Evaluator:
    inner = compile_node(node.operand)
    numeric = jtype(node) != NULL

    def negate(get: Getter) -> Any:
        v = inner(get)
        return -v if numeric and v is not None else None
    return negate


def _and(left: Evaluator, right: Evaluator) -> Evaluator:
    def and_(get: Getter) -> Any:
        lv = left(get)
        if lv is False:
            return False
        rv = right(get)
        if rv is False:
            return False
        return None if lv is None or rv is None else True
    return and_


def _or(left: Evaluator, right: Evaluator) -> Evaluator:
    def or_(get: Getter) -> Any:
        lv = left(get)
        if lv is True:
            return True
        rv = right(get)
        if rv is True:
            return True
        return None if lv is None or rv is None else False
    return or_


def _in(node: In) -> Evaluator:
    name = node.prop.name
    values = frozenset(node.values)
    negated = node.negated

    def in_(get: Getter) -> Any:
        v = get(name)
        return None if v is None else (v in values) is not negated
    return in_


def _equal(node: Equal) -> Evaluator:
    left, right = node.left, node.right
    lt, rt = jtype(left), jtype(right)
    if isinstance(left, Prop) and isinstance(right, Const):
        return _prop_equals_const(left.name, right)
    lf, rf = compile_node(left), compile_node(right)

    def equal(get: Getter) -> Any:
        lv = lf(get)
        rv = rf(get)
        if lv is None or rv is None:
            if lv is None and rv is None:
                return True
            return None if lv is None else False
        if lt == rt and (lv == rv if lt != DOUBLE else double_compare(lv, rv) == 0):
            return True
        return compare(lt, lv, rt, rv) == 0
    return equal


def _prop_equals_const(name: str, const: Const) -> Evaluator:
    c = const.value
    if const.type == NULL:  # IS NULL
        return lambda get: get(name) is None
    if const.type == STRING:
        def eq_string(get: Getter) -> Any:
            v = get(name)
            return None if v is None else v == c
        return eq_string
    if const.type == BOOL:
        def eq_bool(get: Getter) -> Any:
            v = get(name)
            return None if v is None else java_boolean(v) is c
        return eq_bool
    parse = _PARSE[const.type]
    if const.type == DOUBLE:
        def eq_double(get: Getter) -> Any:
            v = get(name)
            return None if v is None else double_compare(parse(v), c) == 0  # type: ignore[arg-type]
        return eq_double

    def eq_integer(get: Getter) -> Any:
        v = get(name)
        return None if v is None else parse(v) == c
    return eq_integer


def _compare(node: Compare) -> Evaluator:
    left, right = node.left, node.right
    lt, rt = jtype(left), jtype(right)
    op = _OPS[node.op]
    if isinstance(left, Prop) and isinstance(right, Const) and right.type in (INT, LONG):
        name, c, parse = left.name, right.value, _PARSE[right.type]

        def prop_vs_integer(get: Getter) -> Any:
            v = get(name)
            return None if v is None else op(parse(v), c)  # type: ignore[arg-type]
        return prop_vs_integer
    if isinstance(left, Prop) and isinstance(right, Const) and right.type == DOUBLE:
        name, d = left.name, right.value

        def prop_vs_double(get: Getter) -> Any:
            v = get(name)
            return None if v is None else op(double_compare(java_double(v), d), 0)  # type: ignore[arg-type]
        return prop_vs_double
    lf, rf = compile_node(left), compile_node(right)
    both_strings = lt == STRING and rt == STRING

    def compare_(get: Getter) -> Any:
        lv = lf(get)
        if lv is None:
            return None
        rv = rf(get)
        if rv is None:
            return None
        if both_strings:  # Java refuses to order strings unless both read as doubles
            return op(double_compare(java_double(lv), java_double(rv)), 0)
        return op(compare(lt, lv, rt, rv), 0)
    return compare_


def required_properties(node: Node) -> frozenset[str]:
    """Names that must all be set for ``node`` to be TRUE: the pre-filter's test.

    Conservative (a smaller set is always safe): a comparison, IN or boolean cast needs its
    names, AND needs both sides', OR what both sides need, NOT what makes its operand FALSE.
    """
    return _needs(node, True)


def _needs(node: Node, to_be: bool) -> frozenset[str]:
    if isinstance(node, And):
        if to_be:
            return _needs(node.left, True) | _needs(node.right, True)
        return _needs(node.left, False) & _needs(node.right, False)
    if isinstance(node, Or):
        if to_be:
            return _needs(node.left, True) & _needs(node.right, True)
        return _needs(node.left, False) | _needs(node.right, False)
    if isinstance(node, Not):
        return _needs(node.operand, not to_be)
    if isinstance(node, BoolCast):
        return _names(node.operand)  # FALSE or TRUE both need the value to be set
    if isinstance(node, In):
        return frozenset({node.prop.name})
    if isinstance(node, Compare):
        return _names(node.left) | _names(node.right)
    if isinstance(node, Equal):
        # Java: null = x is null; x = null is FALSE; null = null is TRUE. Only a left-hand name is
        # certain to be needed, and only when the right side cannot be null too.
        left, right = node.left, node.right
        if isinstance(right, Const) and right.type != NULL:
            return _names(left)
        if isinstance(right, Const):  # IS NULL: TRUE without the value, FALSE with it
            return frozenset() if to_be else _names(left)
        return frozenset()
    return frozenset()


def _names(node: Node) -> frozenset[str]:
    """Names whose absence makes a value expression null."""
    if isinstance(node, Prop):
        return frozenset({node.name})
    if isinstance(node, Negate):
        return _names(node.operand)
    return frozenset()
