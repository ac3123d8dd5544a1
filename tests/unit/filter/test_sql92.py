"""RocketMQ 4.9.7's SQL92 selector semantics, expression by expression.

Each row is (expression, properties, expected Java value of the root): True matches, False and
None (unknown) do not, and "error" is what Java throws while evaluating (also no match). The
expected values follow the Java classes (ComparisonExpression, LogicExpression, UnaryExpression)
case by case; the comments say why where it is not obvious.
"""

from __future__ import annotations

import pytest

from rocketq.codec.message import MessageExt, encode_message
from rocketq.errors import FilterExpressionError, InvalidArgument, SubscriptionParseFailed
from rocketq.filter import compile_sql92
from rocketq.filter.values import JavaError

ERROR = "error"

EU_ORDER = {"region": "eu", "amount": "150", "TAGS": "TagA"}

TABLE: list[tuple[str, dict[str, str], object]] = [
    # comparisons against numbers: the property string is read as the literal's type
    ("a > 5", {"a": "10"}, True),
    ("a > 5", {"a": "5"}, False),
    ("a >= 5", {"a": "5"}, True),
    ("a < 5", {"a": "-3"}, True),
    ("a <= 5", {"a": "+5"}, True),  # Integer.valueOf accepts a leading +
    ("a = 5", {"a": "5"}, True),
    ("a = 5", {"a": "05"}, True),
    ("a = 5", {"a": " 5"}, ERROR),  # Integer.valueOf does not trim
    ("a = 5", {"a": "5.0"}, ERROR),  # not an Integer: NumberFormatException, no match
    ("a > 5", {"a": "abc"}, ERROR),
    ("a > 5", {"a": "3000000000"}, ERROR),  # an int literal reads the value as Integer
    ("a > 2147483648", {"a": "3000000000"}, True),  # a long literal reads it as Long
    ("a = 5.0", {"a": "5"}, True),  # Double.valueOf
    ("a > 1.5", {"a": " 2e0 "}, True),  # Double.valueOf trims and takes exponents
    ("a < 1.5", {"a": "1.4f"}, True),
    ("a > -1", {"a": "0"}, True),
    ("a > - -1", {"a": "0"}, False),
    ("a <> 5", {"a": "6"}, True),
    ("a <> 5", {"a": "5"}, False),
    # BETWEEN / NOT BETWEEN
    ("a BETWEEN 6 AND 9", {"a": "7"}, True),
    ("a BETWEEN 6 AND 9", {"a": "9"}, True),
    ("a BETWEEN 6 AND 9", {"a": "10"}, False),
    ("a NOT BETWEEN 6 AND 9", {"a": "10"}, True),
    ("a NOT BETWEEN 6 AND 9", {"a": "7"}, False),
    ("a BETWEEN 1.5 AND 2", {"a": "1.75"}, ERROR),  # the bound 2 is an Integer: "1.75" fails it
    ("a BETWEEN 1.5 AND 2.0", {"a": "1.75"}, True),
    # strings, IN, TAGS
    ("region = 'eu'", EU_ORDER, True),
    ("region = 'EU'", EU_ORDER, False),
    ("region = 'eu' AND amount > 100", EU_ORDER, True),
    ("region = 'eu' AND amount > 200", EU_ORDER, False),
    ("region IN ('us', 'eu')", EU_ORDER, True),
    ("region NOT IN ('us', 'eu')", EU_ORDER, False),
    ("region IN ('a','b','c','d','e','eu')", EU_ORDER, True),
    ("TAGS = 'TagA'", EU_ORDER, True),
    ("TAGS IN ('TagB', 'TagC')", EU_ORDER, False),
    ("s = 'it''s'", {"s": "it's"}, True),
    ("a = b", {"a": "x", "b": "x"}, True),
    ("a > b", {"a": "2", "b": "10"}, False),  # two strings are ordered as doubles
    ("a > b", {"a": "x", "b": "1"}, ERROR),
    # booleans
    ("flag = TRUE", {"flag": "TRUE"}, True),  # Boolean.valueOf ignores case
    ("flag = TRUE", {"flag": "yes"}, False),
    ("flag = FALSE", {"flag": "false"}, True),
    ("TRUE", {}, True),
    ("FALSE OR TRUE", {}, True),
    ("a", {"a": "true"}, False),  # a property used as a boolean is FALSE when set
    ("NOT a", {"a": "x"}, True),
    ("NOT a = 1", {"a": "x"}, False),  # (NOT a) = 1: Boolean vs Integer compares as -1
    ("TRUE = a", {"a": "true"}, ERROR),  # Java casts the Boolean to String: ClassCastException
    # NULL semantics
    ("a IS NULL", {}, True),
    ("a IS NULL", {"a": "1"}, False),
    ("a IS NOT NULL", {"a": "1"}, True),
    ("a IS NOT NULL", {}, False),
    ("a > 5", {}, None),
    ("a = 'x'", {}, None),
    ("a <> 'x'", {}, None),  # NOT of unknown is unknown
    ("'x' <> a", {}, True),  # x = null is FALSE when only the right side is null
    ("a IN ('x')", {}, None),
    ("a NOT IN ('x')", {}, None),
    ("a BETWEEN 1 AND 3", {}, None),
    ("NOT (a > 5)", {}, None),
    ("a > 5 AND b = 1", {"b": "2"}, False),  # unknown AND FALSE is FALSE
    ("a > 5 AND b = 1", {"b": "1"}, None),
    ("a > 5 OR b = 1", {"b": "1"}, True),  # unknown OR TRUE is TRUE
    ("a > 5 OR b = 1", {"b": "2"}, None),
    ("a IS NULL OR a > 5", {}, True),
    ("NOT a", {}, None),
    ("a = -NULL", {}, True),  # negating NULL is null, and null = null is TRUE
    # evaluation order: an exception on the left fails the message even if the right would match
    ("a = 5 OR b = 1", {"a": "abc", "b": "1"}, ERROR),
    ("b = 1 OR a = 5", {"a": "abc", "b": "1"}, True),
    ("b = 2 AND a = 5", {"a": "abc", "b": "1"}, False),
    # syntax that is easy to get wrong
    ("(a > 1 OR b > 1) AND c = 'z'", {"b": "2", "c": "z"}, True),
    ("a > 1 OR b > 1 AND c = 'z'", {"a": "2"}, True),  # AND binds tighter than OR
    ("A = 1", {"a": "1"}, None),  # names are case-sensitive
    ("a = 1 -- trailing comment", {"a": "1"}, True),
    ("a /* inline */ = 1", {"a": "1"}, True),
    ("a = 1l", {"a": "1"}, True),
    ("a = 3000000000L", {"a": "3000000000"}, True),
    ("a is not null and a in ('1')", {"a": "1"}, True),  # keywords ignore case
]


