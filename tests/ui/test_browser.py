"""Each step a new user takes in the memory browser, in a real Chromium against ``memstack serve``.

Enter a key, list users, open a memory and its timeline with the turns it came
from, search and read the explain view, edit (a new version), delete and
restore, erase a user behind a typed confirmation, consolidate and watch it,
redrive a dead-lettered job, see the API's own 401 for a wrong key, and use it
at phone width. Every wait is on a condition (Playwright's ``expect``), never a sleep.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from memstack.adapters.embedded.database import Database
from memstack.adapters.queue.sqlite import SqliteJobQueue
from memstack.ports.queue import Job
from playwright.sync_api import expect

from tests.waiting import wait_until

from .conftest import EMPTY_KEY, KEY, LiveServer, sign_in
from .steps import fresh, open_memory, open_user, seed


def test_a_wrong_key_shows_the_apis_own_401(page: Any) -> None:
    sign_in(page, "not-a-key")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("401")
    expect(alert).to_contain_text("unauthorized")
    # The sign-in form stays, and nothing was kept.
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('memstack.credential')") is None


def test_enter_a_key_and_list_this_tenants_users(page: Any, live_server: LiveServer) -> None:
    user = fresh("lister")
    seed(live_server, user)
    with live_server.client(EMPTY_KEY) as other:  # another tenant's user never shows
        other.add("a secret of another tenant", user_id="stranger", infer=False)
    sign_in(page)
    expect(page.get_by_role("heading", name="Users")).to_be_focused()
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=user, exact=True))
    expect(row).to_have_count(1)
    expect(row.get_by_role("cell").nth(1)).to_have_text("2")  # two raw turns
    expect(row.get_by_role("cell").nth(2)).not_to_have_text("0")  # and memories extracted from them
    expect(page.get_by_role("link", name="stranger")).to_have_count(0)
    # The key is in this tab's session storage, nowhere else.
    assert page.evaluate("JSON.parse(sessionStorage.getItem('memstack.credential')).value") == KEY
    assert page.evaluate("localStorage.length") == 0


def test_an_empty_tenant_says_so(page: Any) -> None:
    sign_in(page, EMPTY_KEY)
    expect(page.get_by_role("heading", name="Users")).to_be_visible()
    page.get_by_label("Open a user by id").fill("nobody-here")
    page.get_by_role("button", name="Open").click()
    expect(page.get_by_text("No memories match these filters.")).to_be_visible()


def test_open_a_memory_see_its_timeline_and_the_turns_it_came_from(
    page: Any, live_server: LiveServer
) -> None:
    user = fresh("reader")
    lisbon = seed(live_server, user)["lisbon"]
    sign_in(page)
    page.get_by_role("link", name=user, exact=True).click()
    expect(page.get_by_role("heading", name=f"Memories of {user}")).to_be_visible()
    page.get_by_label("Tier").select_option("ltm")
    page.get_by_role("button", name="Apply filters").click()
    expect(page).to_have_url(re.compile(r"tier=ltm"))
    page.get_by_role("link", name=lisbon.content).click()
    expect(page.locator("#memory-content")).to_have_text(lisbon.content)
    details = page.locator("dl.facts").first
    expect(details).to_contain_text(lisbon.id)
    expect(details).to_contain_text(str(lisbon.kind))
    timeline = page.locator("ol.timeline > li")
    expect(timeline).to_have_count(1)
    turn = timeline.first.locator("a.turn")
    expect(turn).to_have_count(len(lisbon.source_ids))
    expect(turn.first).to_contain_text("Lisbon")
    turn.first.click()  # the source turn is a page of its own (a raw, tier stm record)
    expect(page.locator("#memory-content")).to_have_text("I moved to Lisbon last spring.")
    expect(page.locator("dl.facts").first).to_contain_text("stm")


def test_search_and_read_the_explain_view(page: Any, live_server: LiveServer) -> None:
    user = fresh("searcher")
    lisbon = seed(live_server, user)["lisbon"]
    sign_in(page)
    page.goto(f"{live_server.url}/ui#/user/{user}/search")
    page.get_by_label("Query").fill("where did Ana move last spring?")
    page.get_by_label("Results (top_k)").fill("5")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_role("heading", name=re.compile(r"Results \(\d+\)"))).to_be_visible()
    hit = page.locator(f'li.hit[data-id="{lisbon.id}"]')
    expect(hit).to_be_visible()
    # Where each stage put it, and every stage's score.
    moves = hit.get_by_role("list", name="Rank after each stage")
    expect(moves.locator("li[data-stage=fusion]")).to_contain_text("fusion: #")
    expect(moves.locator("li[data-stage=temporal]")).to_contain_text("temporal: #")
    hit.get_by_text("Score of every stage").click()
    expect(hit.locator("tr[data-stage=cosine]")).to_be_visible()
    # The query analysis found the time in the query; the stage durations add up to a total.
    analysis = page.locator("#explain dl.facts")
    expect(analysis).to_contain_text("last spring")
    expect(page.locator("#explain tr[data-stage=total]")).to_be_visible()
    expect(page.locator("#explain tr[data-stage=query_analysis]")).to_contain_text("ok")


def test_edit_a_memory_and_see_the_new_version_at_once(page: Any, live_server: LiveServer) -> None:
    user, lisbon = open_memory(page, live_server, "editor")
    page.get_by_role("button", name="Edit").click()
    page.get_by_label("New content").fill("Ana moved to Porto in 2025.")
    page.get_by_role("button", name="Save new version").click()
    expect(page.get_by_role("status").filter(has_text="Saved version 2")).to_be_visible()
    expect(page.locator("#memory-content")).to_have_text("Ana moved to Porto in 2025.")
    versions = page.locator("ol.timeline > li")
    expect(versions).to_have_count(2)
    expect(versions.nth(0)).to_contain_text("superseded")
    expect(versions.nth(0)).to_contain_text(lisbon.content)
    expect(versions.nth(1)).to_contain_text("this version")
    expect(versions.nth(1)).to_contain_text("replaces v1")
    with live_server.client() as client:
        assert [m.version for m in client.history(lisbon.id, user_id=user)] == [1, 2]


def test_delete_then_restore_a_memory(page: Any, live_server: LiveServer) -> None:
    _, lisbon = open_memory(page, live_server, "deleter")
    page.get_by_role("button", name="Delete…").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_role("button", name="Delete").click()
    expect(page.get_by_role("heading", name=re.compile("Memory v2"))).to_contain_text("deleted")
    page.get_by_role("button", name="Restore v1").click()
    expect(page.locator("#memory-content")).to_have_text(lisbon.content)
    versions = page.locator("ol.timeline > li")
    expect(versions).to_have_count(3)
    expect(versions.nth(1)).to_contain_text("deleted")
    expect(versions.nth(2)).to_contain_text("restored")


def test_erase_a_user_only_after_typing_its_id(page: Any, live_server: LiveServer) -> None:
    user, _ = open_user(page, live_server, "eraser")
    page.get_by_role("button", name="Erase user…").click()
    dialog = page.get_by_role("dialog")
    confirm = dialog.get_by_role("button", name="Erase user")
    expect(confirm).to_be_disabled()
    dialog.get_by_label(f"Type {user} to confirm").fill(user[:-1])
    expect(confirm).to_be_disabled()
    dialog.get_by_label(f"Type {user} to confirm").fill(user)
    expect(confirm).to_be_enabled()
    confirm.click()
    expect(page.get_by_role("status").filter(has_text=f"Erased {user}")).to_be_visible()
    expect(page.get_by_role("heading", name="Users")).to_be_visible()
    expect(page.get_by_role("link", name=user, exact=True)).to_have_count(0)
    with live_server.client() as client:
        assert client.list(user_id=user, include_superseded=True).memories == []


def test_run_a_consolidation_and_watch_it_finish(page: Any, live_server: LiveServer) -> None:
    user, _ = open_user(page, live_server, "consolidator")
    page.get_by_role("button", name="Run consolidation").click()
    expect(page.locator("#consolidation-status")).to_contain_text("Consolidation")
    expect(page.get_by_role("status").filter(has_text=f"Consolidation of {user} finished")).to_be_visible()


def test_see_a_dead_lettered_job_and_redrive_it(page: Any, live_server: LiveServer) -> None:
    user = fresh("poisoned")
    # A job the worker cannot run (its time is not a time): retried, then dead-lettered.
    queue = SqliteJobQueue(Database(live_server.data_dir / "memstack.sqlite3"))
    job = Job(type="consolidate", tenant="acme", user_id=user, payload={"now": "not a time"})
    queue.send([job])
    wait_until(
        lambda: any(d["id"] == job.id for d in queue.dead_letters("acme")), what="the job dead-lettered"
    )
    sign_in(page)
    page.get_by_role("link", name="Jobs").click()
    expect(page.get_by_role("heading", name="Background jobs")).to_be_visible()
    row = page.locator(f'tr[data-job="{job.id}"]')
    expect(row).to_contain_text("ValueError")
    expect(row.get_by_role("link", name=user)).to_be_visible()
    row.get_by_role("button", name="Redrive").click()
    expect(page.get_by_role("status").filter(has_text="Redrove 1 job")).to_be_visible()


def test_a_filter_expression_narrows_the_list_and_a_bad_one_is_answered_in_the_apis_words(
    page: Any, live_server: LiveServer
) -> None:
    user, lisbon = open_user(page, live_server, "filterer")
    expect(page.get_by_role("heading", name=f"Memories of {user}")).to_be_visible()
    page.get_by_label("Filter expression (JSON)").fill(f'{{"AND":[{{"kind":"{lisbon.kind}"}}]}}')
    page.get_by_label("Tier").select_option("ltm")
    page.get_by_role("button", name="Apply filters").click()
    expect(page.get_by_role("link", name=lisbon.content)).to_be_visible()
    expect(page.get_by_role("link", name="I moved to Lisbon last spring.")).to_have_count(0)  # a raw turn
    page.get_by_label("Filter expression (JSON)").fill('{"colour":"red"}')
    page.get_by_role("button", name="Apply filters").click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("422")
    expect(alert).to_contain_text("validation_error")


def test_newest_event_first_is_the_apis_order_across_pages(page: Any, live_server: LiveServer) -> None:
    # 52 turns written in one call; turn 00 happened last, turn 51 first. The page holds 50,
    # so a re-order of one page could not put turns 50 and 51 on the second page.
    user = fresh("chronicle")
    start = datetime(2020, 1, 1, tzinfo=UTC)
    turns = [
        {
            "role": "user",
            "content": f"turn {i:02d}",
            "timestamp": (start + timedelta(days=52 - i)).isoformat(),
        }
        for i in range(52)
    ]
    with live_server.client() as client:
        client.add(turns, user_id=user, infer=False)
    sign_in(page)
    page.goto(f"{live_server.url}/ui#/user/{user}")
    page.get_by_label("Order").select_option("event_time")
    page.get_by_role("button", name="Apply filters").click()
    expect(page).to_have_url(re.compile(r"order=event_time"))
    rows = page.locator("table tbody tr td.content")
    expect(rows).to_have_count(50)
    expect(rows.first).to_have_text("turn 00")
    expect(rows.last).to_have_text("turn 49")
    page.get_by_role("button", name="Next page").click()
    expect(rows).to_have_text(["turn 50", "turn 51"])
    expect(page.get_by_label("Order")).to_have_value("event_time")
