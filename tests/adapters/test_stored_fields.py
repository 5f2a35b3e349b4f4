"""The stored fields both remote stores share: the names DynamoDB projects match what is written."""

from __future__ import annotations

from datetime import UTC, datetime

from memstack.adapters.dynamodb import items
from memstack.adapters.stored_fields import FIELD_NAMES, stored_fields
from memstack.models import Category, MemoryRecord

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_field_names_are_the_keys_of_stored_fields_in_order() -> None:
    record = MemoryRecord(tenant="t", user_id="u", content="c")
    assert tuple(stored_fields(record)) == FIELD_NAMES


def test_the_search_projection_is_every_item_attribute_but_the_coarse_vector() -> None:
    # Every optional value set: to_item leaves out the absent ones.
    record = MemoryRecord(
        tenant="t",
        user_id="u",
        session_id="s",
        category=Category.TRAVEL,
        content="c",
        search_text="st",
        speaker="me",
        event_time=T0,
        superseded_at=T0,
        replaces_id="m0",
        embedding_full=[1.0],
        embedding_coarse=[1.0],
    )
    written = tuple(items.to_item(record))
    assert tuple(a for a in written if a != "emb_coarse") == items.SEARCH_ATTRIBUTES
