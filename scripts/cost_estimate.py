#!/usr/bin/env python3
"""What each tier costs a month: the fixed part counted from its synthesised template, the rest per request.

``.venv/bin/python scripts/cost_estimate.py ["<section title>" ...]`` synthesises every tier
(or only the sections named, e.g. "medium, store_backend=postgres"; offline,
with a stand-in layer: only its path matters to the template), counts what
AWS bills whether or not anyone calls the API (alarm metrics, custom metric
series, dashboards, KMS keys, scheduled invocations, search nodes) and
prices the traffic model below. docs/deploy.md shows its output; a test
recomputes the small tier's fixed costs from the template the tests
synthesise and fails when the document no longer matches.

Prices are us-east-1 on-demand list prices (USD) as written down here; the
always-free allowances (10 alarms, 10 custom metrics, 3 dashboards, 1M
Lambda requests, ...) are NOT subtracted, so the figures are what an account
that already uses its free tier elsewhere pays.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HOURS = 730  # a month
PRICES = {
    "alarm_metric": 0.10,  # per standard-resolution alarm metric per month
    "custom_metric": 0.30,  # per metric series per month (first 10k)
    "dashboard": 3.00,  # per dashboard per month
    "kms_key": 1.00,  # per customer-managed key per month
    "ce_request": 0.01,  # Cost Explorer API, per request
    "lambda_gb_s": 0.0000133334,  # arm64
    "lambda_request": 0.20 / 1e6,
    "apigw_request": 3.50 / 1e6,  # REST API
    "ddb_wru": 0.625 / 1e6,  # on-demand write request unit
    "ddb_rru": 0.125 / 1e6,  # on-demand read request unit
    "ddb_gb_month": 0.25,
    "ddb_pitr_gb_month": 0.20,
    "sqs_request": 0.40 / 1e6,
    "logs_gb": 0.50,  # ingestion
    "xray_trace": 5.00 / 1e6,
    "opensearch_gp3_gb_month": 0.122,
    "aoss_ocu_hour": 0.24,
    "aurora_acu_hour": 0.12,  # Aurora Serverless v2 (I/O-Standard)
    "secret_month": 0.40,  # Secrets Manager, per secret
    "s3_get": 0.0004 / 1000,
    "s3_put": 0.005 / 1000,
    "s3_gb_month": 0.023,  # S3 Standard
}
INSTANCE_HOUR = {"m7g.large.search": 0.136, "r7g.xlarge.search": 0.333}
#: Bedrock on-demand USD per million tokens (input, output), by model id without a profile prefix
TOKENS = {
    "anthropic.claude-haiku-4-5-20251001-v1:0": (1.00, 5.00),
    "anthropic.claude-sonnet-4-5-20250929-v1:0": (3.00, 15.00),
    "amazon.titan-embed-text-v2:0": (0.02, 0.0),
}
# The idle floor with redundancy (standby replicas on): 1 OCU for indexing and 1 for search, each
# 0.5 OCU x 2 (AWS's "Managing capacity limits for OpenSearch Serverless" page); 1 OCU without them.
AOSS_MIN_OCU = 2


@dataclass(frozen=True)
class Traffic:
    """One tier's month. Every assumption of the per-request estimate is here (docs/deploy.md's table)."""

    requests_per_day: int
    add_share: float = 0.5  # the rest are searches
    messages_per_add: int = 1
    users: int = 20
    memories_per_user: int = 500
    extraction_tokens: tuple[int, int] = (1500, 200)  # per message: the turn + 10 neighbours, the answer
    consolidation_every: int = 10  # messages per consolidation job
    consolidation_tokens: tuple[int, int] = (4500, 600)  # per job: summaries + synthesis
    embed_tokens_per_message: int = 120  # the turn at ingest + the memory extraction writes
    embed_tokens_per_search: int = 20
    api_seconds: float = 0.3
    extraction_seconds: float = 2.0
    consolidation_seconds: float = 10.0
    log_bytes_per_invocation: int = 2000


#: the variants docs/deploy.md prices beside the tiers: (title, tier, context)
VARIANTS = (
    ("medium, OpenSearch Serverless", "medium", {"opensearch_serverless": "true"}),
    ("small, store_backend=postgres", "small", {"store_backend": "postgres"}),
    ("medium, store_backend=postgres", "medium", {"store_backend": "postgres"}),
)

TRAFFIC = {
    "small": Traffic(100),
    "medium": Traffic(10_000, users=2_000, memories_per_user=2_000),
    "large": Traffic(100_000, users=20_000, memories_per_user=5_000),
}


# -------------------------------------------------------------- from the template
def _resources(template: dict[str, Any], type_: str) -> list[dict[str, Any]]:
    return [r.get("Properties", {}) for r in template["Resources"].values() if r["Type"] == type_]


def alarm_metrics(template: dict[str, Any]) -> tuple[int, int]:
    """(alarms, alarm metrics): a metric-math alarm is billed per metric it reads."""
    alarms = _resources(template, "AWS::CloudWatch::Alarm")
    metrics = sum(1 if "MetricName" in a else sum("MetricStat" in m for m in a["Metrics"]) for a in alarms)
    return len(alarms), metrics


def functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The memstack functions by service name (``<service>-api`` ...): memory, timeout, environment."""
    out = {}
    for fn in _resources(template, "AWS::Lambda::Function"):
        env = fn.get("Environment", {}).get("Variables", {})
        if "POWERTOOLS_SERVICE_NAME" in env:
            out[env["POWERTOOLS_SERVICE_NAME"].rsplit("-", 1)[1]] = {
                "memory_gb": fn["MemorySize"] / 1024,
                "timeout": fn["Timeout"],
                "env": env,
            }
    return out


