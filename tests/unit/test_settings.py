"""Settings: read once from MEMSTACK_*, bad values give one clear error naming the variable."""

from __future__ import annotations

from pathlib import Path

import pytest
from memstack.errors import SettingsError
from memstack.settings import load_settings


def test_defaults_are_the_embedded_offline_configuration() -> None:
    s = load_settings()
    assert (s.store_backend, s.embedder, s.llm, s.queue_backend) == ("embedded", "minilm", "local", "local")
    assert (s.retrieval.rrf_k, s.retrieval.weight_vector, s.retrieval.weight_bm25) == (5, 0.3, 0.7)


def test_environment_is_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEMSTACK_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("MEMSTACK_RRF_K", "60")
    s = load_settings()
    assert s.data_dir == tmp_path and s.retrieval.rrf_k == 60
    assert s.db_path == tmp_path / "memstack.sqlite3"


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("MEMSTACK_RRF_K", "zero", "MEMSTACK_RRF_K"),
        ("MEMSTACK_RRF_K", "0", "greater than or equal to 1"),
        ("MEMSTACK_STORE_BACKEND", "mysql", "MEMSTACK_STORE_BACKEND"),
        ("MEMSTACK_TEMPORAL_BLEND", "1.5", "MEMSTACK_TEMPORAL_BLEND"),
    ],
)
def test_bad_values_give_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, fragment: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert fragment in str(info.value)


def test_inconsistent_values_are_rejected() -> None:
    with pytest.raises(SettingsError, match="coarse_dim"):
        load_settings(embedding_dim=64, coarse_dim=128)


def test_api_keys_parse_and_reject_garbage() -> None:
    assert load_settings().api_key_map() == {"dev-key": "local"}  # the CLI's tenant
    assert load_settings(api_keys="k1=acme, k2=globex").api_key_map() == {"k1": "acme", "k2": "globex"}
    with pytest.raises(SettingsError, match="MEMSTACK_API_KEYS"):
        load_settings(api_keys="no-tenant").api_key_map()


# --- sections -------------------------------------------------------------------------------


def test_the_domain_configs_are_the_sections_with_one_set_of_defaults() -> None:
    from memstack.domain.retrieval.config import RetrievalConfig
    from memstack.domain.sections import ConsolidationConfig, ExtractionConfig

    s = load_settings()
    assert isinstance(s.retrieval, RetrievalConfig) and s.retrieval == RetrievalConfig()
    assert s.consolidation == ConsolidationConfig() and s.extraction == ExtractionConfig()
    # Extraction fuses its neighbours as retrieval fuses (they had drifted to 10 / 0.7 / 0.3).
    e, r = ExtractionConfig(), RetrievalConfig()
    assert (e.rrf_k, e.weight_vector, e.weight_bm25) == (r.rrf_k, r.weight_vector, r.weight_bm25)


@pytest.mark.parametrize(
    ("variable", "value", "where", "expected"),
    [
        ("MEMSTACK_RETRIEVAL_POOL", "50", ("retrieval", "candidate_pool"), 50),
        ("MEMSTACK_SCORE_BIAS", "-1.5", ("retrieval", "score_model", "bias"), -1.5),
        ("MEMSTACK_INDEX_CONTEXT_TURNS", "0", ("ingest", "indexing", "context_turns"), 0),
        ("MEMSTACK_POSTGRES_SCHEMA", "team_a", ("postgres", "schema_name"), "team_a"),
        ("MEMSTACK_CONSOLIDATION_WINDOW_HOURS", "6", ("consolidation", "window_hours"), 6.0),
        ("MEMSTACK_PROFILE_MEMORIES", "true", ("profiles", "enabled"), True),
        ("memstack_max_top_k", "7", ("api", "max_top_k"), 7),  # any case, as before
    ],
)
def test_each_variable_keeps_its_name_and_lands_in_its_section(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, where: tuple[str, ...], expected: object
) -> None:
    monkeypatch.setenv(variable, value)
    node: object = load_settings()
    for step in where:
        node = getattr(node, step)
    assert node == expected


def test_a_shared_name_sets_every_section_that_declares_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSTACK_COARSE_DIM", "64")
    monkeypatch.setenv("MEMSTACK_EXTRACTION_NEIGHBOURS", "4")
    s = load_settings(rrf_k=9)
    dims = {s.embedding.coarse_dim, s.retrieval.coarse_dim, s.ingest.coarse_dim, s.extraction.coarse_dim}
    assert dims | {s.consolidation.coarse_dim, s.profiles.coarse_dim} == {64}
    assert (s.extraction.neighbours, s.consolidation.neighbours) == (4, 4)
    assert (s.retrieval.rrf_k, s.extraction.rrf_k) == (9, 9)


def test_variables_list_every_name_with_its_default_and_values_rebuild_the_settings(tmp_path: Path) -> None:
    from memstack.settings import Settings

    defaults = Settings.variables()
    assert (
        defaults["rrf_k"] == 5
        and defaults["retrieval_pool"] == 100
        and defaults["postgres_schema"] == "memstack"
    )
    assert defaults["score_bias"] == load_settings().retrieval.score_model.bias
    s = load_settings(data_dir=tmp_path, prf_terms=10, openai_api_key="secret", store_backend="dynamodb")
    assert set(s.values()) == set(defaults)
    assert s.updated() == s and s.updated(prf_terms=3).retrieval.prf_terms == 3
    assert s.updated(prf_terms=3).openai.api_key == s.openai.api_key


def test_a_bad_value_in_a_section_names_its_variable() -> None:
    with pytest.raises(SettingsError) as info:
        load_settings(retrieval_pool=0, postgres_schema="Bad-Name")
    assert "MEMSTACK_RETRIEVAL_POOL:" in str(info.value) and "MEMSTACK_POSTGRES_SCHEMA:" in str(info.value)
    with pytest.raises(SettingsError, match="weight_vector \\+ weight_bm25"):
        load_settings(weight_vector=0, weight_bm25=0)


@pytest.mark.parametrize(
    ("client_id", "valid"),
    [
        ("abc123", True),
        ("7lk+Q_2", True),
        ("a" * 128, True),
        ("a" * 129, False),
        ("clïent", False),
        ("", False),
    ],
)
def test_a_cognito_app_client_id_is_what_aws_takes(client_id: str, valid: bool) -> None:
    """AWS's rule is ``[\\w+]{1,128}`` with Java's ASCII ``\\w`` (the pattern is spelled out so the
    settings build without compiling a Unicode automaton at every cold start)."""
    if valid:
        s = load_settings(ui_cognito_client_id=client_id, ui_cognito_region="eu-west-1")
        assert s.api.ui_cognito_client_id == client_id
        return
    with pytest.raises(SettingsError, match="MEMSTACK_UI_COGNITO_CLIENT_ID"):
        load_settings(ui_cognito_client_id=client_id, ui_cognito_region="eu-west-1")
