"""Context handling and the layer build's inputs: fast, no synth."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.build_layer import RUNTIME_PROVIDED, layer_requirements
from stacks.config import ConfigError, StackConfig

ROOT = Path(__file__).resolve().parents[2]


def _config(**context: object) -> StackConfig:
    from aws_cdk import App

    from stacks.memstack_stack import cdk_json_context

    return StackConfig.from_context(App(context={**cdk_json_context(), **context}).node)


def test_tier_defaults_come_from_cdk_json() -> None:
    small, large = _config(tier="small"), _config(tier="large")
    assert small.store_backend == "dynamodb" and large.store_backend == "opensearch"
    assert large.opensearch_master_nodes == 3 and large.opensearch_zones == 3
    assert small.reranker == "none"


def test_command_line_strings_are_converted_and_override_the_tier() -> None:
    config = _config(
        tier="medium",
        opensearch_volume_gb="120",
        opensearch_serverless="true",
        retrieval_latency_p95_ms="350",
        bedrock_rerank_model_arn="arn:aws:bedrock:x::foundation-model/r",
    )
    assert config.opensearch_volume_gb == 120
    assert config.opensearch_serverless is True
    assert config.retrieval_latency_p95_ms == 350.0
    assert config.reranker == "bedrock"


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"tier": "huge"}, "tier"),
        ({"tier": "medium", "opensearch_data_nodes": "3"}, "multiple of opensearch_zones"),
        ({"api_rate_limit": "fast"}, "api_rate_limit"),
        ({"opensearch_serverless": "maybe"}, "opensearch_serverless"),
        ({"coarse_dim": "2048"}, "coarse_dim"),
        ({"coarse_dim": "256"}, "not Matryoshka-trained"),
        ({"api_gateway_logging_role": "maybe"}, "api_gateway_logging_role"),
        ({"settings": '{"rrf_k": 0}'}, "MEMSTACK_RRF_K"),
        ({"settings": '{"no_such_thing": 1}'}, "no_such_thing"),
    ],
)
def test_bad_context_is_one_clear_error(context: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _config(**context)


def test_missing_layer_stops_synth_with_the_fix(tmp_path: Path) -> None:
    from stacks.memstack_stack import create_app

    with pytest.raises(ConfigError, match="make layer"):
        create_app({"layer_dir": str(tmp_path / "nowhere")}, outdir=str(tmp_path / "out"))


def test_missing_handler_is_named(tmp_path: Path) -> None:
    from stacks.memstack_stack import create_app

    layer = tmp_path / "layer" / "python" / "memstack"
    layer.mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"lambdas/api/handler\.py"):
        create_app(
            {"layer_dir": str(layer.parent.parent), "lambdas_dir": str(tmp_path / "lambdas")},
            outdir=str(tmp_path / "out"),
        )


def test_layer_takes_runtime_pins_without_laptop_or_runtime_provided_packages(tmp_path: Path) -> None:
    pins = layer_requirements(ROOT / "requirements-layer.txt")
    names = {p.split("==")[0].lower() for p in pins}
    assert "pydantic" in names and "aws-lambda-powertools" in names
    assert not names & set(RUNTIME_PROVIDED)
    assert not names & {"torch", "sentence-transformers"}
    assert all("==" in p for p in pins)  # pinned, as in the lock
    reqs = tmp_path / "r.txt"
    reqs.write_text("-r other.txt\nnumpy==2.0.0  # comment\nboto3==1.0\n\nbotocore[crt]==1.0\n")
    assert layer_requirements(reqs) == ["numpy==2.0.0"]


def test_tier_defaults_match_their_embedding_model() -> None:
    """Item 5: Titan V2 is not Matryoshka-trained, so no tier may configure a prefix of it."""
    from memstack.adapters.embedders.bedrock import prefix_is_meaningful

    for tier in ("small", "medium", "large"):
        config = _config(tier=tier)
        assert config.coarse_dim == config.embedding_dim or prefix_is_meaningful(
            config.bedrock_embedding_model
        )
    cohere = _config(bedrock_embedding_model="cohere.embed-v4:0", coarse_dim="256")
    assert cohere.coarse_dim == 256  # a Matryoshka model may use a prefix


def test_every_function_setting_comes_from_the_one_config() -> None:
    """Item 4: values derive from StackConfig (+ resources), including the schedule's rate."""
    from stacks.constructs.environment import deployment_settings, function_environment, function_reads

    config = _config(consolidation_rate_minutes="15", settings='{"rrf_k": 7, "index_date_in_text": false}')
    settings = deployment_settings(config, {"stm_table": "stm", "aws_region": "eu-west-1"})
    env = function_environment(settings, function_reads(config, "consolidation_scheduler"))
    assert env["MEMSTACK_CONSOLIDATION_INTERVAL_SECONDS"] == "900.0"
    assert env["MEMSTACK_RRF_K"] == "7" and env["MEMSTACK_STM_TABLE"] == "stm"
    assert env["MEMSTACK_INDEX_DATE_IN_TEXT"] == "false"  # how Settings reads a bool back
    # A value equal to its default is left out: the function reads that very default (issue 23).
    assert "MEMSTACK_RRF_K" in env and "MEMSTACK_BM25_CANDIDATES" not in env


