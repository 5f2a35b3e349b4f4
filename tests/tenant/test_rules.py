"""The tenant's ignore / only rules and categories, held to every extractor's result (domain.tenant.rules)."""

from __future__ import annotations

from typing import Any

import pytest
from memstack.domain.tenant.config import TenantConfig
from memstack.domain.tenant.rules import screen
from memstack.models import Kind
from memstack.ports.llm import ExtractionOp

PETS = {"name": "pets", "description": "the user's pets", "keywords": ["dog", "vet"]}


def config(**extraction: Any) -> TenantConfig:
    return TenantConfig.model_validate({"categories": {"custom": [PETS]}, "extraction": extraction})


def add(content: str, category: str | None = None, op: str = "ADD") -> ExtractionOp:
    return ExtractionOp(
        op=op, content=content, category=category, kind=Kind.FACT, target_id="t" if op != "ADD" else None
    )


ASTHMA = add("Maya was diagnosed with asthma.", "health")
ASTHMA_MISFILED = add("Maya was diagnosed with asthma by her doctor.", "personal_details")
CELLO = add("Maya plays the cello.", "hobbies")
PASSWORD = add("Maya's bank password is hunter2.", "financial")
DOG = add("Maya's dog Biscuit saw the vet.", "pets")


def contents(ops: list[ExtractionOp]) -> list[str | None]:
    return [o.content for o in ops]


def test_ignore_drops_by_category_by_what_the_words_are_about_and_by_keyword() -> None:
    rules = config(ignore={"categories": ["health"], "keywords": ["password"]})
    kept = screen(rules, [ASTHMA, ASTHMA_MISFILED, CELLO, PASSWORD, DOG])
    # The misfiled one goes too: its words ("diagnosed", "doctor") are about health.
    assert contents(kept) == [CELLO.content, DOG.content]


def test_a_contradiction_is_a_write_held_to_the_same_rules() -> None:
    rules = config(ignore={"categories": ["health"]}, only={"categories": ["pets", "health", "hobbies"]})
    never_ill = add("Maya has never had asthma.", "health", op="CONFLICT")
    no_dog = add("Maya has never had a dog.", "relationships", op="CONFLICT")
    moved = add("Maya never lived in Porto.", "personal_details", op="CONFLICT")
    kept = screen(rules, [never_ill, no_dog, moved])
    # ignored (health); kept, its words being about the tenant's pets; named by neither rule
    assert [(o.op, o.content) for o in kept] == [("CONFLICT", no_dog.content)]


def test_only_keeps_what_it_names_and_forgetting_always_passes() -> None:
    rules = config(only={"categories": ["pets"], "keywords": ["cello"]})
    delete = ExtractionOp(op="DELETE", target_id="m1")
    none = ExtractionOp(op="NONE", target_id="m2")
    update = add("Maya moved to Porto.", "personal_details", op="UPDATE")
    kept = screen(rules, [ASTHMA, CELLO, PASSWORD, DOG, delete, none, update])
    assert [(o.op, o.content) for o in kept] == [
        ("ADD", CELLO.content),
        ("ADD", DOG.content),
        ("DELETE", None),
        ("NONE", None),
    ]


def test_a_category_the_tenant_does_not_have_is_filed_again() -> None:
    replace = TenantConfig.model_validate({"categories": {"mode": "replace", "custom": [PETS]}})
    [dog, cello] = screen(replace, [add("Maya's dog Biscuit saw the vet.", "relationships"), CELLO])
    assert dog.category == "pets" and cello.category is None  # no tenant category speaks to the cello
    [kept] = screen(config(), [add("Maya's dog is called Biscuit.", "pets")])
    assert kept.category == "pets"  # a category the tenant has stays
    # A model that filed nothing: filed by the tenant's words where it has categories of its own.
    [dog] = screen(config(), [add("Maya's dog is called Biscuit.")])
    assert dog.category == "pets"
    assert screen(TenantConfig(), [add("Maya's dog is called Biscuit.")])[0].category is None


@pytest.mark.parametrize("op", [ASTHMA, CELLO, PASSWORD])
def test_no_rules_change_nothing(op: ExtractionOp) -> None:
    assert screen(TenantConfig(), [op]) == [op]
