"""Space kept back on the data volume so that an erase still works when the disk is full.

SQLite records even a delete in its write-ahead log first, so on a full
volume an erase failed like every other write: a user could not be erased
until someone freed space. The embedded backend therefore keeps a reserve
file (``MEMSTACK_STORAGE_RESERVE_BYTES``, 16 MiB by default) beside the
database. When an erase finds the volume full, the reserve is given up and the
erase runs again in the space it leaves (an erase is idempotent); every other
write still answers 507. The reserve is made again each time the store opens
and after each erase, once the volume has room for it twice over (taking it
back sooner would leave the volume as full as it was).
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

RESERVE_FILE = "storage.reserve"
_CHUNK = 1 << 20


class StorageReserve:
    def __init__(self, data_dir: Path, size: int) -> None:
        self.path = Path(data_dir) / RESERVE_FILE
        self.size = size

    def held(self) -> bool:
        try:
            return self.path.stat().st_size >= self.size > 0
        except FileNotFoundError:
            return False

    def refill(self) -> bool:
        """Make the reserve (real blocks, not a sparse file) if there is room; True when it is held."""
        if self.size <= 0 or self.held():
            return self.size > 0
        if not self._room_for_two():  # taking it back now would leave the volume as full as before
            return False
        staged = self.path.with_name(f".{RESERVE_FILE}.{os.getpid()}")
        try:
            with open(staged, "wb") as out:
                try:  # real blocks at once, where the file system can
                    os.posix_fallocate(out.fileno(), 0, self.size)
                except (AttributeError, OSError) as exc:
                    if getattr(exc, "errno", None) == errno.ENOSPC:
                        raise
                    left = self.size
                    while left > 0:
                        out.write(b"\0" * min(_CHUNK, left))
                        left -= _CHUNK
                out.flush()
                os.fsync(out.fileno())
            os.replace(staged, self.path)
            return True
        except OSError:  # no room yet: try again later
            with contextlib.suppress(OSError):
                staged.unlink()
            return False

    def _room_for_two(self) -> bool:
        try:
            stats = os.statvfs(self.path.parent)
        except OSError:
            return False
        return stats.f_bavail * stats.f_frsize >= 2 * self.size

    def release(self) -> bool:
        """Give the reserve back to the volume; True when there was one to give."""
        try:
            self.path.unlink()
            return True
        except FileNotFoundError:
            return False
