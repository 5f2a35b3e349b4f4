"""Split a write into the batches a service accepts: at most ``max_items`` and about ``max_bytes`` each."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def size_batches(
    items: Iterable[T], max_items: int, max_bytes: int, size: Callable[[T], int]
) -> Iterator[list[T]]:
    """Consecutive groups of ``items`` within both limits (an item over ``max_bytes`` goes alone)."""
    batch: list[T] = []
    total = 0
    for item in items:
        n = size(item)
        if batch and (len(batch) >= max_items or total + n > max_bytes):
            yield batch
            batch, total = [], 0
        batch.append(item)
        total += n
    if batch:
        yield batch
