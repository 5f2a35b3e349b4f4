"""A stateful property test of the public API: random sequences of every route, 3 tenants x 3 users.

Hypothesis drives add, search, list (paged), get, patch, delete, history,
erase and consolidate, plus the background worker, against one service, and
keeps a model of what it was told. Whatever the sequence:

* no read returns another tenant's or another user's data (every memory a
  read returns belongs to the asking user, and its provenance names only
  that user's messages; another user's memory id is 404);
* version chains stay linear (versions 1, 2, 3... each replacing the one
  before, at most one current);
* an erased user stays empty until something is added again;
* a deleted memory (any version of its chain) never appears in search.

``make test`` runs a small number of operations; set
``MEMSTACK_PROPERTY_OPERATIONS`` (e.g. 10000) for a nightly-size run.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from memstack.api.auth import ApiKeyAuthenticator
from memstack.factory import build_service
from memstack.settings import load_settings

from tests.api.conftest import build_api

TENANTS = {"key-north": "north", "key-south": "south", "key-east": "east"}
USERS = ("ann", "bob", "cy")
OWNERS = [(key, user) for key in TENANTS for user in USERS]
SENTENCES = [
    "I live in Lisbon.",
    "I moved to Porto last month.",
    "I am allergic to peanuts.",
    "My dog is called Biscuit.",
    "I work as a nurse.",
    "I love hiking in the mountains.",
    "I don't have a dog anymore.",
    "My sister Maya lives in Boston.",
    "I prefer tea to coffee.",
    "I play the cello on Sundays.",
]
WORDS = ["Lisbon", "dog", "peanuts", "nurse", "hiking", "sister", "tea", "cello", "where do I live"]
STEPS = 40
OPERATIONS = int(os.environ.get("MEMSTACK_PROPERTY_OPERATIONS", "240"))

owners = st.sampled_from(OWNERS)
RUNS: list[int] = []  # operations of each run, for the summary line


class ApiMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self._dir = tempfile.TemporaryDirectory()
        s = load_settings(data_dir=Path(self._dir.name), embedder="hashing", sync_timeout_seconds=60)
        self.service = build_service(s)
        self.api = build_api(self.service, s, ApiKeyAuthenticator(TENANTS))
        self.owner_of: dict[str, tuple[str, str]] = {}  # memory id -> (key, user)
        self.dead: set[str] = set()  # every version of every deleted chain
        self.erased: set[tuple[str, str]] = set()  # owners erased with nothing added since
        self.counter = 0
        self.operations = 0

    def teardown(self) -> None:
        RUNS.append(self.operations)
        self.service.close()
        self._dir.cleanup()

    # ---------------------------------------------------------------- helpers
    def call(self, owner: tuple[str, str], method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        self.operations += 1
        status, body = self.api(method, path, key=owner[0], **kwargs)
        assert status < 500, (method, path, status, body)
        return status, body

    def check_owned(self, owner: tuple[str, str], memories: list[dict[str, Any]]) -> None:
        key, user = owner
        prefix = f"{TENANTS[key]}.{user}."
        for m in memories:
            assert m["user_id"] == user, m
            assert all(s.startswith(prefix) for s in m["source_ids"]), (owner, m["source_ids"])
            seen = self.owner_of.setdefault(m["id"], owner)
            assert seen == owner, f"memory {m['id']} of {seen} was returned to {owner}"

    def ids_of(self, owner: tuple[str, str]) -> list[str]:
        return sorted(i for i, o in self.owner_of.items() if o == owner)

    def draw_id(self, owner: tuple[str, str], data: st.DataObject) -> str | None:
        """One of the memory ids seen for ``owner`` (None while there is none)."""
        ids = self.ids_of(owner)
        return data.draw(st.sampled_from(ids)) if ids else None

    # ------------------------------------------------------------------ rules
    @initialize(owner=owners)
    def seed(self, owner: tuple[str, str]) -> None:
        self.add(owner, [0, 2], True, True)

    @rule(
        owner=owners,
        picks=st.lists(st.integers(0, len(SENTENCES) - 1), min_size=1, max_size=3),
        infer=st.booleans(),
        sync=st.booleans(),
    )
    def add(self, owner: tuple[str, str], picks: list[int], infer: bool, sync: bool) -> None:
        key, user = owner
        messages = []
        for i in picks:
            self.counter += 1
            messages.append(
                {"id": f"{TENANTS[key]}.{user}.{self.counter}", "role": "user", "content": SENTENCES[i]}
            )
        body = {"user_id": user, "messages": messages, "infer": infer, "sync": sync}
        status, answer = self.call(owner, "POST", "/v1/memories", body=body)
        assert status == (200 if answer.get("status") == "processed" else 202), answer
        assert answer["accepted"] == [m["id"] for m in messages]
        if sync and infer:
            assert answer["status"] == "processed"
        self.erased.discard(owner)

    @rule(owner=owners, word=st.sampled_from(WORDS), history=st.booleans())
    def search(self, owner: tuple[str, str], word: str, history: bool) -> None:
        body = {"user_id": owner[1], "query": word, "top_k": 10, "include_history": history}
        status, answer = self.call(owner, "POST", "/v1/memories/search", body=body)
        assert status == 200
        results = answer["results"]
        self.check_owned(owner, results)
        assert not {r["id"] for r in results} & self.dead, "a deleted memory appeared in search"
        if owner in self.erased:
            assert results == []

    @rule(owner=owners, limit=st.integers(1, 7), superseded=st.booleans())
    def list_all(self, owner: tuple[str, str], limit: int, superseded: bool) -> None:
        seen: list[str] = []
        cursor = None
        while True:
            query = {"user_id": owner[1], "limit": str(limit), **({"cursor": cursor} if cursor else {})}
            status, page = self.call(owner, "GET", "/v1/memories", query=query)
            assert status == 200, page
            self.check_owned(owner, page["memories"])
            seen += [m["id"] for m in page["memories"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert len(seen) == len(set(seen)), "a page repeated a memory"
        if owner in self.erased:
            assert seen == []

    @rule(owner=owners, other=owners, data=st.data())
    def get_any(self, owner: tuple[str, str], other: tuple[str, str], data: st.DataObject) -> None:
        memory_id = self.draw_id(other, data)
        if memory_id is None:
            return
        status, body = self.call(owner, "GET", f"/v1/memories/{memory_id}", query={"user_id": owner[1]})
        if owner != other:
            assert status == 404, f"{owner} read {other}'s memory"
        else:
            assert status in (200, 404)
            if status == 200:
                self.check_owned(owner, [body])

    @rule(owner=owners, data=st.data(), pick=st.integers(0, len(SENTENCES) - 1))
    def patch(self, owner: tuple[str, str], data: st.DataObject, pick: int) -> None:
        memory_id = self.draw_id(owner, data)
        if memory_id is None:
            return
        body = {"user_id": owner[1], "content": SENTENCES[pick]}
        status, answer = self.call(owner, "PATCH", f"/v1/memories/{memory_id}", body=body)
        assert status in (200, 404, 409), answer
        if status == 200:
            assert answer["replaces_id"] == memory_id and answer["is_current"]
            self.check_owned(owner, [answer])

    @rule(owner=owners, data=st.data())
    def delete(self, owner: tuple[str, str], data: st.DataObject) -> None:
        memory_id = self.draw_id(owner, data)
        if memory_id is None:
            return
        status, chain = self.call(
            owner, "GET", f"/v1/memories/{memory_id}/history", query={"user_id": owner[1]}
        )
        status, answer = self.call(owner, "DELETE", f"/v1/memories/{memory_id}", query={"user_id": owner[1]})
        assert status in (200, 404, 409), answer
        if status == 200:
            self.dead |= {m["id"] for m in chain["memories"]} | {answer["tombstone_id"]}

    @rule(owner=owners, other=owners, data=st.data())
    def history(self, owner: tuple[str, str], other: tuple[str, str], data: st.DataObject) -> None:
        memory_id = self.draw_id(other, data)
        if memory_id is None:
            return
        status, body = self.call(
            owner, "GET", f"/v1/memories/{memory_id}/history", query={"user_id": owner[1]}
        )
        if owner != other:
            assert status == 404
            return
        assert status == 200
        chain = body["memories"]
        self.check_owned(owner, chain)
        # Linear: 1, 2, 3... each replacing the one before; only the last may be current.
        assert [m["version"] for m in chain] == list(
            range(chain[0]["version"], chain[0]["version"] + len(chain))
        )
        assert all(b["replaces_id"] == a["id"] for a, b in itertools.pairwise(chain))
        assert sum(m["is_current"] for m in chain) <= 1 and all(not m["is_current"] for m in chain[:-1])

    @rule(owner=owners)
    def erase(self, owner: tuple[str, str]) -> None:
        status, answer = self.call(owner, "DELETE", f"/v1/users/{owner[1]}")
        assert status == 200 and answer["user_id"] == owner[1]
        for memory_id in self.ids_of(owner):
            del self.owner_of[memory_id]
        self.erased.add(owner)

    @rule(owner=owners)
    def consolidate(self, owner: tuple[str, str]) -> None:
        status, answer = self.call(
            owner, "POST", "/v1/consolidations", body={"user_id": owner[1], "sync": True}
        )
        assert status == 200, answer
        if owner in self.erased:
            assert answer["written"] == 0

    @rule()
    def worker(self) -> None:
        """The background worker catches up (extraction of adds made without sync)."""
        assert self.service.queue is not None and self.service.queue.drain(timeout=120)
        assert self.service.queue.dead_letters() == []

    @precondition(lambda self: bool(self.erased))
    @invariant()
    def erased_users_stay_empty(self) -> None:
        for owner in sorted(self.erased):
            status, page = self.api("GET", "/v1/memories", key=owner[0], query={"user_id": owner[1]})
            assert status == 200 and page["memories"] == [], f"erased {owner} has memories again"


ApiMachine.TestCase.settings = settings(
    max_examples=max(1, OPERATIONS // (STEPS // 2)),  # a run makes about STEPS / 2 calls
    stateful_step_count=STEPS,
    deadline=None,
    database=None,
    derandomize=OPERATIONS <= 240,  # the make-test run is the same sequence every time
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestApiStateMachine = ApiMachine.TestCase


def test_the_runs_made_the_operations_asked_for() -> None:
    """Runs after the state machine (file order): it made about as many API calls as configured."""
    assert RUNS, "the state machine did not run"
    print(f"stateful API runs: {len(RUNS)}, operations: {sum(RUNS)}")  # shown with -s
    assert sum(RUNS) >= OPERATIONS // 2, RUNS
