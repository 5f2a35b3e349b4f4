"""Group a user's unconsolidated STM turns by kind/category and time (Memoria's batches).

A raw turn carries no kind or category. When extraction already turned the
message into LTM memories, their kind and category are used (the extractor
knows best); otherwise a small keyword lexicon decides. Groups are then cut
by time (a gap or span longer than the window starts a new group) and by
size, so each summary covers one topic in one stretch of time and stays
within the summariser's budget. Everything is deterministic: the same turns
always give the same groups, which is what makes a re-run write nothing new.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from memstack.domain.text import words
from memstack.models import Category, Kind, Scope
from memstack.ports.stm import StmEntry


def _cues(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Keyword cues per category; the first category with the most hits wins.
_CATEGORY_CUES: dict[Category, frozenset[str]] = {
    Category.PROFESSIONAL: _cues(
        "job work working office boss colleague colleagues career company team manager promotion client "
        "clients project meeting meetings salary hired interview"
    ),
    Category.TECHNICAL_SKILLS: _cues(
        "python pytorch tensorflow code coding programming rust java javascript sql model models ml "
        "machine learning training gpu kubernetes docker aws api framework library"
    ),
    Category.HEALTH: _cues(
        "doctor sick ill hospital pain injury medicine therapy sleep headache allergy allergic surgery "
        "workout gym running run exercise"
    ),
    Category.RELATIONSHIPS: _cues(
        "wife husband partner girlfriend boyfriend friend friends mom mother dad father sister brother "
        "son daughter kids children family married wedding"
    ),
    Category.HOBBIES: _cues(
        "hobby painting guitar piano music book books reading hiking camping game games gaming photography "
        "garden gardening chess knitting climbing"
    ),
    Category.TRAVEL: _cues(
        "trip travel travelling traveling flight flew vacation holiday visit visited beach hotel abroad "
        "country city paris tokyo london"
    ),
    Category.DIETARY: _cues(
        "vegan vegetarian food eat eating meal dinner lunch breakfast cook cooking recipe coffee tea "
        "gluten diet"
    ),
    Category.FINANCIAL: _cues(
        "money budget savings save invest investing loan mortgage rent debt bank paid price expensive"
    ),
    Category.EDUCATIONAL: _cues(
        "school university college degree course class classes study studying exam thesis phd student teacher"
    ),
    Category.GOALS: _cues("goal goals plan plans planning hope dream want aim resolution someday"),
    Category.EMOTIONAL: _cues(
        "feel feeling felt happy sad angry stressed anxious excited lonely proud worried upset"
    ),
    Category.PERSONAL_DETAILS: _cues("name born birthday age live lives living moved home address hometown"),
    Category.COMMUNICATION_STYLE: _cues("concise brief detailed formal informal tone emoji reply"),
    Category.BEHAVIORAL_PATTERNS: _cues("usually always never often every habit routine morning"),
}
_PREFERENCE_CUES = _cues(
    "like likes love loves prefer prefers favorite favourite enjoy enjoys hate hates dislike dislikes "
    "rather fan"
)
_EVENT_CUES = _cues(
    "yesterday today tomorrow tonight last next ago went visited met attended started finished bought "
    "moved won lost will weekend monday tuesday wednesday thursday friday saturday sunday"
)


def classify(text: str) -> tuple[Kind, str | None]:
    """Kind and category of one turn by keyword cues (``None``: no topic stood out)."""
    toks = set(words(text))
    if toks & _PREFERENCE_CUES:
        kind = Kind.PREFERENCE
    elif toks & _EVENT_CUES:
        kind = Kind.EVENT
    else:
        kind = Kind.FACT
    best: str | None = None
    best_hits = 0
    for category, cues in _CATEGORY_CUES.items():
        hits = len(toks & cues)
        if hits > best_hits:
            best, best_hits = category, hits
    if best is None and kind == Kind.PREFERENCE:
        best = Category.PREFERENCES
    return kind, best


@dataclass
class Group:
    kind: Kind
    category: str | None
    scope: Scope
    session_id: str | None
    entries: list[StmEntry] = field(default_factory=list)

    @property
    def message_ids(self) -> list[str]:
        return [e.message.id for e in self.entries]

    @property
    def key(self) -> str:
        """A stable id of the group: the same messages always give the same key."""
        joined = "\x1f".join(sorted(self.message_ids))
        return hashlib.blake2b(joined.encode(), digest_size=10).hexdigest()

    @property
    def last_time(self) -> datetime:
        return max(entry_time(e) for e in self.entries)


def entry_time(entry: StmEntry) -> datetime:
    return entry.message.timestamp or entry.received_at


def group_entries(
    entries: list[StmEntry],
    labels: dict[str, tuple[Kind, str | None]],
    *,
    window: timedelta,
    max_size: int,
) -> list[Group]:
    """Split entries into topic groups, then cut each at time gaps wider than ``window`` or at ``max_size``.

    ``labels`` maps a message id to its (kind, category); turns without a label are classified here.
    CONTEXT turns are grouped per session (they are visible only there); USER turns across sessions.
    """
    ordered = sorted(entries, key=lambda e: (entry_time(e), e.message.id))
    label = {e.message.id: labels.get(e.message.id) or classify(e.message.content) for e in ordered}
    # The topic is the category; turns without one are grouped by their kind instead.
    buckets: dict[tuple[str, str, str], list[StmEntry]] = {}
    for e in ordered:
        kind, category = label[e.message.id]
        session = e.session_id if e.scope == Scope.CONTEXT else None
        topic = f"category:{category}" if category else f"kind:{kind}"
        buckets.setdefault((topic, str(e.scope), session or ""), []).append(e)
    groups: list[Group] = []
    for (_, scope, session), members in sorted(buckets.items()):
        chunks: list[list[StmEntry]] = []
        for e in members:
            first = chunks[-1][0] if chunks else None
            if first is None or len(chunks[-1]) >= max_size or entry_time(e) - entry_time(first) > window:
                chunks.append([])
            chunks[-1].append(e)
        for chunk in chunks:
            kinds = Counter(label[e.message.id][0] for e in chunk)
            # Most common kind wins; ties go to the kind seen first, so the choice is stable.
            kind = max(kinds, key=lambda k: (kinds[k], -[label[e.message.id][0] for e in chunk].index(k)))
            groups.append(Group(kind, label[chunk[0].message.id][1], Scope(scope), session or None, chunk))
    return groups
