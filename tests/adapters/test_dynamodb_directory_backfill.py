"""The dynamodb user directory backfill: a table from before `GET /v1/users`, brought up to date."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from memstack.adapters.dynamodb import items
from memstack.adapters.dynamodb.directory_backfill import backfill_directory
from memstack.adapters.dynamodb.store import DynamoDBMemoryStore
from memstack.factory import build_service
from memstack.models import MemoryRecord, UserSummary
from memstack.settings import load_settings

from ..api.conftest import build_api
from ..conformance.conftest import TABLE
from .test_dynamodb_store import T0, client, rec

__all__ = ["client"]  # the moto table fixture, shared with the store's tests


def _directory(client: Any) -> dict[str, dict[str, Any]]:
    """Every directory item of the table, by its sk (raw)."""
    rows = client.scan(TableName=TABLE)["Items"]
    return {r["pk"]["S"] + r["sk"]["S"]: r for r in rows if r["sk"]["S"].startswith(items.USER_PREFIX)}


def _drop_directory(client: Any) -> None:
    """What a table written before the directory existed holds: the partitions, no USER# items."""
    for key in _directory(client).values():
        client.delete_item(TableName=TABLE, Key={"pk": key["pk"], "sk": key["sk"]})


def _rec(content: str, user: str, tenant: str = "acme", **kw: Any) -> MemoryRecord:
    return rec(content, user=user).model_copy(update={"tenant": tenant, **kw})


def _old_table(client: Any, *, ann_only: bool = False) -> DynamoDBMemoryStore:
    """Users of two tenants (the API keys' acme and globex) written by the store, then their
    directory entries removed: what a table written before the directory existed holds."""
    store = DynamoDBMemoryStore(TABLE, client)
    store.put(
        [
            _rec("stm one", "ann", tier="stm"),
            _rec("stm two", "ann", tier="stm", created_at=T0 + timedelta(hours=2)),
            _rec("ltm kept", "ann", tier="ltm", created_at=T0 + timedelta(hours=1)),
            _rec("ltm replaced", "ann", tier="ltm", is_current=False),
            _rec("ltm deleted", "ann", tier="ltm", deleted=True, created_at=T0 + timedelta(hours=3)),
        ]
    )
    if not ann_only:
        store.put([_rec("bob's", "bob", tier="ltm")])
        store.put([_rec("another tenant's", "cat", tenant="globex", tier="stm")])
        # A partition from before the write log: memory items only, no META.
        client.delete_item(TableName=TABLE, Key=items.meta_key("acme", "bob"))
    _drop_directory(client)
    return store


def _user(store: DynamoDBMemoryStore, user_id: str) -> UserSummary:
    return {u.user_id: u for u in store.users("acme", 10)[0]}[user_id]


def test_backfill_lists_pre_existing_users_with_their_counts_and_last_write(
    client: Any, tmp_path: Path
) -> None:
    store = _old_table(client)
    settings = load_settings(data_dir=tmp_path / "data", embedder="hashing")
    service = build_service(settings, store=store)
    api = build_api(service, settings)
    try:
        assert api("GET", "/v1/users")[1]["users"] == []
        report = backfill_directory(client, TABLE)
        assert (report.users, report.created, report.corrected, report.unchanged) == (3, 3, 0, 0)
        assert report.complete and report.busy == 0
        status, body = api("GET", "/v1/users")
        assert status == 200, body
        listed = {u["user_id"]: u for u in body["users"]}
        assert list(listed) == ["ann", "bob"] and body["next_cursor"] is None
        assert listed["ann"]["counts"] == {"stm": 2, "ltm": 1}
        # The newest created_at of any version, the deleted mark's included (the writes set it so).
        assert listed["ann"]["last_write"] == (T0 + timedelta(hours=3)).isoformat()
        assert listed["bob"]["counts"] == {"stm": 0, "ltm": 1}
        assert listed["bob"]["last_write"] == T0.isoformat()
        assert [u["user_id"] for u in api("GET", "/v1/users", key="globex-key")[1]["users"]] == ["cat"]
    finally:
        service.close()


def test_a_second_run_changes_nothing(client: Any) -> None:
    _old_table(client)
    backfill_directory(client, TABLE)
    before = _directory(client)
    writes: list[str] = []
    client.meta.events.register("before-call.dynamodb.*", lambda model, **_: writes.append(model.name))
    try:
        report = backfill_directory(client, TABLE)
    finally:
        client.meta.events.unregister("before-call.dynamodb.*")
    assert (report.created, report.corrected, report.unchanged) == (0, 0, 3)
    assert not {"TransactWriteItems", "PutItem", "UpdateItem"} & set(writes), writes
    assert _directory(client) == before


