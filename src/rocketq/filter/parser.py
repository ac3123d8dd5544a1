"""A recursive-descent parser for RocketMQ 4.9.7's SQL92 selector grammar (SelectorParser.jj).

The grammar, loosest binding first::

    selector   := or
    or         := and ( OR and )*
    and        := equality ( AND equality )*
    equality   := comparison ( "=" comparison | "<>" comparison | IS NULL | IS NOT NULL )*
    comparison := unary ( (">"|">="|"<"|"<=") unary | [NOT] BETWEEN unary AND unary
                          | [NOT] IN "(" string ("," string)* ")" )*
    unary      := "+" unary | "-" unary | NOT unary | primary
    primary    := literal | name | "(" or ")"

``NOT`` binds tighter than a comparison, exactly as in Java: ``NOT a = 1`` is ``(NOT a) = 1``.
The checks Java's ComparisonExpression factories make while parsing are made here too, and fail
the parse the same way: ``= NULL`` (use IS NULL), ``>`` against a string or boolean literal or a
predicate, IN after anything but a name, BETWEEN with a NULL bound or bounds out of order, a
float literal of 0 or out of range, an integer beyond 64 bits, and a non-boolean where a boolean
is needed (``WHERE 5``; a bare name is a boolean cast).

Java's parser stops after the first complete expression and ignores what follows (``a = 1 b``
selects ``a = 1``). ``strict=True`` (what clients use) refuses trailing input instead; the broker
parses with ``strict=False`` so that an expression a Java broker accepts is accepted here.
"""

from __future__ import annotations

from rocketq.errors import FilterExpressionError
from rocketq.filter.ast import (
    BOOL,
    DOUBLE,
    INT,
    LONG,
    NULL,
    NUMBERS,
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
    is_boolean,
)
from rocketq.filter.lexer import Token, tokenize
from rocketq.filter.values import compare

__all__ = ["parse"]

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MAX = 2**63 - 1
DOUBLE_MAX = 1.7976931348623157e308
DOUBLE_MIN = 5e-324  # Java's Double.MIN_VALUE: the smallest positive double


def parse(expression: str, *, strict: bool = True) -> Node:
    """The root node of ``expression``; ``FilterExpressionError`` with the position otherwise."""
    return _Parser(expression, strict).selector()


