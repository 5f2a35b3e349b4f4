"""Bedrock permissions on exactly the configured models, nothing wider.

``bedrock:InvokeModel`` is the IAM action behind both InvokeModel and the
Converse API. A model id with a cross-region inference-profile prefix
(``us.``, ``eu.``, ``apac.``, ``global.``) needs the profile ARN plus the
underlying foundation model in every region the profile routes to.
Rerank has no resource-level permission of its own (``bedrock:Rerank`` takes
``*``); the reranker model itself is still limited by InvokeModel on its ARN.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

PROFILE_PREFIXES = ("us.", "eu.", "apac.", "us-gov.", "global.", "jp.", "au.", "ca.")


def model_arns(scope: Construct, model_id: str) -> list[str]:
    """The ARNs a call to ``model_id`` is authorised against."""
    if model_id.startswith("arn:"):
        return [model_id]
    stack = Stack.of(scope)
    if model_id.startswith(PROFILE_PREFIXES):
        base = model_id.split(".", 1)[1]
        return [
            f"arn:{stack.partition}:bedrock:{stack.region}:{stack.account}:inference-profile/{model_id}",
            f"arn:{stack.partition}:bedrock:*::foundation-model/{base}",
        ]
    return [f"arn:{stack.partition}:bedrock:{stack.region}::foundation-model/{model_id}"]


def grant_invoke(scope: Construct, grantee: iam.IGrantable, model_ids: list[str]) -> None:
    arns = sorted({arn for m in model_ids if m for arn in model_arns(scope, m)})
    if not arns:
        return
    iam.Grant.add_to_principal(grantee=grantee, actions=["bedrock:InvokeModel"], resource_arns=arns)


def grant_rerank(scope: Construct, grantee: iam.IGrantable, rerank_model_arn: str) -> None:
    if not rerank_model_arn:
        return
    grant_invoke(scope, grantee, [rerank_model_arn])
    iam.Grant.add_to_principal(grantee=grantee, actions=["bedrock:Rerank"], resource_arns=["*"])
