"""A long message is accepted with the rest of its batch, kept whole and indexed in chunks that cite it."""

from __future__ import annotations

from tests.api.conftest import Api

#: ~200,000 characters: a pasted log, far over the old 16,000-character limit, far under the body's 1 MiB
LOG = "\n".join(f"12:{i % 60:02d}:07 worker-{i % 7} retry {i} after timeout on shard{i}" for i in range(4000))


def test_one_long_message_never_refuses_its_batch(api: Api) -> None:
    messages = [{"id": f"m{i}", "role": "user", "content": f"message number {i}"} for i in range(31)]
    messages.insert(5, {"id": "log", "role": "user", "content": LOG})
    status, answer = api(
        "POST", "/v1/memories", body={"user_id": "alice", "messages": messages, "infer": False}
    )
    assert status == 202, answer  # accepted (stored; no extraction asked for)
    assert len(answer["stored"]) == 32 and "log" in answer["stored"]
    status, found = api(
        "POST", "/v1/memories/search", body={"user_id": "alice", "query": "shard3999 timeout", "top_k": 3}
    )
    assert status == 200
    top = found["results"][0]
    assert "shard3999" in top["content"] and top["source_ids"] == ["log"]
    assert len(top["content"]) < len(LOG)  # a chunk of the turn, not all of it