def test_each_function_reads_whole_sections_of_the_settings_so_a_new_knob_reaches_it() -> None:
    """Issue 23: the environment is derived from the sections of Settings, not from lists of names."""
    from memstack.section import Section
    from memstack.settings import Settings

    from stacks.constructs import environment as env

    # Every section is read by some function or is a local process's (serve, MCP, an OpenAI server).
    sections = {n for n, f in Settings.model_fields.items() if isinstance(f.annotation, type)}
    sections = {n for n in sections if issubclass(Settings.model_fields[n].annotation, Section)}  # type: ignore[arg-type]
    lambda_sections = {
        *env.SERVICE_SECTIONS,
        *(s for own in env.FUNCTION_SECTIONS.values() for s in own),
        *(s for own in env.STORE_SECTIONS.values() for s in own),
        *(s for own, _ in env.OWN_READS.values() for s in own),
    }
    assert sections == lambda_sections | set(env.NOT_IN_LAMBDA), sections ^ (
        lambda_sections | set(env.NOT_IN_LAMBDA)
    )
    assert not lambda_sections & set(env.NOT_IN_LAMBDA)

    # A knob of a section reaches the functions that read that section, whatever its name.
    config = _config(settings='{"consolidation_group_size": 7, "outbox_sweep_limit": 50, "max_top_k": 20}')
    settings = env.deployment_settings(config, {})
    reads = {fn: env.function_environment(settings, env.function_reads(config, fn)) for fn in env.FUNCTIONS}
    for fn in ("api", "extraction_worker", "consolidation_scheduler", "consolidation_worker"):
        assert reads[fn]["MEMSTACK_CONSOLIDATION_GROUP_SIZE"] == "7", fn
    assert [fn for fn in env.FUNCTIONS if "MEMSTACK_OUTBOX_SWEEP_LIMIT" in reads[fn]] == [
        "consolidation_scheduler"
    ]
    assert [fn for fn in env.FUNCTIONS if "MEMSTACK_MAX_TOP_K" in reads[fn]] == ["api"]
    # A local process's setting never lands in a function's environment (API keys in plain text), and
    # one no function reads is refused by name rather than dropped without a word.
    for fn in env.FUNCTIONS:
        assert not {"api_keys", "default_tenant", "postgres_dsn"} & set(env.function_reads(config, fn)), fn
    for unread in ('{"api_keys": "k=t"}', '{"server_connection_limit": 50}', '{"postgres_schema": "x"}'):
        with pytest.raises(ConfigError, match="no function of this stack reads"):
            env.deployment_settings(_config(settings=unread), {})
    env.deployment_settings(_config(store_backend="postgres", settings='{"postgres_schema": "x"}'), {})


def test_function_settings_ignore_the_synth_machines_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from stacks.constructs.environment import deployment_settings

    monkeypatch.setenv("MEMSTACK_RRF_K", "99")
    assert deployment_settings(_config(), {}).retrieval.rrf_k != 99


def test_settings_cannot_point_functions_at_a_table_the_stack_did_not_grant() -> None:
    from stacks.constructs.environment import deployment_settings

    with pytest.raises(ConfigError, match="memories_table"):
        deployment_settings(_config(settings='{"memories_table": "elsewhere"}'), {"memories_table": "t"})
