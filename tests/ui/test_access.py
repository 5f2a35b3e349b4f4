"""The memory browser for everyone: slow calls, the keyboard, labels, and a phone-width screen.

A slow call is made slow by holding its request in the browser (``page.route``) until
the test lets it go, so the loading indicator is asserted without a timing guess; every
other wait is on a condition (Playwright's ``expect``), never a sleep.
"""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from .conftest import LiveServer, sign_in
from .steps import fresh, open_memory, open_user, seed

PHONE = {"width": 390, "height": 844}

#: every form control with no label, and every button or link with no name, in the page
UNLABELLED = """() => {
  const named = (el) => (el.getAttribute("aria-label") || el.textContent || "").trim() !== "";
  const bad = [];
  for (const el of document.querySelectorAll("input, select, textarea")) {
    if (el.type === "hidden") continue;
    const labelled = (el.labels && el.labels.length) || el.getAttribute("aria-labelledby");
    if (!labelled && !el.getAttribute("aria-label")) bad.push(el.outerHTML.slice(0, 120));
  }
  for (const el of document.querySelectorAll("button, a[href]")) {
    if (!named(el)) bad.push(el.outerHTML.slice(0, 120));
  }
  return bad;
}"""

#: the name a screen reader gives the focused element: its label, else its text
FOCUSED_NAME = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  if (el.labels && el.labels.length) return el.labels[0].textContent.trim();
  return (el.getAttribute("aria-label") || el.textContent || "").trim();
}"""


def test_a_slow_call_shows_the_loading_indicator_until_it_answers(page: Any, live_server: LiveServer) -> None:
    user, lisbon = open_user(page, live_server, "patient")
    expect(page.get_by_role("heading", name=f"Memories of {user}")).to_be_visible()
    held: list[Any] = []
    listing = re.compile(r"/v1/memories\?")

    def hold(route: Any) -> None:  # the request waits, unanswered, until the test continues it
        held.append(route)

    page.route(listing, hold)
    page.get_by_label("Tier").select_option("ltm")
    page.get_by_role("button", name="Apply filters").click()
    loading = page.locator("#loading")
    expect(loading).to_be_visible()
    expect(loading).to_have_text("Loading…")
    expect(page.locator("body")).to_have_attribute("aria-busy", "true")
    assert len(held) == 1 and "tier=ltm" in held[0].request.url
    held[0].continue_()
    page.unroute(listing)
    expect(page.get_by_role("link", name=lisbon.content)).to_be_visible()
    expect(loading).to_be_hidden()
    expect(page.locator("body")).to_have_attribute("aria-busy", "false")


def test_esc_closes_the_dialogs_and_the_edit_form_and_changes_nothing(
    page: Any, live_server: LiveServer
) -> None:
    user, lisbon = open_memory(page, live_server, "escaper")
    dialog = page.get_by_role("dialog")
    delete = page.get_by_role("button", name="Delete…")
    delete.click()
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(delete).to_be_focused()  # focus goes back where it was
    expect(page.locator("ol.timeline > li")).to_have_count(1)
    expect(page.locator("#memory-content")).to_have_text(lisbon.content)

    edit = page.get_by_role("button", name="Edit")
    edit.click()
    expect(page.get_by_label("New content")).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.get_by_label("New content")).to_be_hidden()
    expect(edit).to_be_focused()

    page.goto(f"{live_server.url}/ui#/user/{user}")
    erase = page.get_by_role("button", name="Erase user…")
    erase.click()
    expect(dialog.get_by_label(f"Type {user} to confirm")).to_be_focused()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(erase).to_be_focused()
    with live_server.client() as client:
        assert client.get(lisbon.id, user_id=user).content == lisbon.content


def test_tab_goes_through_the_page_in_reading_order(page: Any, live_server: LiveServer) -> None:
    user = fresh("tabber")
    seed(live_server, user)
    sign_in(page)
    expect(page.get_by_role("heading", name="Users")).to_be_focused()
    # Before the view's heading (where each view puts focus) come the header's stops, the
    # skip link first, and the breadcrumb: Shift+Tab walks back to it; Enter on it moves focus to the content.
    page.goto(f"{live_server.url}/ui#/user/{user}")
    heading = page.get_by_role("heading", name=f"Memories of {user}")
    expect(heading).to_be_focused()
    back: list[str] = []
    while not back or back[-1] != "Skip to content":
        page.keyboard.press("Shift+Tab")
        back.append(page.evaluate(FOCUSED_NAME))
        assert len(back) < 10, back
    assert back == ["Users", "Sign out", "Jobs", "Users", "memstack", "Skip to content"]
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()
    # Then the breadcrumb, the toolbar and the filter form, in the order they are read (a date field's
    # parts are one stop each, counted once); no element jumps the queue with tabindex > 0.
    names: list[str] = []
    while not names or names[-1] != "Apply filters":
        page.keyboard.press("Tab")
        name = page.evaluate(FOCUSED_NAME)
        assert name is not None and len(names) < 60, names
        if not names or names[-1] != name:
            names.append(name)
    assert names == [
        "Users",  # the breadcrumb
        "Search playground",
        "Run consolidation",
        "Erase user…",
        "Kind",
        "Category",
        "Tier",
        "Scope",
        "Happened after",
        "Happened before",
        "Metadata (JSON)",
        "Filter expression (JSON)",
        "Session",
        "Agent",
        "Order",
        "Include superseded versions",
        "Clear",
        "Apply filters",
    ]
    assert (
        page.evaluate("[...document.querySelectorAll('[tabindex]')].filter(e => e.tabIndex > 0).length") == 0
    )
    # Enter on a link follows it and focus lands on the new view's heading.
    page.goto(f"{live_server.url}/ui#/")
    link = page.get_by_role("link", name=user, exact=True)
    link.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name=f"Memories of {user}")).to_be_focused()


def test_every_control_in_every_view_has_a_label(page: Any, live_server: LiveServer) -> None:
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert page.evaluate(UNLABELLED) == [], "sign-in"
    user, lisbon = open_memory(page, live_server, "labels")
    page.get_by_role("button", name="Edit").click()
    assert page.evaluate(UNLABELLED) == [], "one memory, editing"
    views = {
        "users": ("#/", page.get_by_role("heading", name="Users")),
        "memories": (f"#/user/{user}", page.get_by_role("heading", name=f"Memories of {user}")),
        "jobs": ("#/jobs", page.get_by_role("heading", name="Background jobs")),
    }
    for what, (route, heading) in views.items():
        page.goto(f"{live_server.url}/ui{route}")
        expect(heading).to_be_visible()
        assert page.evaluate(UNLABELLED) == [], what
    page.goto(f"{live_server.url}/ui#/user/{user}")
    page.get_by_role("button", name="Erase user…").click()
    expect(page.get_by_role("dialog")).to_be_visible()
    assert page.evaluate(UNLABELLED) == [], "erase dialog"
    page.keyboard.press("Escape")
    page.goto(f"{live_server.url}/ui#/user/{user}/search")
    page.get_by_label("Query").fill("where did Ana move?")
    page.get_by_role("button", name="Search").click()
    expect(page.locator(f'li.hit[data-id="{lisbon.id}"]')).to_be_visible()
    assert page.evaluate(UNLABELLED) == [], "search with the explain view"


def test_it_works_at_phone_width(browser: Any, live_server: LiveServer) -> None:
    user = fresh("phone")
    lisbon = seed(live_server, user)["lisbon"]
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    try:
        tab = context.new_page()
        tab.goto(f"{live_server.url}/ui#/user/{user}/memory/{lisbon.id}")
        expect(tab.get_by_role("heading", name="Sign in")).to_be_visible()
        assert _sideways(tab) == 0, "sign-in"
        sign_in(tab)
        expect(tab.locator("#memory-content")).to_have_text(lisbon.content)
        assert _sideways(tab) == 0, "one memory"
        tab.goto(f"{live_server.url}/ui#/user/{user}")
        expect(tab.get_by_role("heading", name=f"Memories of {user}")).to_be_visible()
        assert _sideways(tab) == 0, "memories"
        # The filter form is one column: every field starts at the same left edge.
        lefts = tab.evaluate(
            "[...document.querySelectorAll('form[aria-label=\"Filter memories\"] .field')]"
            ".map(f => Math.round(f.getBoundingClientRect().left))"
        )
        assert len(lefts) > 5 and len(set(lefts)) == 1, lefts
        tab.goto(f"{live_server.url}/ui#/user/{user}/search")
        tab.get_by_label("Query").fill("where did Ana move last spring?")
        tab.get_by_role("button", name="Search").tap()
        expect(tab.locator(f'li.hit[data-id="{lisbon.id}"]')).to_be_visible()
        expect(tab.locator("#explain tr[data-stage=total]")).to_be_attached()
        assert _sideways(tab) == 0, "search and explain"  # wide tables scroll inside their box
        for route, heading in (("#/", "Users"), ("#/jobs", "Background jobs")):
            tab.goto(f"{live_server.url}/ui{route}")
            expect(tab.get_by_role("heading", name=heading)).to_be_visible()
            assert _sideways(tab) == 0, heading
        # The header's links stay on the screen.
        header = tab.get_by_role("banner")
        for control in (
            header.get_by_role("link", name="Users"),
            header.get_by_role("link", name="Jobs"),
            header.get_by_role("button", name="Sign out"),
        ):
            box = control.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], box
    finally:
        context.close()


def _sideways(tab: Any) -> int:
    """How far the page scrolls sideways (0: nothing is wider than the screen)."""
    return int(tab.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth"))
