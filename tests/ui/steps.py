"""The steps several browser tests start from: a seeded user, signed in, on one of its pages."""

from __future__ import annotations

import uuid
from typing import Any

from playwright.sync_api import expect

from .conftest import LiveServer, sign_in


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def seed(server: LiveServer, user: str) -> dict[str, Any]:
    """Two turns, extracted at once (sync), so the user has raw turns and a long-term memory."""
    with server.client() as client:
        client.add(
            [
                {"role": "user", "content": "I moved to Lisbon last spring.", "speaker": "Ana"},
                {"role": "user", "content": "I am allergic to peanuts.", "speaker": "Ana"},
            ],
            user_id=user,
            sync=True,
        )
        memories = client.list(user_id=user, tier="ltm").memories
    lisbon = next(m for m in memories if "Lisbon" in m.content)
    return {"lisbon": lisbon}


def open_user(page: Any, server: LiveServer, prefix: str, view: str = "") -> tuple[str, Any]:
    """A new seeded user, signed in, on its page (``view``: a path below it): (user, its Lisbon memory)."""
    user = fresh(prefix)
    lisbon = seed(server, user)["lisbon"]
    sign_in(page)
    page.goto(f"{server.url}/ui#/user/{user}{view}")
    return user, lisbon


def open_memory(page: Any, server: LiveServer, prefix: str) -> tuple[str, Any]:
    """A new seeded user, signed in, on the page of its Lisbon memory: (user, that memory)."""
    user, lisbon = open_user(page, server, prefix)
    page.goto(f"{server.url}/ui#/user/{user}/memory/{lisbon.id}")
    expect(page.locator("#memory-content")).to_have_text(lisbon.content)
    return user, lisbon