def test_an_entry_built_from_deltas_alone_is_corrected(client: Any) -> None:
    """A pre-existing user who wrote once after the upgrade: the entry counts only that write."""
    store = _old_table(client)
    store.put([_rec("after the upgrade", "ann", tier="stm", created_at=T0 + timedelta(hours=4))])
    assert (_user(store, "ann").stm, _user(store, "ann").ltm) == (1, 0)  # the delta alone
    report = backfill_directory(client, TABLE)
    assert (report.created, report.corrected) == (2, 1)
    ann = _user(store, "ann")
    assert (ann.stm, ann.ltm, ann.last_write) == (3, 1, T0 + timedelta(hours=4))


class _RacingClient:
    """The real client, but ``before_write`` runs once just before the backfill's first transaction."""

    def __init__(self, client: Any, before_write: Callable[[], None]) -> None:
        self._client = client
        self._before = before_write
        self.transactions = 0

    def transact_write_items(self, **kwargs: Any) -> Any:
        self.transactions += 1
        if self.transactions == 1:
            self._before()
        return self._client.transact_write_items(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_write_racing_the_backfill_is_kept_and_counted(client: Any) -> None:
    # Only ann, so the racing write lands between her count and her entry's write.
    store = _old_table(client, ann_only=True)
    late = _rec("written while the backfill counted", "ann", tier="ltm", created_at=T0 + timedelta(days=1))
    report = backfill_directory(_RacingClient(client, lambda: store.put([late])), TABLE)
    # The stale count (without the late write) was refused, the partition counted again.
    assert report.raced == 1 and report.busy == 0 and report.created == 0 and report.corrected == 1
    ann = _user(store, "ann")
    assert (ann.stm, ann.ltm, ann.last_write) == (2, 2, late.created_at)


def test_a_run_that_keeps_losing_leaves_the_newer_entry_alone(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memstack.adapters.dynamodb import directory_backfill

    store = _old_table(client, ann_only=True)
    late = _rec("written while the backfill counted", "ann", tier="ltm", created_at=T0 + timedelta(days=1))
    monkeypatch.setattr(directory_backfill, "_ATTEMPTS", 1)
    report = backfill_directory(_RacingClient(client, lambda: store.put([late])), TABLE)
    assert report.busy == 1
    # The write's entry stands (its delta only), not the backfill's stale count from before it.
    ann = _user(store, "ann")
    assert (ann.stm, ann.ltm, ann.last_write) == (0, 1, late.created_at)
    # The next run finishes the job.
    monkeypatch.setattr(directory_backfill, "_ATTEMPTS", 5)
    assert backfill_directory(client, TABLE).corrected == 1
    ann = _user(store, "ann")
    assert (ann.stm, ann.ltm) == (2, 2)


def test_a_user_erased_while_counted_gets_no_entry(client: Any) -> None:
    store = _old_table(client, ann_only=True)
    report = backfill_directory(_RacingClient(client, lambda: store.erase_user("acme", "ann")), TABLE)
    assert _directory(client) == {} and store.users("acme", 10)[0] == []
    assert (report.raced, report.gone, report.busy, report.created) == (1, 1, 0, 0)


def test_dry_run_counts_and_writes_nothing(client: Any) -> None:
    _old_table(client)
    report = backfill_directory(client, TABLE, dry_run=True)
    assert (report.created, report.corrected) == (3, 0)
    assert _directory(client) == {}


def test_a_deadline_stops_before_the_next_user(client: Any) -> None:
    _old_table(client)
    ticks = iter([0.0, 0.0, 10.0])
    report = backfill_directory(client, TABLE, deadline=5.0, clock=lambda: next(ticks))
    assert not report.complete and report.users == 2 and len(_directory(client)) == 2
    assert backfill_directory(client, TABLE).created == 1


def test_memstack_migrate_runs_the_backfill_on_the_dynamodb_store(
    client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from memstack.cli.migrate import migrate

    _old_table(client)
    for name, value in {
        "STORE_BACKEND": "dynamodb",
        "MEMORIES_TABLE": TABLE,
        "AWS_REGION": "us-east-1",
        "DATA_DIR": str(tmp_path / "data"),
    }.items():
        monkeypatch.setenv(f"MEMSTACK_{name}", value)
    migrate(status=True, as_json=True)
    looked = json.loads(capsys.readouterr().out)
    assert (looked["dry_run"], looked["created"], looked["users"]) == (True, 3, 3)
    assert _directory(client) == {}
    migrate(status=False, as_json=True)
    assert json.loads(capsys.readouterr().out)["created"] == 3 and len(_directory(client)) == 3
    migrate(status=False, as_json=False)
    assert "0 new and 0 corrected entries, 3 already right" in capsys.readouterr().out
