"""RocketMQ's SQL92 message selector: ``compile`` and ``Selector.matches``.

The language and its evaluation are 4.9.8's ``filter`` module (``SelectorParser.jj`` and the
``expression`` classes, themselves from ActiveMQ): ``OR`` below ``AND`` below ``=``/``<>``/``IS
[NOT] NULL`` below ``>``/``>=``/``<``/``<=``/``[NOT] BETWEEN``/``[NOT] IN`` below unary ``+``/``-``/
``NOT``; literals are strings in single quotes (``''`` for a quote), decimal (Integer when it fits,
else Long; an ``L`` suffix allowed), floating point (Double), ``TRUE``, ``FALSE``, ``NULL``; every
other identifier names a message property. Keywords are case-insensitive; ``--`` line comments
(ended by a line break) and ``/* */`` comments are skipped. As in 4.9.8 the parse stops after one
expression: text after it is not read, except the one token the parser looks at to know the
expression has ended (``a = 1 xyz`` compiles as ``a = 1``).

Evaluation is three-valued: a missing property is NULL, a comparison with NULL is NULL, and only
TRUE matches. Type conversions and their failures are ``javavalues.java_compare``'s; an
evaluation that fails (a property ``'abc'`` compared with a number) matches nothing, as the broker
catches it (``ExpressionMessageFilter.isMatchedByCommitLog``). Nesting deeper than
``MAX_DEPTH`` is refused (Java runs out of stack much later); a chain of ANDs or ORs of any
length is one level.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from formats.javatext import INT_RANGE, LONG_RANGE
from rmqcli.filter.javavalues import (
    EvaluationError,
    JavaInt,
    JavaLong,
    java_compare,
    java_double,
)

SQL92 = "SQL92"  # ExpressionType.SQL92, the one type FilterFactory knows besides TAG
MAX_DEPTH = 100  # nested parentheses, unary operators, and levels of the expression's tree
CACHED = 256  # compiled expressions kept (SelectorParser's PARSE_CACHE)
Value = object  # None, bool, JavaInt, JavaLong, float or str


class SelectorError(ValueError):
    """The expression does not compile (4.9.8: ``MQFilterException``)."""


# --- expressions (the ``expression`` package) ---------------------------------------------------


class Expression:
    boolean = False  # a ``BooleanExpression``

    def evaluate(self, props: Mapping[str, str]) -> Value:
        raise NotImplementedError


@dataclass
class Constant(Expression):
    value: Value
    boolean: bool = False  # ``BooleanConstantExpression``: TRUE, FALSE, NULL

    def evaluate(self, props: Mapping[str, str]) -> Value:
        return self.value


@dataclass
class Property(Expression):
    name: str

    def evaluate(self, props: Mapping[str, str]) -> Value:
        return props.get(self.name)


@dataclass
class Negate(Expression):
    operand: Expression

    def evaluate(self, props: Mapping[str, str]) -> Value:
        value = self.operand.evaluate(props)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        if isinstance(value, float):
            return -value
        low = INT_RANGE[0] if isinstance(value, JavaInt) else LONG_RANGE[0]
        return type(value)(value if value == low else -value)  # two's complement: -MIN is MIN


@dataclass
class _BooleanUnary(Expression):
    """A boolean expression of one operand: NULL when the operand is NULL, else ``of`` its value."""

    operand: Expression
    boolean = True

    def evaluate(self, props: Mapping[str, str]) -> Value:
        value = self.operand.evaluate(props)
        return None if value is None else self.of(value)

    def of(self, value: Value) -> Value:
        raise NotImplementedError


class BooleanCast(_BooleanUnary):
    """A property where a boolean is wanted: TRUE only for a Boolean, which a String never is."""

    def of(self, value: Value) -> Value:
        return value if isinstance(value, bool) else False


class Not(_BooleanUnary):
    def of(self, value: Value) -> Value:
        if not isinstance(value, bool):
            raise EvaluationError("ClassCastException: not a Boolean")
        return not value


@dataclass
class Logic(Expression):
    """AND (``decisive`` FALSE) or OR (``decisive`` TRUE) of two or more terms, evaluated left to
    right as 4.9.8's nested binary ``LogicExpression``s are: the first decisive term decides, else
    NULL when a term was NULL. One node for a whole chain, so that a long one nests nothing."""

    terms: list[Expression]
    decisive: bool
    boolean = True

    def evaluate(self, props: Mapping[str, str]) -> Value:
        unknown = False
        for term in self.terms:
            value = term.evaluate(props)
            if value is self.decisive:
                return value
            unknown = unknown or value is None
        return None if unknown else not self.decisive


def _logic(left: Expression, right: Expression, decisive: bool) -> Logic:
    """``LogicExpression.createAND`` (``decisive`` False) or ``createOR``, joined to a chain."""
    left, right = _boolean(left), _boolean(right)
    if isinstance(left, Logic) and left.decisive == decisive:
        left.terms.append(right)
        return left
    return Logic([left, right], decisive)


@dataclass
class Equal(Expression):
    """``doCreateEqual``: NULL = NULL is TRUE; NULL against a value is NULL (the left missing) or
    FALSE (the right missing); values of different classes go through ``java_compare``."""

    left: Expression
    right: Expression
    boolean = True

    def evaluate(self, props: Mapping[str, str]) -> Value:
        lv, rv = self.left.evaluate(props), self.right.evaluate(props)
        if (lv is None) != (rv is None):
            return None if lv is None else False
        if lv is None:
            return True
        return java_compare(lv, rv) == 0


_ORDERS: dict[str, Callable[[int], bool]] = {
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}


@dataclass
class Relational(Expression):
    """``>``, ``>=``, ``<``, ``<=``: two Strings (two properties) compare as Doubles."""

    left: Expression
    symbol: str
    right: Expression
    boolean = True

    def evaluate(self, props: Mapping[str, str]) -> Value:
        lv = self.left.evaluate(props)
        if lv is None:
            return None
        rv = self.right.evaluate(props)
        if rv is None:
            return None
        if isinstance(lv, str) and isinstance(rv, str):
            lv, rv = java_double(lv), java_double(rv)
        return _ORDERS[self.symbol](java_compare(lv, rv))


@dataclass
class In(Expression):
    operand: Property
    items: frozenset[str]
    negated: bool
    boolean = True

    def evaluate(self, props: Mapping[str, str]) -> Value:
        value = self.operand.evaluate(props)
        if not isinstance(value, str):
            return None
        return (value in self.items) != self.negated


# --- the checks of ``ComparisonExpression``'s factories ------------------------------------------


def _boolean(expr: Expression) -> Expression:
    """``asBooleanExpression``."""
    if expr.boolean:
        return expr
    if isinstance(expr, Property):
        return BooleanCast(expr)
    raise SelectorError(f"Expression will not result in a boolean value: {_text(expr)}")


def _check_ordered(expr: Expression) -> None:
    """``checkLessThanOperand``: a constant must be a number; no boolean expression."""
    if isinstance(expr, Constant):
        if isinstance(expr.value, bool) or not isinstance(expr.value, int | float):
            raise SelectorError(f"Value '{_text(expr)}' cannot be compared.")
    elif expr.boolean:
        raise SelectorError(f"Value '{_text(expr)}' cannot be compared.")


def _relational(left: Expression, symbol: str, right: Expression) -> Expression:
    _check_ordered(left)
    _check_ordered(right)
    return Relational(left, symbol, right)


def _equal(left: Expression, right: Expression) -> Expression:
    """``createEqual``: no NULL constant; a boolean constant only against another."""
    for side in (left, right):
        if isinstance(side, Constant) and side.value is None:
            raise SelectorError(f"'{_text(side)}' cannot be compared.")
    if isinstance(left, Constant) and isinstance(right, Constant) and left.boolean and not right.boolean:
        raise SelectorError(f"'{_text(left)}' cannot be compared with '{_text(right)}'")
    return Equal(left, right)


def _between(value: Expression, low: Expression, high: Expression, negated: bool) -> Expression:
    if negated:  # createNotBetween checks nothing more than its two comparisons
        return _logic(_relational(value, "<", low), _relational(value, ">", high), True)
    if isinstance(low, Constant) and isinstance(high, Constant):
        if low.value is None or high.value is None:
            raise SelectorError("Illegal values of between, values can not be null!")
        try:
            backwards = java_compare(high.value, low.value) < 0
        except EvaluationError as exc:
            raise SelectorError(str(exc)) from None
        if backwards:
            raise SelectorError(
                f"Illegal values of between, left value({_text(low)}) must less than or equal to "
                f"right value({_text(high)})"
            )
    return _logic(_relational(value, ">=", low), _relational(value, "<=", high), False)


def _text(expr: Expression) -> str:
    if isinstance(expr, Property):
        return expr.name
    if isinstance(expr, Constant):
        value = expr.value
        if value is None:
            return "NULL"
        if isinstance(value, bool):
            return "TRUE" if value else "FALSE"
        if isinstance(value, str):
            return "'" + value.replace("'", "''") + "'"
        return str(value)
    return type(expr).__name__


# --- tokens (``SelectorParserTokenManager``) -----------------------------------------------------

KEYWORDS = ("NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS")
_SKIPPED = (
    re.compile(r"[ \t\n\r\f]+"),
    re.compile(r"--[^\n\r]*(?:\r\n|\n|\r)"),
    re.compile(r"/\*[^*]*\*+(?:[^*/][^*]*\*+)*/"),
)
_TOKENS = (  # declaration order breaks ties between matches of one length
    ("DECIMAL", re.compile(r"0|[1-9][0-9]*[lL]?")),
    ("FLOAT", re.compile(r"(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")),
    ("STRING", re.compile(r"'(?:''|[^'])*'")),
    ("ID", re.compile(r"[a-zA-Z_$][a-zA-Z0-9_$]*")),
    ("OP", re.compile(r"<>|>=|<=|[=><(),+-]")),
)
_KEYWORD_SET = frozenset(KEYWORDS)


@dataclass(frozen=True)
class Token:
    kind: str  # a keyword, DECIMAL, FLOAT, STRING, ID, an operator's text, or EOF
    text: str


def _next_token(text: str, pos: int) -> tuple[Token, int]:
    """The token at ``pos`` (after skipped text) and the position after it: the longest match."""
    while True:
        ends = [m.end() for m in (p.match(text, pos) for p in _SKIPPED) if m]
        if not ends:
            break
        pos = max(ends)
    if pos >= len(text):
        return Token("EOF", ""), pos
    best: tuple[str, int] | None = None
    for kind, pattern in _TOKENS:
        m = pattern.match(text, pos)
        if m and (best is None or m.end() > best[1]):
            best = (kind, m.end())
    if best is None:
        raise SelectorError(f"Lexical error at offset {pos}: encountered {text[pos]!r}")
    kind, end = best
    image = text[pos:end]
    if kind == "ID" and image.upper() in _KEYWORD_SET:
        kind = image.upper()
    elif kind == "OP":
        kind = image
    return Token(kind, image), end


# --- the grammar (``SelectorParser``) ------------------------------------------------------------


def _shown(token: Token) -> str:
    return "the end" if token.kind == "EOF" else repr(token.text)


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0
        self.ahead: list[Token] = []  # tokens read and not consumed
        self.depth = 0

    def peek(self, n: int = 0) -> Token:
        while len(self.ahead) <= n:
            token, self.pos = _next_token(self.text, self.pos)
            self.ahead.append(token)
        return self.ahead[n]

    def take(self, kind: str) -> Token:
        token = self.peek()
        if token.kind != kind:
            raise SelectorError(f"Encountered {_shown(token)}, expected {kind}")
        self.ahead.pop(0)
        return token

    def selector(self) -> Expression:
        return _boolean(self.or_expression())

    def or_expression(self) -> Expression:
        return self.chain("OR", self.and_expression, True)

    def and_expression(self) -> Expression:
        return self.chain("AND", self.equality, False)

    def chain(self, keyword: str, term: Callable[[], Expression], decisive: bool) -> Expression:
        """``term (keyword term)*``, joined by ``_logic`` (OR: ``decisive`` TRUE, AND: FALSE)."""
        left = term()
        while self.peek().kind == keyword:
            self.take(keyword)
            left = _logic(left, term(), decisive)
        return left

    def equality(self) -> Expression:
        left = self.comparison()
        while True:
            kind = self.peek().kind
            if kind == "=":
                self.take("=")
                left = _equal(left, self.comparison())
            elif kind == "<>":
                self.take("<>")
                left = Not(_equal(left, self.comparison()))
            elif kind == "IS":
                self.take("IS")
                negated = self.peek().kind == "NOT"
                if negated:
                    self.take("NOT")
                self.take("NULL")
                test = Equal(left, Constant(None, boolean=True))
                left = Not(test) if negated else test
            else:
                return left

    def comparison(self) -> Expression:
        left = self.unary()
        while True:
            kind = self.peek().kind
            if kind in (">", ">=", "<", "<="):
                self.take(kind)
                left = _relational(left, kind, self.unary())
                continue
            negated = kind == "NOT"
            if negated:
                if self.peek(1).kind not in ("BETWEEN", "IN"):
                    after = _shown(self.peek(1))
                    raise SelectorError(f"Encountered {after} after NOT, expected BETWEEN or IN")
                self.take("NOT")
                kind = self.peek().kind
            if kind == "BETWEEN":
                self.take("BETWEEN")
                low = self.unary()
                self.take("AND")
                left = _between(left, low, self.unary(), negated)
            elif kind == "IN":
                self.take("IN")
                left = self.in_list(left, negated)
            else:
                return left

    def in_list(self, left: Expression, negated: bool) -> Expression:
        self.take("(")
        items = [self.string()]
        while self.peek().kind == ",":
            self.take(",")
            items.append(self.string())
        self.take(")")
        if not isinstance(left, Property):
            raise SelectorError(f"Expected a property for In expression, got: {_text(left)}")
        return In(left, frozenset(items), negated)

    def nested(self, parse: Callable[[], Expression]) -> Expression:
        """``parse`` one level deeper (parentheses, unary operators), at most ``MAX_DEPTH``."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise SelectorError(f"nested more than {MAX_DEPTH} deep")
        inner = parse()
        self.depth -= 1
        return inner

    def string(self) -> str:
        return self.take("STRING").text[1:-1].replace("''", "'")

    def unary(self) -> Expression:
        kind = self.peek().kind
        if kind not in ("+", "-", "NOT"):
            return self.primary()
        self.take(kind)
        operand = self.nested(self.unary)
        if kind == "-":
            return Negate(operand)
        if kind == "NOT":
            return Not(_boolean(operand))
        return operand

    def primary(self) -> Expression:
        token = self.peek()
        kind = token.kind
        if kind == "(":
            self.take("(")
            inner = self.nested(self.or_expression)
            self.take(")")
            return inner
        if kind == "ID":
            self.take("ID")
            return Property(token.text)
        if kind == "STRING":
            return Constant(self.string())
        literals = {"TRUE": True, "FALSE": False, "NULL": None}
        if kind == "DECIMAL":
            value: Value = _decimal(token.text)
        elif kind == "FLOAT":
            value = _float(token.text)
        elif kind in literals:
            value = literals[kind]
        else:
            raise SelectorError(f"Encountered {_shown(token)}, expected a value")
        self.take(kind)
        return Constant(value, boolean=kind in literals)


