"""``memstack export`` / ``import``: a user moves between the embedded and the postgres store intact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from memstack.adapters.embedded.database import Database
from memstack.adapters.embedded.store import EmbeddedMemoryStore
from memstack.adapters.embedders.hashing import HashingEmbedder
from memstack.domain import versions
from memstack.domain.transfer import export_lines, import_lines
from memstack.errors import BadRequest
from memstack.models import Category, Kind, MemoryFilters, Scope, Tier

from .conftest import COARSE_DIM, record

EMB = HashingEmbedder(64)
T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _fill(store: Any) -> None:
    turn = record(
        "Caroline: I went to the pottery class yesterday",
        tier=Tier.STM,
        speaker="Caroline",
        source_ids=["D1:1"],
        search_text="Caroline: pottery class (1 March 2026)",
        created_at=T0,
    )
    fact = record(
        "Caroline takes a pottery class",
        kind=Kind.EVENT,
        category=Category.HOBBIES,
        event_time=T0 - timedelta(days=1),
        source_ids=["D1:1"],
        created_at=T0,
        metadata={"confidence": 0.9, "tags": ["art"]},
    )
    ctx = record("the project codename is falcon", scope=Scope.CONTEXT, session_id="s1", created_at=T0)
    gone = record("Caroline dislikes olives", created_at=T0)
    store.put([turn, fact, ctx, gone])
    newer = versions.new_version(
        fact,
        content="Caroline teaches a pottery class",
        embedder=EMB,
        coarse_dim=COARSE_DIM,
        now=T0 + timedelta(days=2),
    )
    store.supersede("t1", "u1", fact.id, newer)
    tomb = versions.new_version(
        gone, content=None, embedder=None, coarse_dim=COARSE_DIM, deleted=True, now=T0 + timedelta(days=3)
    )
    store.supersede("t1", "u1", gone.id, tomb)
    store.mark("t1", "u1", [turn.id], consolidated=True)


def _records(lines: list[str]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in map(json.loads, lines[1:])}


def test_a_user_round_trips_embedded_to_postgres_and_back(tmp_path: Path, make_store: Any) -> None:
    embedded = EmbeddedMemoryStore(Database(tmp_path / "a.sqlite3"))
    postgres = make_store()
    back = EmbeddedMemoryStore(Database(tmp_path / "b.sqlite3"))
    try:
        _fill(embedded)
        exported = list(export_lines(embedded, "t1", "u1", EMB))
        assert len(exported) == 1 + 6  # the header; 4 records, a new version, a tombstone
        assert import_lines(postgres, exported, EMB, COARSE_DIM).as_dict() == {
            "imported": 6,
            "skipped_existing": 0,
            "reembedded": 0,
        }
        again = list(export_lines(postgres, "t1", "u1", EMB))
        assert _records(again) == _records(exported)  # every field, every version, the vectors
        import_lines(back, again, EMB, COARSE_DIM)
        assert _records(list(export_lines(back, "t1", "u1", EMB))) == _records(exported)
        # Search sees the same memories on both sides.
        for store in (embedded, postgres, back):
            hits = store.bm25_search("t1", "u1", "pottery class", 5, MemoryFilters())
            assert {store.get("t1", "u1", h.id).content for h in hits} == {
                "Caroline: I went to the pottery class yesterday",
                "Caroline teaches a pottery class",
            }
        query = np.asarray(json.loads(exported[1])["embedding_full"][:COARSE_DIM], dtype=np.float32)
        assert [h.id for h in embedded.vector_search("t1", "u1", query, 3, MemoryFilters())] == [
            h.id for h in postgres.vector_search("t1", "u1", query, 3, MemoryFilters())
        ]
        # Importing twice changes nothing.
        assert import_lines(postgres, exported, EMB, COARSE_DIM).skipped_existing == 6
    finally:
        embedded.close()
        back.close()


def test_import_as_another_user_and_with_another_embedder_re_embeds(tmp_path: Path, make_store: Any) -> None:
    embedded = EmbeddedMemoryStore(Database(tmp_path / "a.sqlite3"))
    try:
        _fill(embedded)
        exported = list(export_lines(embedded, "t1", "u1", EMB))
    finally:
        embedded.close()
    postgres = make_store()
    report = import_lines(postgres, exported, _Renamed(EMB), COARSE_DIM, tenant="t2", user_id="u9")
    assert (report.imported, report.reembedded) == (6, 5)  # the tombstone has no vector
    assert postgres.list("t1", "u1", MemoryFilters(), 10) == ([], None)
    assert {r.content for r in postgres.list("t2", "u9", MemoryFilters(), 10)[0]} >= {
        "Caroline teaches a pottery class"
    }


class _Renamed:
    """The same vectors under another model name: an import must not trust them."""

    def __init__(self, inner: HashingEmbedder) -> None:
        self.inner, self.dim, self.name = inner, inner.dim, "another-model"

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.inner.embed(texts)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([], "empty"),
        (["not json"], "line 1 is not JSON"),
        (['{"id": "x"}'], "not a memstack export"),
        (['{"format": "memstack-export", "version": 9}'], "version 9 is not supported"),
        (
            ['{"format": "memstack-export", "version": 1}', '{"content": "no tenant"}'],
            "line 2: the export names no tenant",
        ),
        (
            ['{"format": "memstack-export", "version": 1, "tenant": "t1"}', '{"content": "no user"}'],
            "line 2 is not a memory",
        ),
        (['{"format": "memstack-export", "version": 1}', '{"n": NaN}'], "line 2 is not JSON: NaN"),
    ],
)
def test_a_bad_export_is_refused_before_anything_is_written(
    make_store: Any, lines: list[str], message: str
) -> None:
    store = make_store()
    with pytest.raises(BadRequest, match=message):
        import_lines(store, lines, EMB, COARSE_DIM)


def test_the_cli_moves_a_user_between_backends(
    tmp_path: Path, postgres_server: Any, postgres_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    memstack = str(Path(sys.executable).with_name("memstack"))
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTACK_")}
    embedded = {
        **base,
        "MEMSTACK_DATA_DIR": str(tmp_path / "data"),
        "MEMSTACK_EMBEDDER": "hashing",
        "MEMSTACK_EMBEDDING_DIM": "64",
        "MEMSTACK_COARSE_DIM": str(COARSE_DIM),
    }
    postgres = {
        **embedded,
        "MEMSTACK_STORE_BACKEND": "postgres",
        "MEMSTACK_POSTGRES_DSN": postgres_server.dsn,
        "MEMSTACK_POSTGRES_SCHEMA": postgres_schema,
    }

    def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [memstack, *args], env=env, capture_output=True, text=True, timeout=120, check=False
        )

    source = EmbeddedMemoryStore(Database(tmp_path / "data" / "memstack.sqlite3"))
    _fill(source)
    source.close()
    out = tmp_path / "u1.jsonl"
    done = run(embedded, "export", "--tenant", "t1", "--user", "u1", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "exported 6 records of u1" in done.stderr
    imported = run(postgres, "import", str(out), "--json")  # the store applies the schema first
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout) == {"imported": 6, "skipped_existing": 0, "reembedded": 0}
    # ... and refreshed the planner's statistics (a never-analysed table has reltuples -1).
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        (tuples,) = conn.execute(
            "SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)", (f"{postgres_schema}.memories",)
        ).fetchone()
    assert tuples == 6
    status = run(postgres, "migrate", "--status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["pending"] == []
    # On another backend the command says what it is for.
    from memstack.cli.app import UserError
    from memstack.cli.migrate import migrate

    monkeypatch.setenv("MEMSTACK_DATA_DIR", str(tmp_path / "data"))
    with pytest.raises(UserError, match="only the postgres and dynamodb backends have upgrades"):
        migrate(status=True, as_json=False)


def test_vectors_of_another_dimension_than_the_header_says_are_re_embedded(
    tmp_path: Path, make_store: Any
) -> None:
    embedded = EmbeddedMemoryStore(Database(tmp_path / "a.sqlite3"))
    try:
        _fill(embedded)
        exported = list(export_lines(embedded, "t1", "u1", EMB))
    finally:
        embedded.close()
    wider = _Wider()
    header = {**json.loads(exported[0]), "embedder": wider.name, "embedding_dim": wider.dim}
    report = import_lines(make_store(), [json.dumps(header), *exported[1:]], wider, COARSE_DIM)
    assert (report.imported, report.reembedded) == (6, 5)


class _Wider:
    """An embedder of another dimension, under the name a (wrong) header claims."""

    name, dim = "wider-96", 96

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.full((len(texts), self.dim), 1 / np.sqrt(self.dim), dtype=np.float32)