@pytest.mark.parametrize(("expression", "properties", "expected"), TABLE,
                         ids=[f"{i}:{row[0]}" for i, row in enumerate(TABLE)])
def test_table(expression: str, properties: dict[str, str], expected: object) -> None:
    f = compile_sql92(expression)
    if expected == ERROR:
        with pytest.raises(JavaError):
            f.evaluate(properties.get)
    else:
        assert f.evaluate(properties.get) is expected
    assert f.matches_properties(properties) is (expected is True)


def test_table_is_big_enough() -> None:
    assert len({row[0] for row in TABLE}) >= 40


@pytest.mark.parametrize(("expression", "position", "fragment"), [
    ("a = ", 4, "end of input"),
    ("a > 'x'", 4, "cannot be compared"),
    ("a = NULL", 4, "IS NULL"),
    ("a BETWEEN 9 AND 6", 10, "must less than or equal"),
    ("a BETWEEN NULL AND 6", 10, "can not be null"),
    ("a = 1 b", 6, '"b"'),
    ("a = 1 AND", 9, "end of input"),
    ("0.0 < a", 0, "less than"),
    ("5", 0, "boolean"),
    ("a ! = 1", 2, "'!'"),
    ("(a = 1", 6, "end of input"),
    ("a = 'abc", 4, "unterminated string"),
    ("a IN ()", 6, "string literal"),
    ("a IN (1)", 6, "string literal"),
    ("1 IN ('a')", 0, "property"),
    ("(a > 1) > 2", 0, "cannot be compared"),
    ("TRUE = 'x'", 0, "cannot be compared with"),
    ("a = 99999999999999999999", 4, "64-bit"),
    ("a = 1 AND\n  b >> 2", 15, "line 2, column 6"),
    ("", 0, "null"),
])
def test_parse_errors_say_where(expression: str, position: int, fragment: str) -> None:
    with pytest.raises(FilterExpressionError) as info:
        compile_sql92(expression)
    assert info.value.position == position
    assert fragment in str(info.value)
    # one error, caught the way callers already catch a bad subscription
    assert isinstance(info.value, SubscriptionParseFailed)
    assert isinstance(info.value, InvalidArgument)


def test_lenient_mode_ignores_trailing_input_as_java_does() -> None:
    f = compile_sql92("a = 1 b = 2", strict=False)
    assert f.matches_properties({"a": "1"})
    with pytest.raises(FilterExpressionError):
        compile_sql92("a = 1 b = 2")


