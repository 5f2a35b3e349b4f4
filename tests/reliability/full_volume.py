"""Run inside a private mount namespace on a small tmpfs (tests/reliability/test_exhaustion.py).

``python -m tests.reliability.full_volume <volume>``: fills the volume through
the API until adds answer 507, checks that no add was half stored, erases a
user on the full volume (with the reserve) and stores again once space is
freed. Prints ``full volume: ok`` when every check held.

An erase on the full volume runs in the reserve; whether the reserve is enough
depends on how much of the WAL was still waiting for a checkpoint the full
disk kept from growing the file, so it may answer 507 like any write (it
never answers 500, and it is never half done). Once space is freed it works.
"""

from __future__ import annotations

import sys
from pathlib import Path

from memstack.factory import build_service
from memstack.settings import load_settings

from tests.api.conftest import build_api


def main(volume: Path) -> None:
    settings = load_settings(
        data_dir=volume / "data",
        embedder="hashing",
        max_message_chars=20_000,
        storage_reserve_bytes=16 * 1024 * 1024,
    )
    service = build_service(settings)
    api = build_api(service, settings)
    reserve = volume / "data" / "storage.reserve"
    assert reserve.stat().st_size == 16 * 1024 * 1024, "the reserve was not made"
    filler = volume / "filler"  # what "someone frees space" deletes later
    filler.write_bytes(b"\0" * (8 * 1024 * 1024))
    statuses: dict[int, int] = {}
    for n in range(400):
        turns = [
            {"id": f"m{n}-{i}", "role": "user", "content": f"turn {n} {i} " + "lorem ipsum " * 800}
            for i in range(10)
        ]
        user = "ann" if n < 3 else "bob"  # a few of ann's turns, then bob fills the volume
        status, answer = api(
            "POST", "/v1/memories", body={"user_id": user, "messages": turns, "infer": False}
        )
        statuses[status] = statuses.get(status, 0) + 1
        assert status in (202, 507), (status, answer)
        if status == 507:
            assert answer["error"]["code"] == "storage_full", answer
            if statuses[507] >= 5:
                break
    assert statuses.get(507, 0) >= 5, f"the volume never filled: {statuses}"
    conn = service.store.db.read()
    entries = conn.execute("SELECT count(*) FROM stm").fetchone()[0]
    # Messages with their turn indexed (a long one is several chunk records citing it).
    turns_stored = conn.execute(
        "SELECT count(DISTINCT source_ids) FROM memories WHERE tier = 'stm'"
    ).fetchone()[0]
    assert entries == turns_stored, f"half-stored adds: {entries} STM entries, {turns_stored} turns"
    assert entries % 10 == 0, f"an add was stored in part: {entries} entries"
    # Consolidation answers 507 or works; never 500.
    status, answer = api("POST", "/v1/consolidations", body={"user_id": "bob", "sync": True})
    assert status in (200, 507), (status, answer)
    # An erase on the full volume is done in the reserve when it fits, else refused the same way
    # (507, nothing half-erased: a retry finishes it); never a 500.
    assert api("POST", "/v1/memories", body={"user_id": "cy", "messages": turns})[0] == 507
    status, answer = api("DELETE", "/v1/users/ann")
    assert status in (200, 507), (status, answer)
    print(f"erase on the full volume: {status}")
    # Space freed by someone: the same kind of add goes through again, without a restart.
    filler.unlink()
    for user in ("ann", "bob"):
        status, answer = api("DELETE", f"/v1/users/{user}")
        assert status == 200, (status, answer)
        gone = conn.execute("SELECT count(*) FROM memories WHERE user_id = ?", (user,)).fetchone()[0]
        assert gone == 0, gone
    turns = [{"id": f"after-{i}", "role": "user", "content": "after the disk was freed"} for i in range(10)]
    status, answer = api("POST", "/v1/memories", body={"user_id": "cy", "messages": turns})
    assert status == 202 and len(answer["stored"]) == 10, (status, answer)
    service.close()
    print(f"full volume: ok {statuses}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
