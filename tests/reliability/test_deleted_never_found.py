"""A deleted memory never appears in search, not even in a history search (found by the stateful test).

A history search (``include_history`` or a query about the past) takes
superseded versions as candidates too; a deleted memory's older versions
are superseded, so they came back as results.
"""

from __future__ import annotations

import pytest

from tests.api.conftest import Api


@pytest.mark.parametrize("edits", [0, 2])
@pytest.mark.parametrize("how", ["include_history", "query"])
def test_no_version_of_a_deleted_memory_is_found(api: Api, edits: int, how: str) -> None:
    body = {
        "user_id": "ann",
        "infer": False,
        "messages": [{"role": "user", "content": "My dog is called Rex."}],
    }
    assert api("POST", "/v1/memories", body=body)[0] == 202
    memory = api("GET", "/v1/memories", query={"user_id": "ann"})[1]["memories"][0]
    ids = [memory["id"]]
    for i in range(edits):
        status, new = api(
            "PATCH", f"/v1/memories/{ids[-1]}", body={"user_id": "ann", "content": f"My dog is Rex {i}."}
        )
        assert status == 200
        ids.append(new["id"])
    assert api("DELETE", f"/v1/memories/{ids[-1]}", query={"user_id": "ann"})[0] == 200
    query = {
        "include_history": {"query": "dog Rex", "include_history": True},
        "query": {"query": "what was my dog called before"},
    }[how]
    status, found = api("POST", "/v1/memories/search", body={"user_id": "ann", "top_k": 20, **query})
    assert status == 200
    assert not {r["id"] for r in found["results"]} & set(ids), found["results"]
