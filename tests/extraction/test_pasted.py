"""Pasted code, logs and configuration are read past: only what the user said becomes a memory."""

from __future__ import annotations

from memstack.adapters.llm.rules.pasted import prose


def test_a_fenced_block_goes_whole_and_the_prose_around_it_stays() -> None:
    text = "Here is my compose file:\n```yaml\nweb:\n  image: nginx\n```\n\nWe run it on one VM."
    assert prose(text) == "Here is my compose file:\nWe run it on one VM."


def test_an_unclosed_fence_runs_to_the_end() -> None:
    assert prose("I use this query:\n```sql\nSELECT * FROM orders\nWHERE id = 3") == "I use this query:"


def test_a_traceback_and_log_lines_are_not_prose() -> None:
    text = (
        "It fails like this:\n"
        "Traceback (most recent call last):\n"
        '  File "app.py", line 12, in <module>\n'
        "    import pandas as pd\n"
        "ModuleNotFoundError: No module named 'pandas'\n"
        "2024-03-01 09:12:44 ERROR worker stopped\n"
        "[WARN] retrying in 5s\n"
        "I use Python 3.12 in a venv."
    )
    assert prose(text) == "It fails like this:\nI use Python 3.12 in a venv."


def test_a_compilers_diagnostic_is_not_prose() -> None:
    text = "This won't compile:\nerror[E0502]: cannot borrow `self.cache` as mutable\nwarning: unused import"
    assert prose(text) == "This won't compile:"


def test_unfenced_code_lines_are_not_prose() -> None:
    text = (
        "def add(a, b):\n    return a + b\n}\nconst x = load();\nI wrote this helper for the billing service."
    )
    assert prose(text) == "I wrote this helper for the billing service."


def test_plain_messages_are_left_as_they_are() -> None:
    one_line = "I moved to Osaka: the rent is lower (and the food better)."
    assert prose(one_line) == one_line
    wrapped = "I moved to Osaka last month\nand started a new job at a bakery."
    assert prose(wrapped) == wrapped


def test_a_one_line_query_and_assignments_are_pasted_not_said() -> None:
    from memstack.adapters.llm.rules.pasted import prose

    assert prose("SELECT id, email FROM accounts WHERE deleted_at IS NULL;") == ""
    config = 'My config:\nretries = 3\ntimeout_ms = 2500\n"backoff": "exponential",\nI use the Go SDK v2.'
    assert prose(config) == "My config:\nI use the Go SDK v2."
    assert prose("My score = 3 points, not bad.") == "My score = 3 points, not bad."
