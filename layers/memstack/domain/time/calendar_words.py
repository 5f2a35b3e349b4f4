"""English calendar vocabulary shared by the query time windows and the message date resolver.

Each user keeps its own shapes and extra words (see ``windows`` and
``relative``): their number words differ on purpose, since a word
added to one would change which phrases its patterns match.
"""

from __future__ import annotations

MONTH_NAMES = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
WEEKDAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# Month number by full name, three-letter abbreviation, and "sept" (kept next to "sep").
MONTH_NUMBERS = {
    key: number
    for number, name in enumerate(MONTH_NAMES, start=1)
    for key in (name, name[:3], *(("sept",) if name == "september" else ()))
}
# Northern-hemisphere meteorological seasons: the month each starts (each lasts three).
SEASON_START_MONTHS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
# Number words both users accept; each adds its own phrases ("few", "a few", "several").
CARDINAL_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