def test_between_bounds_are_only_checked_for_literals() -> None:
    # Java checks the order of two literal bounds only; a negated literal is not one
    f = compile_sql92("a BETWEEN -1 AND -5")
    assert not f.matches_properties({"a": "-3"})


def _record(properties: dict[str, str], topic: str = "T") -> bytes:
    msg = MessageExt(topic=topic, body=b"payload \x01\x02 TAGS\x01x", properties=properties,
                     born_host=("127.0.0.1", 1234), store_host=("127.0.0.1", 10911))
    return encode_message(msg)


@pytest.mark.parametrize("topic", ["T", "t" * 200])  # a V1 and a V2 (2-byte topic length) record
def test_matches_record_reads_only_the_properties(topic: str) -> None:
    f = compile_sql92("region = 'eu' AND amount > 100")
    assert f.matches_record(_record({"region": "eu", "amount": "150"}, topic))
    assert not f.matches_record(_record({"region": "eu", "amount": "50"}, topic))
    # the body holds look-alike bytes; only the properties count
    assert not f.matches_record(_record({"amount": "150"}, topic))
    pad = b"\0" * 7
    assert f.matches_record(pad + _record({"region": "eu", "amount": "101"}, topic), len(pad))


def test_required_properties_prefilter() -> None:
    assert compile_sql92("a > 1 AND (b = 'x' OR b = 'y')").required == {"a", "b"}
    assert compile_sql92("a > 1 OR b = 'x'").required == set()
    assert compile_sql92("NOT (a IS NULL)").required == {"a"}
    assert compile_sql92("a IS NULL").required == set()
    assert compile_sql92("'x' <> a").required == set()


@pytest.mark.parametrize("gap", [0, 1 << 20], ids=["compact", "spread"])
def test_select_records_in_a_mapped_view(gap: int) -> None:
    """The store hands a view of a segment and the offsets of the candidates in it."""
    f = compile_sql92("a IS NULL OR a > 1")
    records = [_record({"a": "5"}), _record({"a": "1"}), _record({"a": ""}), _record({"b": "x"}),
               _record({"a": "2"})]
    buf, offsets = bytearray(), []
    for r in records:
        offsets.append(len(buf))
        buf += r + b"\0" * gap
    view = memoryview(bytes(buf))
    # an empty value counts as no value (RocketMQ's rule), so a = '' is NULL
    assert f.select_records(view, offsets, 10) == [0, 2, 3, 4]
    assert f.select_records(view, offsets, 2) == [0, 2]
    assert f.select_records(bytes(buf), offsets[1:], 1) == [1]


@pytest.mark.parametrize("pad", [0, 2000], ids=["pattern", "long-properties-search"])
def test_stored_values_follow_decode_properties_rules(pad: int) -> None:
    """Both ways of reading values from a stored record (one pattern match, or a search per name
    for a long properties text) give what decode_properties gives: the last non-empty entry of a
    name, whole names only, None for an optional name that is absent."""
    def doctored(props: dict[str, str], old: bytes, new: bytes) -> bytes:
        record = _record({**props, "zpad": "p" * pad})
        assert len(old) == len(new) and record.count(old) == 1
        return record.replace(old, new)

    f = compile_sql92("a = '2' AND (xa IS NULL OR xa = 'q')")
    assert f.matches_record(_record({"a": "2", "zpad": "p" * pad}))
    # "b" renamed to "a": two entries of a, the last one wins
    assert f.matches_record(doctored({"a": "1", "b": "2"}, b"\x02b\x012", b"\x02a\x012"))
    assert not f.matches_record(doctored({"a": "2", "b": "1"}, b"\x02b\x011", b"\x02a\x011"))
    # the last entry of a is empty: it does not count and the earlier one answers
    record = doctored({"a": "2", "c": ""}, b"\x02c\x01\x02", b"\x02a\x01\x02")
    assert f.matches_record(record)
    # "xa" is another name; its value q keeps the optional branch TRUE, r makes it FALSE
    assert f.matches_record(_record({"xa": "q", "a": "2", "zpad": "p" * pad}))
    assert not f.matches_record(_record({"xa": "r", "a": "2", "zpad": "p" * pad}))
    assert not f.matches_record(_record({"xa": "q", "zpad": "p" * pad}))
    # "$" is a regular-expression character and a name character
    g = compile_sql92("$a = 'x'")
    assert g.matches_record(_record({"$a": "x", "zpad": "p" * pad}))
    assert not g.matches_record(_record({"a": "x", "zpad": "p" * pad}))
