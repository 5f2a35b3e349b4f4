"""What a turn is indexed and embedded with: itself, the turn it answers, its date."""

from __future__ import annotations

from datetime import UTC, datetime

from memstack.domain.indexing import index_turns, turn_text
from memstack.domain.retrieval.types import SearchRequest
from memstack.domain.sections import IndexingConfig
from memstack.factory import build_service
from memstack.models import Message
from memstack.settings import Settings

WHEN = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
BATCH = [
    Message(id="q", speaker="Ana", content="Do you still go swimming?", timestamp=WHEN),
    Message(id="a", speaker="Ben", content="Yes, every Sunday morning!", timestamp=WHEN),
]


def test_plain_indexing_is_the_turn_alone() -> None:
    [first, second] = index_turns(BATCH, IndexingConfig(context_turns=0, date_in_text=False))
    assert first.search_text == first.embed_text == "Ana: Do you still go swimming?"
    assert second.search_text == turn_text(BATCH[1]) == "Ben: Yes, every Sunday morning!"


def test_a_reply_is_indexed_with_the_turn_it_answers_and_its_date() -> None:
    config = IndexingConfig(context_turns=1, date_in_text=True)
    [first, second] = index_turns(BATCH, config)
    assert first.search_text == "Ana: Do you still go swimming?\n(8 May 2023)"
    assert second.search_text == "Do you still go swimming?\nBen: Yes, every Sunday morning!\n(8 May 2023)"
    # Without context_in_embedding the vector is of the turn alone.
    assert second.embed_text == "Ben: Yes, every Sunday morning!"
    embedded = index_turns(BATCH, IndexingConfig(context_turns=1, context_in_embedding=True))
    assert embedded[1].embed_text == "Do you still go swimming?\nBen: Yes, every Sunday morning!"


def test_context_makes_a_reply_findable_but_content_is_unchanged(settings: Settings) -> None:
    plain = build_service(settings.updated(index_context_turns=0))
    contextual = build_service(settings.updated(data_dir=settings.data_dir / "ctx", index_context_turns=1))
    try:
        for svc in (plain, contextual):
            svc.add("t", "u", BATCH, infer=False)
        req = SearchRequest(tenant="t", user_id="u", query="swimming", top_k=5)
        req_ids = [h.record.source_ids[0] for h in contextual.search(req).hits]
        assert "a" in req_ids  # the reply mentions no swimming, its context does
        assert "a" not in [s.id for s in plain.store.bm25_search("t", "u", "swimming", 5, req.filters)]
        [reply] = [h.record for h in contextual.search(req).hits if h.record.source_ids == ["a"]]
        assert reply.content == "Yes, every Sunday morning!"
    finally:
        plain.close()
        contextual.close()


def test_a_long_turn_is_never_context() -> None:
    """A long reply carries its own subject; its words must not drown the next turn's."""
    long_reply = "Here is a long walkthrough of socket error handling. " * 30
    chat = [
        Message(id="u1", role="user", content="How should I handle socket errors?", timestamp=WHEN),
        Message(id="a1", role="assistant", content=long_reply, timestamp=WHEN),
        Message(id="u2", role="user", content="Thanks. Our deadline moved to March 3.", timestamp=WHEN),
    ]
    config = IndexingConfig(context_turns=2, date_in_text=False, context_max_chars=1000, assistant_text=True)
    [_, answer, follow_up] = index_turns(chat, config)
    # The answer keeps the short question it answers; the user's next turn gets no context,
    # and the long turn also cuts off the short one beyond it.
    assert answer.search_text == f"How should I handle socket errors?\n{long_reply}"
    assert follow_up.search_text == "Thanks. Our deadline moved to March 3."
    unlimited = index_turns(
        chat, IndexingConfig(context_turns=2, date_in_text=False, context_max_chars=0, assistant_text=True)
    )
    assert unlimited[2].search_text.startswith("How should I handle socket errors?\n" + long_reply)
    # Later context follows the same rule.
    later = IndexingConfig(
        context_turns=0, context_after=1, date_in_text=False, context_max_chars=1000, assistant_text=True
    )
    after = index_turns(chat, later)
    assert after[0].search_text == "How should I handle socket errors?"
    assert after[1].search_text == f"{long_reply}\nThanks. Our deadline moved to March 3."


CHAT = [
    Message(id="u1", role="user", content="Which cache should I use for sessions?", timestamp=WHEN),
    Message(
        id="a1",
        role="assistant",
        content="Redis is a good fit: keep sessions under a TTL and shard by tenant. " * 20,
        timestamp=WHEN,
    ),
    Message(id="u2", role="user", content="We went with Memcached in the end.", timestamp=WHEN),
    Message(id="a2", role="assistant", content="Which version of Memcached?", timestamp=WHEN),
    Message(id="u3", role="user", content="1.6, on three nodes.", timestamp=WHEN),
]


def test_an_assistant_reply_has_no_words_in_bm25_by_default() -> None:
    """The user's words find the user's turns; a reply is found by its embedding."""
    indexed = index_turns(CHAT, IndexingConfig(context_turns=2, date_in_text=True))
    by_id = dict(zip([m.id for m in CHAT], indexed, strict=True))
    for reply in ("a1", "a2"):
        assert by_id[reply].search_text == ""
        assert by_id[reply].embed_text == next(m.content for m in CHAT if m.id == reply)
    # A short reply is still context for the user's next turn (the question it answers).
    assert by_id["u3"].search_text == (
        "We went with Memcached in the end.\nWhich version of Memcached?\n1.6, on three nodes.\n(8 May 2023)"
    )
    # With the words on, the reply is indexed as before: its question as context, then its words.
    on = index_turns(CHAT, IndexingConfig(context_turns=2, date_in_text=False, assistant_text=True))
    assert on[1].search_text.startswith("Which cache should I use for sessions?\nRedis is a good fit")


def test_a_reply_out_of_bm25_is_still_found_by_meaning_and_kept_whole(settings: Settings) -> None:
    service = build_service(settings)
    try:
        service.add("t", "u", CHAT, infer=False)
        filters = SearchRequest(tenant="t", user_id="u", query="x").filters
        bm25 = [s.id for s in service.store.bm25_search("t", "u", "Redis TTL shard tenant", 10, filters)]
        assert bm25 == []  # only the assistant said these words
        req = SearchRequest(tenant="t", user_id="u", query="Redis TTL shard tenant", top_k=5)
        hits = service.search(req).hits
        [reply] = [h.record for h in hits if h.record.source_ids == ["a1"]]
        assert reply.content == CHAT[1].content
        # A word the reply shares with the user is found in the user's turns only (u3 by its context).
        found = service.store.bm25_search("t", "u", "Memcached", 10, filters)
        records = service.store.get_many("t", "u", [s.id for s in found])
        assert sorted(records[s.id].source_ids[0] for s in found) == ["u2", "u3"]
    finally:
        service.close()
