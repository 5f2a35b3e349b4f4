"""Space held back on a full data volume for an erase (the embedded backend's reserve file)."""

from __future__ import annotations

from typing import Protocol


class SpaceReserve(Protocol):
    def release(self) -> bool:
        """Give the held space back to the volume; True when some was held."""
        ...

    def refill(self) -> bool:
        """Hold the space again if there is room; True when it is held."""
        ...
