"""The tenant configuration document and its cached, versioned reads and writes (domain.tenant)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from memstack.domain.tenant.config import SECRET_MASK, Secret, TenantConfig, merge_patch
from memstack.domain.tenant.configs import TenantConfigs
from memstack.errors import Conflict, PreconditionFailed, ValidationFailed
from memstack.ports.tenant_config import NO_CONFIG, StoredConfig

NOW = datetime(2026, 3, 1, tzinfo=UTC)
PETS = {"name": "pets", "description": "the user's pets", "keywords": ["dog", "cat"]}


class DictStore:
    """The port in a dict, counting reads; ``race`` makes the next put lose once."""

    def __init__(self) -> None:
        self.rows: dict[str, StoredConfig] = {}
        self.reads = 0
        self.race: dict[str, Any] | None = None

    def get(self, tenant: str) -> StoredConfig:
        self.reads += 1
        return self.rows.get(tenant, NO_CONFIG)

    def put(
        self, tenant: str, document: dict[str, Any], expected_version: int, now: datetime
    ) -> StoredConfig:
        if self.race is not None:  # another writer lands first
            theirs, self.race = self.race, None
            self.put(tenant, theirs, self.rows.get(tenant, NO_CONFIG).version, now)
        if self.rows.get(tenant, NO_CONFIG).version != expected_version:
            raise Conflict("stale")
        self.rows[tenant] = StoredConfig(document, expected_version + 1, now)
        return self.rows[tenant]


def test_defaults_are_the_built_in_categories_and_no_rules() -> None:
    config = TenantConfig()
    assert len(config.categories.names()) == 15 and config.stored() == {}
    public = config.public()
    assert public["categories"] == {"mode": "extend", "custom": []}
    assert public["extraction"]["instructions"] == ""


@pytest.mark.parametrize(
    ("document", "field", "words"),
    [
        ({"categories": {"custom": [{**PETS, "name": "Pets!"}]}}, "categories.custom[0].name", "pattern"),
        ({"categories": {"custom": [PETS, PETS]}}, "categories", "repeated: pets"),
        ({"categories": {"custom": [{**PETS, "name": "health"}]}}, "categories", "already is a built-in"),
        ({"categories": {"mode": "replace"}}, "categories", "at least one custom category"),
        ({"extraction": {"ignore": {"categories": ["pets"]}}}, "extraction", "not a category of this tenant"),
        ({"extraction": {"instructions": "x" * 4001}}, "extraction.instructions", "4000"),
        ({"colour": "red"}, "colour", "Extra inputs"),
        (
            {"categories": {"custom": [{"name": "a", "description": ""}]}},
            "categories.custom[0].description",
            "",
        ),
    ],
)
def test_a_bad_document_says_what_is_wrong_where(document: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(ValidationFailed) as caught:
        TenantConfig.checked(document)
    detail = caught.value.details[0]
    assert detail["field"] == field and words in detail["message"], caught.value.details
    assert caught.value.message.startswith(f"{field}: ")


def test_a_document_over_the_size_limit_is_refused() -> None:
    many = [{"name": f"c{i}", "description": "d" * 300, "keywords": ["k" * 60] * 50} for i in range(30)]
    with pytest.raises(ValidationFailed, match="at most 65536"):
        TenantConfig.checked({"categories": {"custom": many}})


def test_merge_patch_is_rfc_7386() -> None:
    target = {"a": {"b": 1, "c": [1, 2]}, "d": 2}
    assert merge_patch(target, {"a": {"b": None, "c": [3]}, "e": {"f": None}}) == {
        "a": {"c": [3]},
        "d": 2,
        "e": {},
    }
    assert merge_patch(target, {"d": None}) == {"a": {"b": 1, "c": [1, 2]}}
    assert target == {"a": {"b": 1, "c": [1, 2]}, "d": 2}  # untouched


def test_a_secret_is_stored_as_given_and_shown_masked() -> None:
    class WithSecret(TenantConfig):
        secret: Secret | None = None

    config = WithSecret.model_validate({"secret": "s3cr3t"})
    assert config.stored()["secret"] == "s3cr3t"
    assert config.public()["secret"] == SECRET_MASK


def test_reads_are_cached_for_the_ttl_and_a_write_replaces_the_copy() -> None:
    store, clock = DictStore(), [0.0]
    configs = TenantConfigs(store, ttl_seconds=15, clock=lambda: clock[0])
    assert configs.current("acme") == TenantConfig() and store.reads == 1
    configs.current("acme")
    assert store.reads == 1  # cached
    configs.replace("acme", {"extraction": {"instructions": "no health data"}}, NOW)
    reads = store.reads
    assert configs.current("acme").extraction.instructions == "no health data"
    assert store.reads == reads  # the write put its result in the cache

    # Another process writes: this one sees it once its copy is older than the TTL.
    store.rows["acme"] = StoredConfig({"extraction": {"instructions": "other"}}, 9, NOW)
    clock[0] = 14.0
    assert configs.current("acme").extraction.instructions == "no health data"
    clock[0] = 16.0
    assert configs.current("acme").extraction.instructions == "other"


def test_patch_merges_into_what_is_stored_and_checks_the_result() -> None:
    store = DictStore()
    configs = TenantConfigs(store)
    configs.replace("acme", {"categories": {"custom": [PETS]}}, NOW)
    patched = configs.patch("acme", {"extraction": {"ignore": {"categories": ["pets"]}}}, NOW)
    assert patched.version == 2 and patched.config.categories.custom[0].name == "pets"
    assert store.rows["acme"].document["extraction"] == {"ignore": {"categories": ["pets"]}}
    # A patch whose result is invalid changes nothing.
    with pytest.raises(ValidationFailed, match="not a category"):
        configs.patch("acme", {"categories": None}, NOW)
    assert store.rows["acme"].version == 2
    # null resets a section to its defaults.
    reset = configs.patch("acme", {"extraction": None}, NOW)
    assert reset.config.extraction.ignore.categories == [] and "extraction" not in store.rows["acme"].document


def test_if_version_refuses_a_changed_configuration_and_a_lost_race_is_retried() -> None:
    store = DictStore()
    configs = TenantConfigs(store)
    configs.replace("acme", {"categories": {"custom": [PETS]}}, NOW)
    with pytest.raises(PreconditionFailed, match="version 1, not 0"):
        configs.patch("acme", {"extraction": {"instructions": "x"}}, NOW, if_version=0)
    # Without If-Match, a write that lost the race is applied again on the winner's document.
    store.race = {"categories": {"custom": [PETS, {**PETS, "name": "plants"}]}}
    patched = configs.patch("acme", {"extraction": {"instructions": "x"}}, NOW)
    assert patched.version == 3
    assert [c.name for c in patched.config.categories.custom] == ["pets", "plants"]
    assert patched.config.extraction.instructions == "x"
    # With If-Match, the lost race is the caller's to resolve.
    store.race = {}
    with pytest.raises(PreconditionFailed):
        configs.patch("acme", {"extraction": {"instructions": "y"}}, NOW, if_version=3)


def test_a_section_from_a_newer_version_is_ignored_on_read() -> None:
    store = DictStore()
    store.rows["acme"] = StoredConfig({"future": {"x": 1}, "extraction": {"instructions": "i"}}, 1, NOW)
    assert TenantConfigs(store).current("acme").extraction.instructions == "i"