def scheduled_runs_per_month(template: dict[str, Any]) -> dict[str, float]:
    runs = {}
    for rule in _resources(template, "AWS::Events::Rule"):
        expr = rule.get("ScheduleExpression", "")
        if m := re.fullmatch(r"rate\((\d+) (minute|minutes|hour|hours|day|days)\)", expr):
            minutes = int(m[1]) * {"m": 1, "h": 60, "d": 1440}[m[2][0]]
            runs[expr] = HOURS * 60 / minutes
        elif expr.startswith("cron(0 "):
            runs[expr] = 30.0  # the daily cost report
    return runs


def custom_metric_series() -> int:
    from stacks.constructs.observability import EMITTED_METRICS

    return sum(len(series) for series in EMITTED_METRICS.values())


def fixed_costs(template: dict[str, Any]) -> list[tuple[str, str, float]]:
    """(what, how many, USD per month) of everything billed with no traffic at all."""
    alarms, metrics = alarm_metrics(template)
    series = custom_metric_series()
    rows = [
        (
            f"CloudWatch alarms ({alarms} alarms)",
            f"{metrics} alarm metrics",
            metrics * PRICES["alarm_metric"],
        ),
        ("CloudWatch custom metric series (EMF)", f"{series} series", series * PRICES["custom_metric"]),
    ]
    dashboards = len(_resources(template, "AWS::CloudWatch::Dashboard"))
    rows.append(("CloudWatch dashboard", str(dashboards), dashboards * PRICES["dashboard"]))
    keys = len(_resources(template, "AWS::KMS::Key"))
    rows.append(("KMS key (alert topic)", str(keys), keys * PRICES["kms_key"]))
    fns = functions(template)
    schedule = scheduled_runs_per_month(template)
    scheduler_runs = sum(n for e, n in schedule.items() if e.startswith("rate"))
    scheduler = scheduler_runs * (
        fns["scheduler"]["memory_gb"] * 1.0 * PRICES["lambda_gb_s"] + PRICES["lambda_request"]
    )
    rows.append(("consolidation scheduler runs (1 s each)", f"{scheduler_runs:,.0f} runs", scheduler))
    rows.append(("daily cost report (Cost Explorer API)", "30 requests", 30 * PRICES["ce_request"]))
    for domain in _resources(template, "AWS::OpenSearchService::Domain"):
        cluster = domain["ClusterConfig"]
        data = cluster["InstanceCount"] * INSTANCE_HOUR[cluster["InstanceType"]] * HOURS
        rows.append(
            (f"OpenSearch data nodes ({cluster['InstanceType']})", str(cluster["InstanceCount"]), data)
        )
        if cluster.get("DedicatedMasterEnabled"):
            masters = cluster["DedicatedMasterCount"] * INSTANCE_HOUR[cluster["DedicatedMasterType"]] * HOURS
            rows.append(
                (
                    f"OpenSearch dedicated masters ({cluster['DedicatedMasterType']})",
                    str(cluster["DedicatedMasterCount"]),
                    masters,
                )
            )
        gb = domain["EBSOptions"]["VolumeSize"] * cluster["InstanceCount"]
        rows.append(("OpenSearch gp3 storage", f"{gb} GB", gb * PRICES["opensearch_gp3_gb_month"]))
    if _resources(template, "AWS::OpenSearchServerless::Collection"):
        rows.append(
            (
                "OpenSearch Serverless minimum capacity",
                f"{AOSS_MIN_OCU} OCU",
                AOSS_MIN_OCU * PRICES["aoss_ocu_hour"] * HOURS,
            )
        )
    for cluster in _resources(template, "AWS::RDS::DBCluster"):
        floor = float(cluster["ServerlessV2ScalingConfiguration"]["MinCapacity"])
        pause = cluster["ServerlessV2ScalingConfiguration"].get("SecondsUntilAutoPause")
        what = "Aurora Serverless v2 minimum capacity"
        if floor == 0:
            qty = f"0 ACU (pauses after {int(pause) // 60} min idle)" if pause else "0 ACU"
        else:
            qty = f"{floor:g} ACU"
        rows.append((what, qty, floor * PRICES["aurora_acu_hour"] * HOURS))
    secrets = len(_resources(template, "AWS::SecretsManager::Secret"))
    if secrets:
        rows.append(
            ("Secrets Manager secrets (cursor key, database)", str(secrets), secrets * PRICES["secret_month"])
        )
    return rows


