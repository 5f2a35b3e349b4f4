"""Screenshots of the memory browser's main views for the docs (docs/images/ui-*.png).

Starts ``memstack serve`` on a throwaway data directory, adds a short conversation
(extracted at once), edits one memory so its timeline has two versions, and saves
each main view at 1280 px (and the memory at phone width) with Debian's chromium
driven by Playwright. Usage: ``python scripts/ui_screenshots.py [--out docs/images]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playwright.sync_api import expect, sync_playwright  # noqa: E402

from tests.ui.conftest import CHROMIUM_ARGS, KEY, chromium_path, serving, sign_in  # noqa: E402

TURNS = [
    {
        "role": "user",
        "speaker": "Maya",
        "content": "I moved to Lisbon last spring for a job at a design studio.",
    },
    {"role": "user", "speaker": "Maya", "content": "I'm vegetarian, and I'm allergic to peanuts."},
    {"role": "user", "speaker": "Maya", "content": "My sister Ana is getting married in Porto in June."},
    {"role": "user", "speaker": "Maya", "content": "I started learning the cello this week."},
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    executable = chromium_path()
    if executable is None:
        raise SystemExit("no chromium on this machine: apt-get install chromium")
    with tempfile.TemporaryDirectory() as tmp, serving(Path(tmp) / "data") as server:
        with server.client() as client:
            client.add(TURNS, user_id="maya", sync=True)
            client.add("I play chess on Sundays.", user_id="leo", infer=False)
            lisbon = next(
                m for m in client.list(user_id="maya", tier="ltm").memories if "Lisbon" in m.content
            )
            edited = client.update(
                lisbon.id, "Maya moved to Porto in 2026 to be near her sister.", user_id="maya"
            )
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=executable, headless=True, args=CHROMIUM_ARGS
            )
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            page.goto(f"{server.url}/ui")
            page.screenshot(path=out / "ui-sign-in.png")
            sign_in(page, KEY)
            expect(page.get_by_role("link", name="maya", exact=True)).to_be_visible()
            page.screenshot(path=out / "ui-users.png")
            page.goto(f"{server.url}/ui#/user/maya?tier=ltm&include_superseded=true")
            expect(page.locator("table")).to_be_visible()
            page.screenshot(path=out / "ui-memories.png", full_page=True)
            page.goto(f"{server.url}/ui#/user/maya/memory/{edited.id}")
            expect(page.locator("ol.timeline > li")).to_have_count(2)
            page.screenshot(path=out / "ui-memory.png", full_page=True)
            page.goto(f"{server.url}/ui#/user/maya/search?query=where+did+Maya+move+last+spring%3F&top_k=5")
            expect(page.locator("li.hit").first).to_be_visible()
            page.locator("li.hit details").first.evaluate("d => d.open = true")
            page.screenshot(path=out / "ui-search.png", full_page=True)
            phone = browser.new_page(viewport={"width": 390, "height": 844}, is_mobile=True)
            phone.goto(f"{server.url}/ui#/user/maya/memory/{edited.id}")
            sign_in(phone, KEY)
            expect(phone.locator("ol.timeline > li")).to_have_count(2)
            phone.screenshot(path=out / "ui-memory-phone.png")
            browser.close()
    print("written:", ", ".join(sorted(p.name for p in out.glob("ui-*.png"))))


if __name__ == "__main__":
    main()
