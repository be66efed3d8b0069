"""iam:SimulatePrincipalPolicy for moto, which lacks it, modelled on AWS's documented behaviour.

The decision for each action and resource follows IAM's evaluation logic for identity policies:
an explicit Deny wins, then any Allow, else the implicit deny. The principal's inline and attached
policies (and, for users, their groups') are evaluated; conditions are checked against the
request's ContextEntries (StringEquals/StringLike and their ForAnyValue forms), and a condition
on a key that was not given does not match, as AWS reports it in MissingContextValues.
"""
from __future__ import annotations

import fnmatch
import json
import urllib.parse
import uuid
from typing import Any
from xml.sax.saxutils import escape

from emulator.core import register_patch

_XMLNS = "https://iam.amazonaws.com/doc/2010-05-08/"


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def _load(document: Any) -> dict:
    if isinstance(document, dict):
        return document
    try:
        return json.loads(document)
    except (TypeError, ValueError):
        return json.loads(urllib.parse.unquote(document))


def _matches(patterns: Any, value: str, case: bool = False) -> bool:
    for pattern in _as_list(patterns):
        if case:
            if fnmatch.fnmatchcase(value, pattern):
                return True
        elif fnmatch.fnmatchcase(value.lower(), str(pattern).lower()):
            return True
    return False


def _condition_holds(condition: dict, context: dict[str, list[str]]) -> bool:
    for operator, pairs in condition.items():
        base = operator.split(":")[-1]
        for key, expected in pairs.items():
            given = context.get(key.lower())
            if given is None:
                return False
            wanted = [str(e) for e in _as_list(expected)]
            if base == "StringEquals":
                ok = any(g in wanted for g in given)
            elif base == "StringLike":
                ok = any(_matches(wanted, g, case=True) for g in given)
            elif base == "StringNotEquals":
                ok = all(g not in wanted for g in given)
            else:
                return False
            if not ok:
                return False
    return True


def decide(documents: list[dict], action: str, resource: str, context: dict[str, list[str]]) -> str:
    """allowed, explicitDeny or implicitDeny, the values of EvalDecision."""
    allowed = False
    for doc in documents:
        for st in _as_list(doc.get("Statement", [])):
            if "Action" in st and not _matches(st["Action"], action):
                continue
            if "NotAction" in st and _matches(st["NotAction"], action):
                continue
            if "Resource" in st and not _matches(st["Resource"], resource, case=True):
                continue
            if "NotResource" in st and _matches(st["NotResource"], resource, case=True):
                continue
            if "Condition" in st and not _condition_holds(st["Condition"], context):
                continue
            if st.get("Effect") == "Deny":
                return "explicitDeny"
            allowed = allowed or st.get("Effect") == "Allow"
    return "allowed" if allowed else "implicitDeny"


def _default_document(policy: Any) -> dict:
    version = next(v for v in policy.versions if v.is_default)
    return _load(version.document)


def _documents(backend: Any, arn: str) -> list[dict] | None:
    principals = list(backend.roles.values()) + list(backend.users.values())
    principal = next((p for p in principals if p.arn == arn), None)
    if principal is None:
        return None
    docs = [_load(d) for d in principal.policies.values()]
    docs += [_default_document(p) for p in principal.managed_policies.values()]
    for group in getattr(backend, "groups", {}).values():
        if principal in getattr(group, "users", []):
            docs += [_load(d) for d in group.policies.values()]
            docs += [_default_document(p) for p in group.managed_policies.values()]
    return docs


def _context(params: dict[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    n = 1
    while f"ContextEntries.member.{n}.ContextKeyName" in params:
        key = params[f"ContextEntries.member.{n}.ContextKeyName"]
        values, m = [], 1
        while f"ContextEntries.member.{n}.ContextKeyValues.member.{m}" in params:
            values.append(params[f"ContextEntries.member.{n}.ContextKeyValues.member.{m}"])
            m += 1
        out[key.lower()] = values
        n += 1
    return out


def _members(params: dict[str, Any], name: str) -> list[str]:
    out, n = [], 1
    while f"{name}.member.{n}" in params:
        out.append(params[f"{name}.member.{n}"])
        n += 1
    return out


def _apply() -> None:
    from moto.iam.exceptions import NoSuchEntity
    from moto.iam.responses import IamResponse

    def simulate_principal_policy(self) -> str:
        params = {k: v[0] if isinstance(v, list) else v for k, v in self.querystring.items()}
        source = params.get("PolicySourceArn", "")
        documents = _documents(self.backend, source)
        if documents is None:
            raise NoSuchEntity(f"The principal {source} does not exist")
        actions = _members(params, "ActionNames")
        resources = _members(params, "ResourceArns") or ["*"]
        context = _context(params)
        members = []
        for action in actions:
            for resource in resources:
                decision = decide(documents, action, resource, context)
                members.append(
                    f"<member><EvalActionName>{escape(action)}</EvalActionName>"
                    f"<EvalResourceName>{escape(resource)}</EvalResourceName>"
                    f"<EvalDecision>{decision}</EvalDecision><MatchedStatements/>"
                    f"<MissingContextValues/></member>")
        return (f'<SimulatePrincipalPolicyResponse xmlns="{_XMLNS}"><SimulatePrincipalPolicyResult>'
                f"<IsTruncated>false</IsTruncated><EvaluationResults>{''.join(members)}</EvaluationResults>"
                f"</SimulatePrincipalPolicyResult><ResponseMetadata><RequestId>{uuid.uuid4()}</RequestId>"
                "</ResponseMetadata></SimulatePrincipalPolicyResponse>")

    IamResponse.simulate_principal_policy = simulate_principal_policy


register_patch("iam.simulate_principal_policy", _apply)
