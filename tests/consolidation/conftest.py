"""A conversation of 25 turns about a few topics, and helpers to look at what consolidation wrote."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from memstack.factory import build_service
from memstack.models import MemoryFilters, MemoryRecord, Message, Tier
from memstack.service import MemoryService
from memstack.settings import Settings, load_settings

NOW = datetime.now(UTC).replace(microsecond=0)
START = NOW - timedelta(hours=3)

TURNS = [
    "I work as a machine learning engineer at a robotics startup.",
    "I mostly use PyTorch for training models.",
    "My team moved our training code from TensorFlow to PyTorch last year.",
    "I love hiking in the mountains on weekends.",
    "Last weekend I went hiking near Lake Tahoe.",
    "I'm vegetarian and I love cooking Indian food.",
    "My sister Maya lives in Boston.",
    "I prefer concise answers.",
    "I'm planning a trip to Tokyo in April.",
    "I booked a hotel in Shinjuku for the Tokyo trip.",
    "I run kubernetes clusters at work for model serving.",
    "My favourite PyTorch feature is torch.compile.",
    "I went to the doctor for a knee injury yesterday.",
    "I play guitar in the evenings.",
    "I'm studying for a PhD in robotics part-time.",
    "My dog is called Biscuit.",
    "I hate long meetings.",
    "I visited my sister Maya in Boston in March.",
    "I save money for a house.",
    "We use Docker for all our ML services.",
    "I enjoy reading science fiction books.",
    "I'm training a new vision model with PyTorch Lightning.",
    "Hiking is my favourite way to relax.",
    "I cook dinner for my family every Sunday.",
    "I'm learning Japanese for the Tokyo trip.",
]


def conversation(prefix: str = "m", start: datetime = START, turns: list[str] = TURNS) -> list[Message]:
    return [
        Message(id=f"{prefix}{i:02d}", content=t, speaker="Sam", timestamp=start + timedelta(minutes=i))
        for i, t in enumerate(turns)
    ]


def make_settings(data_dir: Path) -> Settings:
    # The hashing embedder scores related sentences lower than a real model: a lower synthesis bar.
    return load_settings(data_dir=data_dir, embedder="hashing", consolidation_synthesis_similarity=0.3)


@pytest.fixture
def csettings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path / "data")


@pytest.fixture
def csvc(csettings: Settings) -> Iterator[MemoryService]:
    svc = build_service(csettings)
    try:
        yield svc
    finally:
        svc.close()


def consolidated(svc: MemoryService, tenant: str, user: str, current_only: bool = True) -> list[MemoryRecord]:
    """The user's LTM records written by consolidation (summaries and syntheses)."""
    filters = MemoryFilters(tier=Tier.LTM, include_superseded=not current_only)
    records, _ = svc.list(tenant, user, filters, 1000)
    return [r for r in records if r.metadata.get("consolidation")]


def snapshot(svc: MemoryService, tenant: str, user: str) -> list[tuple[object, ...]]:
    """Everything stored for a user, in a comparable form (ids, versions, text, provenance, marks)."""
    records, _ = svc.list(tenant, user, MemoryFilters(include_superseded=True), 5000)
    return sorted(
        (
            r.id,
            r.tier,
            r.version,
            r.is_current,
            r.content,
            tuple(sorted(r.source_ids)),
            str(sorted(r.metadata.items())),
        )
        for r in records
    )


def shape(svc: MemoryService, tenant: str, user: str) -> list[tuple[object, ...]]:
    """Consolidation's output without ids and clocks: two runs over the same turns must agree on it."""
    return sorted(
        (
            r.metadata["consolidation"],
            str(r.kind),
            str(r.category),
            r.version,
            r.content,
            tuple(sorted(r.source_ids)),
        )
        for r in consolidated(svc, tenant, user)
    )
