"""Bedrock permissions on exactly the configured models, nothing wider.

``bedrock:InvokeModel`` is the IAM action behind both InvokeModel and the
Converse API. Current Claude models on Bedrock are invoked through a
cross-Region inference profile (ids prefixed ``us.``, ``eu.``, ``apac.``,
``global.``...): the caller needs the profile ARN in its own Region, and the
underlying foundation model in every Region the profile routes to. The
foundation-model grant carries a ``bedrock:InferenceProfileArn`` condition,
so the model can be reached through that profile only, never invoked
directly in some other Region. ``global.`` profiles route to any commercial
Region, whose model ARNs AWS writes without a Region.
Rerank has no resource-level permission of its own (``bedrock:Rerank`` takes
``*``); the reranker model itself is still limited by InvokeModel on its ARN.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

PROFILE_PREFIXES = ("us.", "eu.", "apac.", "us-gov.", "global.", "jp.", "au.", "ca.")


def is_inference_profile(model_id: str) -> bool:
    return model_id.startswith(PROFILE_PREFIXES)


def profile_arn(scope: Construct, model_id: str) -> str:
    stack = Stack.of(scope)
    return f"arn:{stack.partition}:bedrock:{stack.region}:{stack.account}:inference-profile/{model_id}"


def foundation_model_arns(scope: Construct, model_id: str) -> list[str]:
    """The foundation model ARNs behind ``model_id`` (every Region a profile may route to)."""
    partition = Stack.of(scope).partition
    if not is_inference_profile(model_id):
        return [f"arn:{partition}:bedrock:{Stack.of(scope).region}::foundation-model/{model_id}"]
    base = model_id.split(".", 1)[1]
    arns = [f"arn:{partition}:bedrock:*::foundation-model/{base}"]
    if model_id.startswith("global."):
        arns.append(f"arn:{partition}:bedrock:::foundation-model/{base}")
    return arns


def grant_invoke(scope: Construct, grantee: iam.IGrantable, model_ids: list[str]) -> None:
    direct = sorted(
        {m for m in model_ids if m and m.startswith("arn:")}
        | {
            arn
            for m in model_ids
            if m and not m.startswith("arn:") and not is_inference_profile(m)
            for arn in foundation_model_arns(scope, m)
        }
    )
    profiles = sorted({m for m in model_ids if m and is_inference_profile(m)})
    if direct or profiles:
        iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["bedrock:InvokeModel"],
            resource_arns=direct + [profile_arn(scope, m) for m in profiles],
        )
    for model_id in profiles:
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["bedrock:InvokeModel"],
                resources=foundation_model_arns(scope, model_id),
                conditions={"StringEquals": {"bedrock:InferenceProfileArn": profile_arn(scope, model_id)}},
            )
        )


def grant_rerank(scope: Construct, grantee: iam.IGrantable, rerank_model_arn: str) -> None:
    if not rerank_model_arn:
        return
    grant_invoke(scope, grantee, [rerank_model_arn])
    iam.Grant.add_to_principal(grantee=grantee, actions=["bedrock:Rerank"], resource_arns=["*"])
