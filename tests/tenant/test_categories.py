"""A tenant's own categories: matched like the built-in lexicon; the offline extractor files under them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from memstack.adapters.llm.rules.extractor import RuleExtractor
from memstack.domain.categories import Lexicon, lexicon_for
from memstack.domain.tenant.config import TenantConfig
from memstack.domain.tenant.guidance import category_descriptions, guidance_of
from memstack.models import Kind, Message
from memstack.ports.llm import CategoryChoice, Guidance

PETS = CategoryChoice("pets", "the user's pets and their care", ("dog", "vet", "litter box"))
HEALTH_ALIKE = CategoryChoice("wellbeing", "how the user feels", ("doctor",))


def said(text: str) -> Message:
    return Message(id="m1", speaker="Maya", content=text, timestamp=datetime(2026, 3, 1, tzinfo=UTC))


def test_keywords_match_with_inflections_phrases_and_the_names_words() -> None:
    lexicon = Lexicon([PETS])
    assert lexicon.categorise("Both dogs had their shots") == "pets"  # "dog" -> "dogs"
    assert lexicon.categorise("She cleaned the litter box") == "pets"  # a phrase
    assert lexicon.categorise("Her pets are noisy") == "pets"  # the name's own word
    assert lexicon.categorise("She is flying to Lisbon") == "travel"  # the built-in ones still file
    assert Lexicon([PETS], built_in=False).categorise("She is flying to Lisbon") is None


def test_a_tie_goes_to_the_tenants_own_category() -> None:
    text = "I saw the doctor today"  # "doctor": built-in health, and the tenant's wellbeing
    assert Lexicon().categorise(text) == "health"
    assert Lexicon([HEALTH_ALIKE]).categorise(text) == "wellbeing"


def test_the_fallback_is_a_built_in_category_only_where_the_tenant_keeps_them() -> None:
    assert Lexicon().fallback(Kind.PREFERENCE) == "preferences"
    assert Lexicon([PETS]).fallback(Kind.FACT) == "personal_details"
    assert Lexicon([PETS], built_in=False).fallback(Kind.FACT) is None
    assert lexicon_for(Guidance(custom=(PETS,))) is lexicon_for(Guidance(custom=(PETS,)))  # kept, not rebuilt


def test_the_offline_extractor_files_memories_under_the_tenants_categories() -> None:
    extractor = RuleExtractor()
    message = said("I took my dog Biscuit to the vet, and I started learning the cello.")
    default = extractor.extract(message, [], [])
    assert [o.category for o in default] == ["personal_details", "educational"]

    extend = Guidance(custom=(PETS,))
    ops = extractor.extract(message, [], [], extend)
    by_text = {o.content: o.category for o in ops if o.op == "ADD"}
    assert [c for t, c in by_text.items() if "dog" in t] == ["pets"], by_text
    assert [c for t, c in by_text.items() if "cello" in t] == ["educational"], by_text

    replace = Guidance(custom=(PETS,), built_in=False)
    ops = extractor.extract(message, [], [], replace)
    assert {o.category for o in ops if o.op == "ADD"} == {"pets", None}  # never a built-in one


def test_a_configuration_gives_guidance_and_affinity_descriptions() -> None:
    config = TenantConfig.model_validate(
        {
            "categories": {
                "mode": "replace",
                "custom": [{"name": "pets", "description": "the user's pets", "keywords": ["dog"]}],
            },
            "extraction": {"instructions": "only pets"},
        }
    )
    assert guidance_of(config) == Guidance(
        custom=(CategoryChoice("pets", "the user's pets", ("dog",)),),
        built_in=False,
        instructions="only pets",
    )
    assert category_descriptions(config) == ("the user's pets (pets)",)
    assert category_descriptions(TenantConfig()) is None


def test_category_affinity_measures_against_the_tenants_categories(tmp_path: Any) -> None:
    from datetime import UTC, datetime

    from memstack.domain.retrieval.types import SearchRequest
    from memstack.factory import build_service
    from memstack.settings import load_settings

    service = build_service(load_settings(data_dir=tmp_path, embedder="hashing"))
    try:
        asked: list[tuple[str, ...] | None] = []
        prototypes = service.retriever.categories
        real = prototypes.of
        prototypes.of = lambda d: asked.append(d) or real(d)  # type: ignore[method-assign]
        service.add("t1", "u1", [Message(content="My dog Biscuit loves the beach.")], infer=False)
        service.search(SearchRequest("t1", "u1", "what pet do I have", explain=True))
        service.tenant_configs.replace(
            "t1",
            {"categories": {"custom": [{"name": "pets", "description": "the user's pets"}]}},
            datetime.now(UTC),
        )
        result = service.search(SearchRequest("t1", "u1", "what pet do I have", explain=True))
        assert asked[0] is None  # no configuration: the built-in descriptions
        assert asked[1] is not None and asked[1][-1] == "the user's pets (pets)" and len(asked[1]) == 16
        variant = real(asked[1])
        assert variant.vectors().shape[0] == 16 and real(asked[1]) is variant  # embedded once, kept
        assert "category" in result.hits[0].stages  # the affinity the explain view shows
    finally:
        service.close()
