"""IAM's decision for one call, from a role's policies in the synthesised template.

A small evaluator of identity policies as IAM documents them: an explicit
``Deny`` wins, else an ``Allow`` is needed, else the call is refused. A
statement applies when its ``Action``/``NotAction`` and ``Resource``/
``NotResource`` match (``*`` and ``?`` wildcards; actions case-insensitive,
resources not) and every condition holds. The condition operators are the
ones IAM defines for strings, ARNs and booleans (with ``IfExists`` and
``ForAnyValue``/``ForAllValues``); an operator it does not know fails the
evaluation loudly rather than guessing. Policy documents are read from the
template with ``Ref``/``Fn::GetAtt``/``Fn::Join`` resolved by the caller
(``resolve``) to the deployed resources' names and ARNs.

The role's AWS managed policies are not read (only the ARN is in the
template); the functions carry ``AWSLambdaBasicExecutionRole`` (CloudWatch
Logs only), which no recorded call needs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any


@dataclass(frozen=True)
class Request:
    """One authorisation IAM makes: an action on a resource, with the request's condition keys."""

    action: str  # "sqs:ReceiveMessage"
    resource: str  # an ARN, or "*" for actions with no resource type
    context: dict[str, str] = field(default_factory=dict, hash=False, compare=False)


@cache
def _pattern(glob: str, case_sensitive: bool) -> re.Pattern[str]:
    # IAM's wildcards are * and ? only (no [...] classes as fnmatch has): escape everything else.
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob)
    return re.compile(f"^{body}$", 0 if case_sensitive else re.IGNORECASE | re.DOTALL)


def matches(glob: str, value: str, *, case_sensitive: bool = True) -> bool:
    return bool(_pattern(glob, case_sensitive).match(value))


def _arn_matches(glob: str, arn: str) -> bool:
    """ArnLike: each of the six colon-separated parts matched on its own (a * never spans parts)."""
    if glob == "*":
        return True
    want, have = glob.split(":", 5), arn.split(":", 5)
    return len(want) == len(have) == 6 and all(matches(w, h) for w, h in zip(want, have, strict=True))


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


_STRING_TESTS: dict[str, Callable[[str, str], bool]] = {
    "StringEquals": lambda want, have: want == have,
    "StringEqualsIgnoreCase": lambda want, have: want.lower() == have.lower(),
    "StringLike": lambda want, have: matches(want, have),
    "ArnEquals": lambda want, have: want == have,
    "ArnLike": _arn_matches,
    "Bool": lambda want, have: want.lower() == have.lower(),
}
_NEGATED = {
    "StringNotEquals": "StringEquals",
    "StringNotEqualsIgnoreCase": "StringEqualsIgnoreCase",
    "StringNotLike": "StringLike",
    "ArnNotEquals": "ArnEquals",
    "ArnNotLike": "ArnLike",
}


def condition_holds(operator: str, key: str, wanted: Any, context: dict[str, Any]) -> bool:
    """One condition operator on one key, as IAM's condition-operator reference defines it."""
    op, if_exists, qualifier = operator, False, ""
    if op.startswith(("ForAnyValue:", "ForAllValues:")):
        qualifier, op = op.split(":", 1)
    if op.endswith("IfExists"):
        if_exists, op = True, op.removesuffix("IfExists")
    if op == "Null":
        return (key not in context) == (str(wanted).lower() == "true")
    present = next((context[k] for k in context if k.lower() == key.lower()), None)
    if present is None:
        # A missing key: IfExists and the negated operators hold, ForAllValues holds (vacuously).
        return if_exists or op in _NEGATED or qualifier == "ForAllValues"
    negated = op in _NEGATED
    test = _STRING_TESTS.get(_NEGATED.get(op, op))
    if test is None:
        raise NotImplementedError(f"the IAM evaluator has no condition operator {operator!r}")
    values = [str(v) for v in _as_list(present)]
    wants = [str(w) for w in _as_list(wanted)]

    def one(value: str) -> bool:
        hit = any(test(w, value) for w in wants)
        return not hit if negated else hit

    if qualifier == "ForAllValues":
        return all(one(v) for v in values)
    return any(one(v) for v in values)


def _applies(statement: dict[str, Any], request: Request) -> bool:
    if "Action" in statement:
        if not any(matches(a, request.action, case_sensitive=False) for a in _as_list(statement["Action"])):
            return False
    elif any(matches(a, request.action, case_sensitive=False) for a in _as_list(statement["NotAction"])):
        return False
    if "Resource" in statement:
        if not any(matches(r, request.resource) for r in _as_list(statement["Resource"])):
            return False
    elif any(matches(r, request.resource) for r in _as_list(statement.get("NotResource", []))):
        return False
    return all(
        condition_holds(operator, key, wanted, request.context)
        for operator, keys in statement.get("Condition", {}).items()
        for key, wanted in keys.items()
    )


def decide(statements: Iterable[dict[str, Any]], request: Request) -> str:
    """ "Deny" (explicit), "Allow", or "ImplicitDeny" (no statement allows it)."""
    allowed = False
    for statement in statements:
        if not _applies(statement, request):
            continue
        if statement["Effect"] == "Deny":
            return "Deny"
        allowed = True
    return "Allow" if allowed else "ImplicitDeny"


def role_statements(template: dict[str, Any], role_id: str, resolve: Callable[[Any], Any]) -> list[dict]:
    """Every statement of the role's inline policies and of the ``AWS::IAM::Policy`` resources on it."""
    resources = template["Resources"]
    role = resources[role_id]["Properties"]
    documents = [p["PolicyDocument"] for p in role.get("Policies", [])]
    for res in resources.values():
        if res["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in res["Properties"].get("Roles", []):
            documents.append(res["Properties"]["PolicyDocument"])
        if res["Type"] == "AWS::IAM::ManagedPolicy" and {"Ref": role_id} in res["Properties"].get(
            "Roles", []
        ):
            documents.append(res["Properties"]["PolicyDocument"])
    return [resolve(s) for doc in documents for s in _as_list(doc["Statement"])]


def function_role(template: dict[str, Any], function_id: str) -> str:
    """The logical id of the role a function runs as (its ``Role: Fn::GetAtt [<role>, Arn]``)."""
    role = template["Resources"][function_id]["Properties"]["Role"]
    return str(role["Fn::GetAtt"][0])
