"""What a message pastes rather than says: code, logs, stack traces, configuration.

A user who pastes a traceback and adds "I use Python 3.12 in a venv" said one thing worth
remembering; the traceback is the conversation's material, not a fact about them (and it
stays searchable as the raw turn). The extractor reads only the prose that is left: fenced
blocks go whole, and so do the lines that look like code or log output (indented, opening
with a code keyword, a log's timestamp or level, an exception's name, or mostly symbols).
"""

from __future__ import annotations

import re

# ``` or ~~~ fences, up to the closing one (or the end of the message when it is never closed).
_FENCED = re.compile(r"^[ \t]*(```|~~~).*?(?:^[ \t]*\1[^\n]*$|\Z)", re.MULTILINE | re.DOTALL)
_INDENTED = re.compile(r"^(?: {4}|\t)")
_CODE_LINE = re.compile(
    r"^\s*(?:"
    r"(?:def|class|import|return|raise|async def|elif|except|try:|finally:|#include|function|const|let|var|"
    r"public|private|protected|package|func|fn|impl|struct|SELECT|INSERT INTO|CREATE TABLE|ALTER TABLE)\b"
    r"|from\s+[\w.]+\s+import\b"
    r"|(?:if|for|while|with)\b[^.!?]*:\s*$"
    r"|[}\])]"  # a closing bracket opens the line
    r"|[$>#]\s+\S"  # a shell prompt or a comment
    r"|Traceback \(most recent call last\)"
    r'|File "[^"]+", line \d+'
    r"|[A-Z]\w*(?:Error|Exception|Warning)\b:?"
    r"|(?:error|warning|fatal|note)(?:\[\w+\])?:\s"  # a compiler's diagnostic ("error[E0502]: cannot borrow")
    r"|\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}"
    r"|\[?(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL|CRITICAL)\]?[: ]"
    r"|[\w.-]+:\s*$"  # a configuration key that opens a block ("services:")
    r"|-\s+[\w./:-]+\s*$"  # a list item of one token ("- 8080:80")
    r"|[A-Za-z_][\w.\[\]\"']*\s*(?:[-+*/|&]?=|:=)\s*\S"  # an assignment ("timeout_ms = 2500")
    r'|"[^"]+"\s*:'  # a JSON key
    r"|</?[a-zA-Z][\w-]*[\s>/]"  # a markup tag
    r"|@\w+"  # a decorator
    r"|(?:SELECT|UPDATE\s+\w+\s+SET|DELETE\s+FROM|WITH\s+\w+\s+AS|DROP\s+TABLE|CREATE\s+(?:UNIQUE\s+)?INDEX)\b"
    r"|[\w.]+\([^()]*\)\s*;?\s*$"  # a call on a line of its own ("print(df.head())")
    r")"
    r"|[{;]\s*$",  # a line that ends in an opening brace or a semicolon
)
_SYMBOLS = re.compile(r"[{}\[\]()<>=;:/\\|$#@*&^%`~+_-]")


def _looks_pasted(line: str) -> bool:
    stripped = line.strip()
    if not stripped:
        return False
    if _INDENTED.match(line) or _CODE_LINE.search(line):
        return True
    # Mostly symbols: a regular expression, a path list, a data row.
    return len(stripped) >= 12 and len(_SYMBOLS.findall(stripped)) > 0.25 * len(stripped)


def prose(text: str) -> str:
    """``text`` without what it pastes (an empty string when it is all pasted)."""
    if "\n" not in text and "```" not in text:
        return "" if _looks_pasted(text.strip()) else text  # a one-line query or assignment pasted alone
    lines = _FENCED.sub("", text).splitlines()
    return "\n".join(line for line in lines if line.strip() and not _looks_pasted(line)).strip()