class _Parser:
    def __init__(self, source: str, strict: bool) -> None:
        self.src = source
        self.toks = tokenize(source)
        self.i = 0
        self.strict = strict

    # -- token helpers -------------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> Token:
        return self.toks[min(self.i + ahead, len(self.toks) - 1)]

    def take(self) -> Token:
        tok = self.toks[self.i]
        if tok.kind != "EOF":
            self.i += 1
        return tok

    def expect(self, kind: str, what: str) -> Token:
        tok = self.peek()
        if tok.kind != kind:
            raise self.unexpected(tok, what)
        return self.take()

    def unexpected(self, tok: Token, what: str) -> FilterExpressionError:
        seen = "end of input" if tok.kind == "EOF" else f'"{tok.text}"'
        return FilterExpressionError.at(self.src, tok.pos, f"Encountered {seen}, expected {what}")

    def fail(self, tok: Token, message: str) -> FilterExpressionError:
        return FilterExpressionError.at(self.src, tok.pos, message)

    def boolean(self, node: Node, at: Token) -> Node:
        """asBooleanExpression."""
        if is_boolean(node):
            return node
        if isinstance(node, Prop):
            return BoolCast(node)
        raise self.fail(at, "Expression will not result in a boolean value")

    # -- grammar -------------------------------------------------------------------------------
    def selector(self) -> Node:
        start = self.peek()
        node = self.boolean(self.or_(), start)
        if self.strict and self.peek().kind != "EOF":
            raise self.unexpected(self.peek(), "AND, OR or the end of the expression")
        return node

    def or_(self) -> Node:
        at = self.peek()
        left = self.and_()
        while self.peek().kind == "OR":
            self.take()
            rat = self.peek()
            right = self.and_()
            left = Or(self.boolean(left, at), self.boolean(right, rat))
        return left

    def and_(self) -> Node:
        at = self.peek()
        left = self.equality()
        while self.peek().kind == "AND":
            self.take()
            rat = self.peek()
            right = self.equality()
            left = And(self.boolean(left, at), self.boolean(right, rat))
        return left

    def equality(self) -> Node:
        at = self.peek()
        left = self.comparison()
        while True:
            tok = self.peek()
            if tok.kind in ("=", "<>"):
                self.take()
                rat = self.peek()
                right = self.comparison()
                self.check_equal_operand(left, at)
                self.check_equal_operand(right, rat)
                if isinstance(left, Const) and isinstance(right, Const) and is_boolean(left) \
                        and not is_boolean(right):
                    raise self.fail(at, f"'{_show(left)}' cannot be compared with '{_show(right)}'")
                eq = Equal(left, right)
                left = eq if tok.kind == "=" else Not(eq)
            elif tok.kind == "IS" and self.peek(1).kind == "NULL":
                self.take()
                self.take()
                left = Equal(left, Const(NULL, None))
            elif tok.kind == "IS":
                self.take()
                self.expect("NOT", "NULL or NOT NULL after IS")
                self.expect("NULL", "NULL after IS NOT")
                left = Not(Equal(left, Const(NULL, None)))
            else:
                return left

    def comparison(self) -> Node:
        at = self.peek()
        left = self.unary()
        while True:
            tok = self.peek()
            kind = tok.kind
            if kind in (">", ">=", "<", "<="):
                self.take()
                rat = self.peek()
                right = self.unary()
                left = self.compare(kind, left, at, right, rat)
            elif kind == "BETWEEN" or (kind == "NOT" and self.peek(1).kind == "BETWEEN"):
                negated = kind == "NOT"
                if negated:
                    self.take()
                self.take()
                lat = self.peek()
                low = self.unary()
                self.expect("AND", "AND between the bounds of BETWEEN")
                hat = self.peek()
                high = self.unary()
                if negated:
                    left = Or(self.compare("<", left, at, low, lat), self.compare(">", left, at, high, hat))
                else:
                    self.check_between(low, high, lat)
                    left = And(self.compare(">=", left, at, low, lat),
                               self.compare("<=", left, at, high, hat))
            elif kind == "IN" or (kind == "NOT" and self.peek(1).kind == "IN"):
                negated = kind == "NOT"
                if negated:
                    self.take()
                self.take()
                self.expect("(", "( after IN")
                values = [self.string()]
                while self.peek().kind == ",":
                    self.take()
                    values.append(self.string())
                self.expect(")", ", or ) in the IN list")
                if not isinstance(left, Prop):
                    raise self.fail(at, f"Expected a property for In expression, got: {_show(left)}")
                left = In(left, tuple(values), negated)
            else:
                return left

    def unary(self) -> Node:
        tok = self.peek()
        if tok.kind == "+":
            self.take()
            return self.unary()
        if tok.kind == "-":
            self.take()
            return Negate(self.unary())
        if tok.kind == "NOT":
            self.take()
            at = self.peek()
            return Not(self.boolean(self.unary(), at))
        return self.primary()

    def primary(self) -> Node:
        tok = self.peek()
        kind = tok.kind
        if kind == "ID":
            self.take()
            return Prop(tok.text)
        if kind == "(":
            self.take()
            node = self.or_()
            self.expect(")", "AND, OR or )")
            return node
        if kind == "STRING":
            return Const(STRING, self.string())
        if kind == "DECIMAL":
            self.take()
            digits = tok.text.rstrip("lL")
            value = int(digits)
            if value > LONG_MAX:
                raise self.fail(tok, f"For input string: \"{digits}\" (beyond a 64-bit long)")
            return Const(INT if value <= INT_MAX else LONG, value)
        if kind == "FLOAT":
            self.take()
            f = float(tok.text)
            if f > DOUBLE_MAX:
                raise self.fail(tok, f"{tok.text} is greater than {DOUBLE_MAX}")
            if f < DOUBLE_MIN:
                raise self.fail(tok, f"{tok.text} is less than 4.9E-324")
            return Const(DOUBLE, f)
        if kind in ("TRUE", "FALSE"):
            self.take()
            return Const(BOOL, kind == "TRUE")
        if kind == "NULL":
            self.take()
            return Const(NULL, None)
        raise self.unexpected(tok, "a name, a literal, NOT, - or (")

    def string(self) -> str:
        tok = self.expect("STRING", "a string literal")
        return tok.text[1:-1].replace("''", "'")

    # -- Java's factory checks -----------------------------------------------------------------
    def compare(self, op: str, left: Node, lat: Token, right: Node, rat: Token) -> Compare:
        self.check_less_than_operand(left, lat)
        self.check_less_than_operand(right, rat)
        return Compare(op, left, right)  # type: ignore[arg-type]  # op is one of the four

    def check_less_than_operand(self, node: Node, at: Token) -> None:
        if isinstance(node, Const):
            if node.type in NUMBERS:
                return
            raise self.fail(at, f"Value '{_show(node)}' cannot be compared")
        if is_boolean(node):
            raise self.fail(at, f"Value '{_show(node)}' cannot be compared")

    def check_equal_operand(self, node: Node, at: Token) -> None:
        if isinstance(node, Const) and node.type == NULL:
            raise self.fail(at, "'NULL' cannot be compared (use IS NULL)")

    def check_between(self, low: Node, high: Node, at: Token) -> None:
        if not (isinstance(low, Const) and isinstance(high, Const)):
            return
        if low.type == NULL or high.type == NULL:
            raise self.fail(at, "Illegal values of between, values can not be null!")
        try:
            out_of_order = compare(high.type, high.value, low.type, low.value) < 0
        except ValueError as exc:
            raise self.fail(at, f"Illegal values of between: {exc}") from None
        if out_of_order:
            raise self.fail(at, f"Illegal values of between, left value({_show(low)}) must less than or "
                                f"equal to right value({_show(high)})")


def _show(node: Node) -> str:
    if isinstance(node, Const):
        if node.type == NULL:
            return "NULL"
        if node.type == BOOL:
            return "TRUE" if node.value else "FALSE"
        if node.type == STRING:
            return "'" + str(node.value).replace("'", "''") + "'"
        return repr(node.value)
    if isinstance(node, Prop):
        return node.name
    return type(node).__name__
