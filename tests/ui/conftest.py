"""The memory browser in a real headless Chromium, against a live ``memstack serve`` on loopback.

Chromium is Debian's package (``apt-get install chromium``; ``.ci/run`` installs it),
driven by Playwright for Python through ``executable_path``: Playwright's own
browser downloads are never used. Without a Chromium on the machine every test
here is skipped, with that reason in the report.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from memstack.client.sync import MemoryClient

#: the flags Chromium needs in a root container with no network but loopback
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
KEY = "ui-key"  # tenant "acme": the seeded data
EMPTY_KEY = "empty-key"  # tenant "nobody": no data at all
#: a generous limit for every wait (the CI box is shared); tests wait on conditions, never sleep
TIMEOUT_MS = 30_000


def chromium_path() -> str | None:
    found = (
        os.environ.get("MEMSTACK_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    )
    return found if found and Path(found).exists() else None


@dataclass
class LiveServer:
    url: str
    data_dir: Path

    def client(self, key: str = KEY) -> MemoryClient:
        return MemoryClient(self.url, api_key=key)


def _read_lines(stream: Any, lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


@contextmanager
def serving(data_dir: Path, **settings: str) -> Iterator[LiveServer]:
    """``memstack serve --port 0`` as a user starts it, with two API keys; stopped with Ctrl-C.

    ``settings``: more ``MEMSTACK_<NAME>`` variables (``api_keys="k=t"`` replaces the keys).
    """
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMSTACK_")},
        "MEMSTACK_DATA_DIR": str(data_dir),
        "MEMSTACK_EMBEDDER": "hashing",
        "MEMSTACK_API_KEYS": f"{KEY}=acme,{EMPTY_KEY}=nobody",
        "COLUMNS": "200",
        **{f"MEMSTACK_{name.upper()}": value for name, value in settings.items()},
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "memstack", "serve", "--port", "0", "--threads", "4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_read_lines, args=(proc.stdout, lines), daemon=True).start()
    seen: list[str] = []
    url = None
    try:
        while url is None:
            line = lines.get(timeout=180)
            if line is None:
                raise AssertionError(f"memstack serve exited before announcing itself: {''.join(seen)}")
            seen.append(line)
            match = re.search(r"memstack API on (http://[\d.]+:\d+)", line)
            url = match.group(1) if match else None
        yield LiveServer(url, data_dir)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with serving(tmp_path_factory.mktemp("ui-server") / "data") as server:
        yield server


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    executable = chromium_path()
    if executable is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium; .ci/run installs it)")
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as playwright:
        # Playwright gives every launch a new, empty profile directory of its own.
        chromium = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any, live_server: LiveServer) -> Iterator[Any]:
    """A fresh tab (its own session storage) at 1280 px, opened on the browser's page."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.goto(f"{live_server.url}/ui")
    yield tab
    context.close()
    assert errors == [], f"the page raised: {errors}"


def sign_in(page: Any, key: str = KEY) -> None:
    """Type the key and press Enter (the form works from the keyboard)."""
    page.get_by_label("Credential", exact=True).fill(key)
    page.get_by_label("Credential", exact=True).press("Enter")