def _decimal(text: str) -> Value:
    """``ConstantExpression.createFromDecimal``: Integer when it fits, else Long."""
    digits = text.rstrip("lL")
    value = int(digits)
    if value > LONG_RANGE[1]:
        raise SelectorError(f"NumberFormatException: For input string: {digits!r}")
    return JavaInt(value) if value <= INT_RANGE[1] else JavaLong(value)


def _float(text: str) -> float:
    """``ConstantExpression.createFloat``: refuses infinity and, as 4.9.8 compares with
    ``Double.MIN_VALUE`` (the smallest positive double), zero and anything smaller."""
    value = float(text)
    if value > 1.7976931348623157e308:
        raise SelectorError(f"{text} is greater than {1.7976931348623157e308}")
    if value < 5e-324:
        raise SelectorError(f"{text} is less than 4.9E-324")
    return value


# --- the compiled selector -----------------------------------------------------------------------


@dataclass(frozen=True)
class Selector:
    """A compiled expression; ``matches`` a message's properties."""

    expression: str
    tree: Expression

    def evaluate(self, props: Mapping[str, str]) -> Value:
        """TRUE, FALSE or None (NULL); raises ``EvaluationError`` as Java throws."""
        return self.tree.evaluate(props)

    def matches(self, props: Mapping[str, str]) -> bool:
        """True only when the expression is TRUE; a failed evaluation matches nothing."""
        try:
            return self.tree.evaluate(props) is True
        except EvaluationError:
            return False


