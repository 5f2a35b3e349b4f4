"""The private PostgreSQL for tests starts from a checkout other users cannot reach (issue 26).

As root the server runs as ``nobody``. A checkout under a directory ``nobody``
cannot pass (a clone in root's mode-0700 home) failed with a bare
``PermissionError: …/pginstall/bin/initdb``; its binaries are now copied where
``nobody`` can run them, and a data directory ``nobody`` cannot reach is refused
with what to do about it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import psycopg
import pytest
from memstack.adapters.postgres.devserver import DevServerError, start_dev_postgres, wheel_bin_dir

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="only as root does the server run as another user (nobody)"
)


def test_a_checkout_under_a_private_directory_still_gets_its_server(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    # The wheel as it sits in the site-packages of a checkout's .venv under that home: its
    # PostgreSQL installation, and the shared libraries its binaries find relative to themselves.
    wheel = wheel_bin_dir().parent.parent
    site = home / "checkout" / ".venv" / "site-packages"
    install = site / wheel.name / "pginstall"
    shutil.copytree(wheel / "pginstall", install, symlinks=True, ignore=shutil.ignore_patterns("include"))
    for libs in wheel.parent.glob(f"{wheel.name}*.libs"):
        shutil.copytree(libs, site / libs.name, symlinks=True)
    server = start_dev_postgres(bin_dir=install / "bin")
    try:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")  # lib/ and share/ came along
            assert conn.execute("SELECT '[1,2]'::vector <-> '[1,3]'::vector").fetchone() == (1.0,)
    finally:
        server.stop()
    assert not server.root.exists()  # the copy went with the server's directory


def test_a_data_directory_the_server_user_cannot_reach_is_refused_with_the_fix(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    with pytest.raises(DevServerError, match=r"cannot pass \S+ \(mode 0700\)\. Fix: `chmod o\+x`"):
        start_dev_postgres(parent=private)
    assert list(private.iterdir()) == []  # nothing left behind
