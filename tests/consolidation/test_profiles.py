"""Cross-session profile memories: one per person and category, citing every item, kept current."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from memstack.domain.consolidation.profiles import PROFILE, profile_text
from memstack.factory import build_service
from memstack.models import Category, MemoryFilters, MemoryRecord, Message, Tier
from memstack.service import MemoryService
from memstack.settings import load_settings

T, U = "t", "u"
DAY1 = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[MemoryService]:
    svc = build_service(load_settings(data_dir=tmp_path / "data", embedder="hashing", profile_memories=True))
    try:
        yield svc
    finally:
        svc.close()


def test_profiles_are_off_unless_switched_on(tmp_path: Path) -> None:
    svc = build_service(load_settings(data_dir=tmp_path / "off", embedder="hashing"))
    try:
        assert svc.profiles is None
    finally:
        svc.close()


def say(service: MemoryService, msgs: list[tuple[str, str, str]], when: datetime) -> None:
    service.add(
        T,
        U,
        [
            Message(id=mid, speaker=speaker, content=text, timestamp=when + timedelta(minutes=i))
            for i, (mid, speaker, text) in enumerate(msgs)
        ],
        infer=True,
        sync=True,
    )


def profiles(service: MemoryService, current: bool = True) -> list[MemoryRecord]:
    records, _ = service.store.list(
        T, U, MemoryFilters(tier=Tier.LTM, include_superseded=not current), 500, None
    )
    return [r for r in records if r.metadata.get("consolidation") == PROFILE]


def test_profile_lists_a_persons_items_across_sessions_and_stays_current(service: MemoryService) -> None:
    say(service, [("a1", "Mel", "I went swimming with the kids."), ("b1", "Cara", "I love my job.")], DAY1)
    say(service, [("a2", "Mel", "I tried pottery for the first time.")], DAY1 + timedelta(days=7))
    report = service.consolidate(T, U, now=DAY1 + timedelta(days=8))
    hobbies = [p for p in profiles(service) if p.category == Category.HOBBIES]
    assert report["profiles"]["written"] >= 1 and len(hobbies) == 1
    mel = hobbies[0]
    assert mel.content.startswith("Mel — hobbies and activities: ")
    assert "pottery" in mel.content and "swimming with the kids" in mel.content
    # Cites every turn its items came from, newest first; nothing of Cara's.
    assert mel.source_ids == ["a2", "a1"]

    # Nothing new: nothing written.
    again = service.consolidate(T, U, now=DAY1 + timedelta(days=9))
    assert again["profiles"]["written"] == again["profiles"]["updated"] == 0

    # A new item in a later session: a new version of the same profile, citing it too.
    say(service, [("a3", "Mel", "We went camping in the forest.")], DAY1 + timedelta(days=20))
    later = service.consolidate(T, U, now=DAY1 + timedelta(days=21))
    assert later["profiles"]["updated"] >= 1
    (current,) = [p for p in profiles(service) if p.category == Category.HOBBIES]
    assert current.replaces_id == mel.id and current.version == mel.version + 1
    assert "camping" in current.content and current.source_ids[0] == "a3"
    assert set(current.source_ids) == {"a1", "a2", "a3"}
    assert mel.id in {p.id for p in profiles(service, current=False)}


def search(service: MemoryService, query: str, top_k: int) -> list[MemoryRecord]:
    from memstack.domain.retrieval.types import SearchRequest

    hits = service.search(SearchRequest(tenant=T, user_id=U, query=query, top_k=top_k)).hits
    return [h.record for h in hits]


def test_a_profile_is_found_right_after_the_memories_it_lists(service: MemoryService) -> None:
    # Like a summary (stage 8): never above what it was built from when the search found that,
    # else its other cited turns would take the evidence's places.
    say(
        service,
        [
            ("a1", "Mel", "I went swimming with the kids."),
            ("a2", "Mel", "I tried pottery for the first time."),
        ],
        DAY1,
    )
    service.consolidate(T, U, now=DAY1 + timedelta(days=1))
    found = search(service, "hobbies and activities", 10)  # its label: by its own evidence it ranks first
    at = [i for i, r in enumerate(found) if r.metadata.get("consolidation") == PROFILE]
    assert len(at) == 1 and at[0] > 0
    above = found[: at[0]]
    assert {s for r in above for s in r.source_ids} == {"a1", "a2"}  # it brings no turn of its own


def test_a_profile_is_the_answer_when_what_it_lists_is_gone(service: MemoryService) -> None:
    say(
        service,
        [
            ("a1", "Mel", "I went swimming with the kids."),
            ("a2", "Mel", "I tried pottery for the first time."),
            ("b1", "Cara", "I love my job."),
        ],
        DAY1,
    )
    service.consolidate(T, U, now=DAY1 + timedelta(days=1))
    (profile,) = profiles(service)
    # What it lists is gone (expired, say), not Cara's: it is then the best evidence there is.
    for record in service.store.list(T, U, MemoryFilters(), 500, None)[0]:
        if record.id != profile.id and {"a1", "a2"} & set(record.source_ids):
            service.delete(T, U, record.id)
    found = search(service, "Mel hobbies and activities", 3)
    assert found[0].id == profile.id and len(found) > 1


def test_one_item_is_not_a_profile_and_the_switch_turns_them_off(service: MemoryService) -> None:
    say(service, [("a1", "Mel", "I went swimming with the kids.")], DAY1)
    assert service.consolidate(T, U, now=DAY1 + timedelta(days=1))["profiles"]["written"] == 0
    service.profiles = None
    say(service, [("a2", "Mel", "I tried pottery for the first time.")], DAY1 + timedelta(days=2))
    assert "profiles" not in service.consolidate(T, U, now=DAY1 + timedelta(days=3))
    assert profiles(service) == []


def test_profile_text_takes_the_name_off_each_item() -> None:
    items = [
        MemoryRecord(tenant=T, user_id=U, content="Mel went swimming.", category=Category.HOBBIES),
        MemoryRecord(tenant=T, user_id=U, content="Mel's kids made pottery!", category=Category.HOBBIES),
        MemoryRecord(tenant=T, user_id=U, content="Mel went swimming.", category=Category.HOBBIES),
    ]
    assert profile_text("Mel", Category.HOBBIES, items) == (
        "Mel — hobbies and activities: went swimming; kids made pottery."
    )


def test_a_refresh_begun_before_the_users_erase_writes_no_profile(service: MemoryService) -> None:
    """The refresh carries its run's fence: a user erased (and back) since it began gets none from it."""
    from memstack.domain.erasure import Erased, Fence

    began = Fence.at(datetime.now(UTC) - timedelta(seconds=30))
    service.erase_user(T, U)
    items = [
        ("a1", "Mel", "I went swimming with the kids."),
        ("a2", "Mel", "I tried pottery for the first time."),
    ]
    say(service, items, DAY1)  # the user is back; this refresh began before the erase
    assert service.profiles is not None
    with pytest.raises(Erased):
        service.profiles.refresh(T, U, DAY1 + timedelta(days=1), fence=began)
    assert profiles(service) == []
    # The same refresh begun now writes it.
    service.profiles.refresh(T, U, DAY1 + timedelta(days=1), fence=Fence.at(datetime.now(UTC)))
    assert [p.category for p in profiles(service)] == [Category.HOBBIES]
