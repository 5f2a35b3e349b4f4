"""DynamoDB's item sizes and the expressions the small tier's adapters write, for ``bench.aws_model``.

Sizes are counted as AWS bills them (attribute names plus values; binary
decoded, numbers as their digits). Conditions (AND/OR/NOT, comparisons,
BETWEEN, attribute_exists / attribute_not_exists / begins_with), SET (with
if_not_exists) and ADD updates and projections are understood; anything else
raises ``ModelError``, so the model never answers a call it does not model.
"""

from __future__ import annotations

import base64
import re
from decimal import Decimal
from typing import Any


class ModelError(Exception):
    """A call or expression the model does not understand (never answered approximately)."""


# ------------------------------------------------------------------ item values
def value_size(value: dict[str, Any]) -> int:
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(raw.encode())
    if kind == "N":
        return len(raw.strip("-").replace(".", "")) // 2 + 1
    if kind == "B":
        return len(base64.b64decode(raw)) if isinstance(raw, str) else len(raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(value_size(v) + 1 for v in raw)
    if kind == "M":
        return 3 + sum(len(k.encode()) + value_size(v) + 1 for k, v in raw.items())
    if kind in ("SS", "NS", "BS"):
        return sum(value_size({kind[0]: v}) for v in raw)
    raise ModelError(f"attribute type {kind}")


def item_size(item: dict[str, Any]) -> int:
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def plain_value(value: dict[str, Any]) -> Any:
    ((kind, raw),) = value.items()
    if kind == "N":
        return Decimal(raw)
    if kind in ("S", "B", "BOOL"):
        return raw
    if kind == "NULL":
        return None
    raise ModelError(f"comparison of a {kind} value")


# ------------------------------------------------------------------ expressions
_TOKEN = re.compile(r"\s*(<>|<=|>=|[=<>(),+]|[#:]?[A-Za-z_][A-Za-z0-9_.\-]*)")
_KEYWORDS = {"AND", "OR", "NOT", "BETWEEN", "SET", "ADD", "REMOVE", "IN"}


def _tokens(text: str) -> list[str]:
    out, at = [], 0
    text = text.strip()
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            raise ModelError(f"cannot read expression {text!r} at {at}")
        out.append(match.group(1))
        at = match.end()
    return out


class Expression:
    """A parsed condition: ``evaluate(item)``; names and values resolved when made."""

    def __init__(self, text: str, names: dict[str, str], values: dict[str, Any]) -> None:
        self.tokens, self.at, self.names, self.values = _tokens(text), 0, names, values
        self.tree = self._or()
        if self.at != len(self.tokens):
            raise ModelError(f"unexpected {self.tokens[self.at]!r} in {text!r}")

    def _peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def _take(self, want: str | None = None) -> str:
        token = self._peek()
        if token is None or (want is not None and token.upper() != want):
            raise ModelError(f"expected {want or 'a token'}, got {token!r}")
        self.at += 1
        return token

    def _or(self) -> Any:
        node = self._and()
        while (self._peek() or "").upper() == "OR":
            self._take()
            node = ("or", node, self._and())
        return node

    def _and(self) -> Any:
        node = self._not()
        while (self._peek() or "").upper() == "AND":
            self._take()
            node = ("and", node, self._not())
        return node

    def _not(self) -> Any:
        if (self._peek() or "").upper() == "NOT":
            self._take()
            return ("not", self._not())
        return self._primary()

    def _primary(self) -> Any:
        token = self._peek()
        if token == "(":
            self._take()
            node = self._or()
            self._take(")")
            return node
        if token in ("attribute_exists", "attribute_not_exists", "begins_with"):
            self._take()
            self._take("(")
            args = [self._operand()]
            while self._peek() == ",":
                self._take()
                args.append(self._operand())
            self._take(")")
            return (token, *args)
        left = self._operand()
        op = self._take()
        if op.upper() == "BETWEEN":
            low = self._operand()
            self._take("AND")
            return ("between", left, low, self._operand())
        if op not in ("=", "<>", "<", "<=", ">", ">="):
            raise ModelError(f"operator {op!r}")
        return (op, left, self._operand())

    def _operand(self) -> Any:
        token = self._take()
        if token.startswith(":"):
            return ("value", self.values[token])
        if token.upper() in _KEYWORDS or token in "(),":
            raise ModelError(f"unexpected {token!r}")
        return ("path", self.names.get(token, token) if token.startswith("#") else token)

    @staticmethod
    def _get(operand: Any, item: dict[str, Any] | None) -> dict[str, Any] | None:
        kind, raw = operand
        return raw if kind == "value" else (item or {}).get(raw)

    def evaluate(self, item: dict[str, Any] | None, node: Any = None) -> bool:
        node = self.tree if node is None else node
        op = node[0]
        if op == "or":
            return self.evaluate(item, node[1]) or self.evaluate(item, node[2])
        if op == "and":
            return self.evaluate(item, node[1]) and self.evaluate(item, node[2])
        if op == "not":
            return not self.evaluate(item, node[1])
        if op == "attribute_exists":
            return self._get(node[1], item) is not None
        if op == "attribute_not_exists":
            return self._get(node[1], item) is None
        found = [self._get(n, item) for n in node[1:]]
        values = [v for v in found if v is not None]
        if len(values) != len(found):
            return False
        if op == "begins_with":
            return str(plain_value(values[0])).startswith(str(plain_value(values[1])))
        plain = [plain_value(v) for v in values]
        if op == "between":
            return bool(plain[1] <= plain[0] <= plain[2])
        if op in ("=", "<>"):
            same = values[0] == values[1] if list(values[0]) != ["N"] else plain[0] == plain[1]
            return same if op == "=" else not same
        return bool(
            {"<": plain[0] < plain[1], "<=": plain[0] <= plain[1], ">": plain[0] > plain[1]}.get(
                op, plain[0] >= plain[1]
            )
        )


def apply_update(
    item: dict[str, Any], text: str, names: dict[str, str], values: dict[str, Any]
) -> dict[str, Any]:
    """``item`` after an UpdateExpression of SET (``if_not_exists`` allowed) and ADD clauses."""
    out = dict(item)
    tokens, at = _tokens(text), 0

    def name(token: str) -> str:
        return names.get(token, token) if token.startswith("#") else token

    clause = None
    while at < len(tokens):
        token = tokens[at]
        if token.upper() in ("SET", "ADD"):
            clause, at = token.upper(), at + 1
            continue
        if token == ",":
            at += 1
            continue
        target = name(token)
        if clause == "SET":
            if tokens[at + 1] != "=":
                raise ModelError(f"SET without '=' in {text!r}")
            at += 2
            if tokens[at] == "if_not_exists":
                existing, fallback = name(tokens[at + 2]), values[tokens[at + 4]]
                out[target] = out.get(existing, fallback)
                at += 6
            else:
                out[target] = values[tokens[at]]
                at += 1
        elif clause == "ADD":
            delta = values[tokens[at + 1]]
            current = out.get(target, {"N": "0"})
            out[target] = {"N": str(Decimal(current["N"]) + Decimal(delta["N"]))}
            at += 2
        else:
            raise ModelError(f"update clause in {text!r}")
    return out


def project(item: dict[str, Any], projection: str | None, names: dict[str, str]) -> dict[str, Any]:
    if not projection:
        return item
    wanted = [names.get(t.strip(), t.strip()) for t in projection.split(",")]
    return {k: item[k] for k in wanted if k in item}
