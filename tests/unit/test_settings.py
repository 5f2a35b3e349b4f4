"""Settings: read once from MEMSTACK_*, bad values give one clear error naming the variable."""

from __future__ import annotations

from pathlib import Path

import pytest
from memstack.errors import SettingsError
from memstack.settings import load_settings


def test_defaults_are_the_embedded_offline_configuration() -> None:
    s = load_settings()
    assert (s.store_backend, s.embedder, s.llm, s.queue_backend) == ("embedded", "minilm", "local", "local")
    assert (s.rrf_k, s.weight_vector, s.weight_bm25) == (5, 0.3, 0.7)


def test_environment_is_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEMSTACK_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("MEMSTACK_RRF_K", "60")
    s = load_settings()
    assert s.data_dir == tmp_path and s.rrf_k == 60
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
