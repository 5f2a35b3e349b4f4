"""``domain.text`` stems with snowballstemmer's English module loaded alone: the same stems as the
package's own ``stemmer("english")`` (the in-Lambda BM25 index stores stems, so a change would
stop stored documents matching new queries)."""

from __future__ import annotations

import re
from pathlib import Path

import snowballstemmer
from memstack.domain import text

DOCS = Path(__file__).resolve().parents[2] / "docs"


def vocabulary() -> set[str]:
    """Every distinct word of the project's documentation, plus forms each Snowball step handles."""
    words = {w.lower() for page in DOCS.glob("*.md") for w in re.findall(r"\w+", page.read_text())}
    words |= set(
        """
        caresses ponies ties caress cats feed agreed plastered bled motoring sing conflated troubled
        sized hopping tanned falling hissing fizzed failing filing happy sky relational conditional
        rational valenci hesitanci digitizer conformabli radicalli differentli vileli analogousli
        vietnamization predication operator feudalism decisiveness hopefulness callousness formaliti
        sensitiviti sensibiliti triplicate formative formalize electriciti electrical hopeful goodness
        revival allowance inference airliner gyroscopic adjustable defensible irritant replacement
        adjustment dependent adoption homologou communism activate angulariti homologous effective
        bowdlerize probate rate cease controll roll generously dying lying news skies cried
        organization bias andes atlas cosmos howe idly gently ugly early only singly inning outing
        canning herring earring proceed exceed succeed naïve café façade résumé
        """.split()  # noqa: SIM905 - a word list reads best as words
    )
    return words


def test_the_english_stems_are_the_packages_own() -> None:
    reference = snowballstemmer.stemmer("english")
    words = vocabulary()
    assert len(words) > 2000
    differ = {
        w: (text.stem(w), reference.stemWord(w)) for w in words if text.stem(w) != reference.stemWord(w)
    }
    assert differ == {}


def test_the_package_itself_is_not_what_domain_text_loaded() -> None:
    # a stemmer object from the private load, not the public package's class
    assert type(text._STEMMER).__module__ == "_memstack_snowball_english.english_stemmer"
    assert type(text._STEMMER).__module__ != snowballstemmer.stemmer("english").__class__.__module__