def compile_selector(expression: str) -> Selector:
    """``SqlFilter.compile``; raises ``SelectorError`` with 4.9.8's reason where it gives one."""
    tree = _Parser(expression).selector()
    _check_depth(tree)
    return Selector(expression, tree)


def _check_depth(tree: Expression) -> None:
    """Refuse a tree deeper than ``MAX_DEPTH`` (``a = b = c = ...`` nests without parentheses):
    evaluating it would recurse that deep."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise SelectorError(f"nested more than {MAX_DEPTH} deep")
        for child in _children(node):
            stack.append((child, depth + 1))


def _children(node: Expression) -> list[Expression]:
    if isinstance(node, Logic):
        return node.terms
    if isinstance(node, Equal | Relational):
        return [node.left, node.right]
    if isinstance(node, Negate | _BooleanUnary | In):
        return [node.operand]
    return []


def is_tag_type(expression_type: str | None) -> bool:
    """``ExpressionType.isTagType``: no type, an empty one, or exactly ``TAG``."""
    return not expression_type or expression_type == "TAG"


@lru_cache(maxsize=CACHED)
def _compiled(expression: str) -> Selector | SelectorError:
    try:
        return compile_selector(expression)
    except SelectorError as exc:
        return exc


def compiled(expression: str, expression_type: str | None = SQL92) -> Selector:
    """``FilterFactory.INSTANCE.get(type).compile(expression)``, from a bounded cache; raises
    ``SelectorError`` for an expression that does not compile or a type other than SQL92."""
    if expression_type != SQL92:
        raise SelectorError(f"no filter of type {expression_type}")
    result = _compiled(expression)
    if isinstance(result, SelectorError):
        raise result
    return result
