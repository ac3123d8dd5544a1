"""Java's value rules for the selector: string-to-number parsing and ComparisonExpression.__compare.

A property value is a string; a literal is an Integer, Long, Double, String or Boolean. When the
two sides of a comparison differ in type, RocketMQ converts the string side with
``Integer.valueOf`` / ``Long.valueOf`` / ``Double.valueOf`` / ``Boolean.valueOf`` (its parser
always sets convertStringExpressions) and widens Integer -> Long -> Double. A string that does not
parse as the other side's number raises NumberFormatException, which the broker's filter turns
into "no match" for the whole message; here that is ``JavaError``. Mismatches Java answers with
-1 (Boolean against a number) are answered the same way.
"""

from __future__ import annotations

import math
import re
from typing import Final

from rocketq.filter.ast import BOOL, DOUBLE, INT, LONG, STRING

__all__ = ["JavaError", "compare", "java_boolean", "java_double", "java_int", "java_long"]

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1

# Integer.parseInt: an optional sign then decimal digits (Character.digit accepts any Unicode
# decimal digit, as \d does for str); no spaces, no underscores.
_INTEGER: Final = re.compile(r"[+-]?\d+")
# Double.valueOf (FloatingDecimal.readJavaFormatString): trimmed of chars <= ' ', an optional
# sign, NaN / Infinity, or ASCII decimal digits with an optional exponent and f/F/d/D suffix.
_DECIMAL_FLOAT: Final = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)")
_HEX_FLOAT: Final = re.compile(
    r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?")


class JavaError(ValueError):
    """What Java would throw while evaluating (NumberFormatException, ClassCastException)."""


def java_int(s: str) -> int:
    if _INTEGER.fullmatch(s) is None:
        raise JavaError(f'For input string: "{s}"')
    v = int(s)
    if not INT_MIN <= v <= INT_MAX:
        raise JavaError(f'For input string: "{s}" (out of int range)')
    return v


def java_long(s: str) -> int:
    if _INTEGER.fullmatch(s) is None:
        raise JavaError(f'For input string: "{s}"')
    v = int(s)
    if not LONG_MIN <= v <= LONG_MAX:
        raise JavaError(f'For input string: "{s}" (out of long range)')
    return v


def java_double(s: str) -> float:
    t = s.strip("".join(map(chr, range(33))))
    if _DECIMAL_FLOAT.fullmatch(t) is not None:
        return float(t.rstrip("fFdD"))
    m = _HEX_FLOAT.fullmatch(t)
    if m is not None:
        v = float.fromhex(m.group(2))
        return -v if m.group(1) == "-" else v
    raise JavaError(f'For input string: "{s}"' if t else "empty String")


def java_boolean(s: str) -> bool:
    return s.lower() == "true"


def double_compare(a: float, b: float) -> int:
    """Double.compareTo: NaN above everything and equal to itself, -0.0 below 0.0."""
    if a < b:
        return -1
    if a > b:
        return 1
    an, bn = math.isnan(a), math.isnan(b)
    if an or bn:
        return int(an) - int(bn)
    sa, sb = math.copysign(1.0, a), math.copysign(1.0, b)
    return (sa > sb) - (sa < sb)


def _cmp(a: object, b: object) -> int:
    return int((a > b) - (a < b))  # type: ignore[operator]  # both of one comparable type


_TO_NUMBER: Final = {INT: java_int, LONG: java_long, DOUBLE: java_double}


def compare(lt: str, lv: object, rt: str, rv: object) -> int:
    """ComparisonExpression.__compare(lv, rv, true) for values of Java types ``lt`` and ``rt``."""
    if lt != rt:
        if lt == BOOL:
            if rt == STRING:  # Java casts the Boolean itself to String here
                raise JavaError("java.lang.Boolean cannot be cast to java.lang.String")
            return -1
        if lt in (INT, LONG):
            if rt in (INT, LONG):
                pass
            elif rt == DOUBLE:
                lv, lt = float(lv), DOUBLE  # type: ignore[arg-type]
            elif rt == STRING:
                rv = _TO_NUMBER[lt](rv)  # type: ignore[arg-type]
            else:
                return -1
        elif lt == DOUBLE:
            if rt in (INT, LONG):
                rv = float(rv)  # type: ignore[arg-type]
            elif rt == STRING:
                rv = java_double(rv)  # type: ignore[arg-type]
            else:
                return -1
        elif lt == STRING:
            if rt == BOOL:
                return _cmp(java_boolean(lv), rv)  # type: ignore[arg-type]
            if rt in _TO_NUMBER:
                lv, lt = _TO_NUMBER[rt](lv), rt  # type: ignore[arg-type]
            else:
                return -1
        else:
            return -1
    if lt == DOUBLE:
        return double_compare(lv, rv)  # type: ignore[arg-type]
    if lt == STRING:
        return _java_string_compare(lv, rv)  # type: ignore[arg-type]
    return _cmp(lv, rv)


def _java_string_compare(a: str, b: str) -> int:
    """String.compareTo compares UTF-16 code units; code points agree unless astral characters
    meet characters above the surrogate range."""
    if a.isascii() and b.isascii():
        return _cmp(a, b)
    return _cmp(a.encode("utf-16-be"), b.encode("utf-16-be"))