def _base_model(model_id: str) -> str:
    return (
        model_id.split(".", 1)[1]
        if model_id.split(".", 1)[0] in ("us", "eu", "apac", "global", "jp", "au", "ca")
        else model_id
    )


def setting(env: dict[str, Any], name: str) -> Any:
    """A function's setting: its variable, or the default it reads when the stack leaves it unset."""
    from stacks.constructs.environment import default_of

    return env.get(f"MEMSTACK_{name.upper()}", default_of(name))


def request_costs(template: dict[str, Any], traffic: Traffic) -> list[tuple[str, str, float]]:
    """(what, monthly volume, USD per month) of the traffic model on this template's functions."""
    fns = functions(template)
    env = fns["api"]["env"]
    month = traffic.requests_per_day * 30
    adds, searches = month * traffic.add_share, month * (1 - traffic.add_share)
    messages = adds * traffic.messages_per_add
    jobs = messages / traffic.consolidation_every

    def model(name: str) -> tuple[float, float]:
        return TOKENS[_base_model(str(setting(env, name)))]

    ex_in, ex_out = model("bedrock_extraction_model")
    sy_in, sy_out = model("bedrock_synthesis_model")
    em_in, _ = model("bedrock_embedding_model")
    dim = int(setting(env, "embedding_dim"))
    coarse = int(setting(env, "coarse_dim"))
    item_kb = (4 * (dim + coarse) + 600) / 1024  # both vectors as float32, plus text and keys
    wru_per_write = -(-item_kb // 1)  # 1 KB units, rounded up
    gb_s = (
        month * traffic.api_seconds * fns["api"]["memory_gb"]
        + messages * traffic.extraction_seconds * fns["extraction"]["memory_gb"]
        + jobs * traffic.consolidation_seconds * fns["consolidation"]["memory_gb"]
    )
    invocations = month + messages / 5 + jobs  # extraction batches of ~5 messages
    embed_tokens = messages * traffic.embed_tokens_per_message + searches * traffic.embed_tokens_per_search
    rows = [
        ("API Gateway requests", f"{month:,.0f}", month * PRICES["apigw_request"]),
        (
            "Lambda compute",
            f"{gb_s:,.0f} GB-s",
            gb_s * PRICES["lambda_gb_s"] + invocations * PRICES["lambda_request"],
        ),
        (
            "Bedrock extraction tokens",
            f"{messages:,.0f} messages",
            messages * (traffic.extraction_tokens[0] * ex_in + traffic.extraction_tokens[1] * ex_out) / 1e6,
        ),
        (
            "Bedrock consolidation tokens",
            f"{jobs:,.0f} jobs",
            jobs * (traffic.consolidation_tokens[0] * sy_in + traffic.consolidation_tokens[1] * sy_out) / 1e6,
        ),
        ("Bedrock embeddings", f"{embed_tokens:,.0f} tokens", embed_tokens * em_in / 1e6),
    ]
    # Writes: the STM turn, the memory extraction makes, the idempotency record; STM marked on consolidation.
    wru = messages * (2 * wru_per_write + 2) + jobs * traffic.consolidation_every
    rru = messages * 20  # neighbour lookups and existence checks
    snapshots = "MEMSTACK_SNAPSHOT_BUCKET" in env
    compact_writes = int(setting(env, "snapshot_compact_writes"))
    # The packed snapshot a cold container loads: the full vector, text and columns of each memory.
    snapshot_mb = traffic.memories_per_user * (4 * dim + 800) / 1e6
    if snapshots:
        # dynamodb store, counted as if every search were a cold container's first (the most it
        # reads): META, the write log since the stored snapshot (half a compaction interval on
        # average) and the items it names; the snapshot itself from S3 (scripts/small_tier_limit.py)
        rru += searches * (2 + compact_writes / 2 * -(-item_kb // 4))
    data_gb = traffic.users * traffic.memories_per_user * item_kb / 1024 / 1024
    rows.append(
        (
            "DynamoDB reads and writes",
            f"{wru:,.0f} WRU, {rru:,.0f} RRU",
            wru * PRICES["ddb_wru"] + rru * PRICES["ddb_rru"],
        )
    )
    if "MEMSTACK_MEMORIES_TABLE" in env:
        rows.append(
            (
                "DynamoDB storage + PITR (memories)",
                f"{data_gb:.1f} GB",
                data_gb * (PRICES["ddb_gb_month"] + PRICES["ddb_pitr_gb_month"]),
            )
        )
    if snapshots:
        gets = searches * -(-snapshot_mb // 8.388608)  # 8 MiB ranges
        puts = messages / compact_writes
        stored_gb = traffic.users * snapshot_mb / 1000
        rows.append(
            (
                "S3 snapshots (GETs, PUTs, storage)",
                f"{gets:,.0f} GET, {puts:,.0f} PUT, {stored_gb:.2f} GB",
                gets * PRICES["s3_get"] + puts * PRICES["s3_put"] + stored_gb * PRICES["s3_gb_month"],
            )
        )
    rows.append(
        ("SQS requests", f"{messages * 4 + jobs * 4:,.0f}", (messages + jobs) * 4 * PRICES["sqs_request"])
    )
    log_gb = invocations * traffic.log_bytes_per_invocation / 1e9
    rows.append(("CloudWatch Logs ingestion", f"{log_gb:.2f} GB", log_gb * PRICES["logs_gb"]))
    rows.append(("X-Ray traces", f"{month:,.0f}", month * PRICES["xray_trace"]))
    return rows


# ----------------------------------------------------------------------- output
def table(rows: list[tuple[str, str, float]], title: str) -> str:
    total = sum(usd for _, _, usd in rows)
    lines = [f"| {title} | quantity | USD / month |", "|---|---|---|"]
    lines += [f"| {what} | {qty} | {usd:,.2f} |" for what, qty, usd in rows]
    lines.append(f"| **total** | | **{total:,.2f}** |")
    return "\n".join(lines)


def synth(tier: str, workdir: Path, **context: Any) -> dict[str, Any]:
    from stacks.memstack_stack import create_app

    layer = workdir / "layer"
    if not layer.exists():
        shutil.copytree(ROOT / "layers" / "memstack", layer / "python" / "memstack")
    app, stack = create_app({"tier": tier, "layer_dir": str(layer), **context}, outdir=str(workdir / tier))
    return dict(app.synth().get_stack_by_name(stack.stack_name).template)


def main(titles: list[str]) -> int:
    """Every tier's tables, or only the sections titled ``titles`` ("medium", "large", ...)."""
    wanted = set(titles)
    sections = [(tier, tier, {}) for tier in ("small", "medium", "large")] + list(VARIANTS)
    unknown = wanted - {title for title, _, _ in sections}
    if unknown:
        print(f"unknown sections: {sorted(unknown)}; known: {[t for t, _, _ in sections]}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        for title, tier, context in sections:
            if wanted and title not in wanted:
                continue
            template = synth(tier, Path(tmp), **context)
            print(f"### {title}\n")
            print(table(fixed_costs(template), "fixed (no traffic)") + "\n")
            if not context:  # the traffic model is per tier; a variant changes the fixed part
                traffic = TRAFFIC[tier]
                print(
                    table(
                        request_costs(template, traffic),
                        f"traffic: {traffic.requests_per_day:,} requests/day",
                    )
                )
                print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
