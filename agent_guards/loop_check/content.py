"""Repetition inside one reply (a content loop). Private: used by ``detect_loop``.

A model that chants ("I will now mark the task as complete." fifteen times in one reply)
is looping even though it made a single action. The check follows gemini-cli's content
loop detection: fixed-size chunks of the prose are compared, and a chunk that comes back
``repeats`` times close together, with the text between its occurrences itself
repeating, is a loop. Code blocks, tables, list items, headings, blockquotes and dividers
are never compared (repeated tokens in code or a list with a long shared prefix are not a
loop), and each of them ends the stretch of prose being compared.

Example:
    >>> repeated_chunk("I will now mark the task as complete.\\n" * 15)
    15
    >>> repeated_chunk("A first line.\\nA second, different line.\\n")
    0
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

__all__ = ["repeated_chunk"]

_MAX_CHARS = 5000  # the newest text of a reply that is read (bounds the cost)
_FENCE = re.compile(r"^\s*(```|~~~)")
_STRUCTURE = re.compile(r"^\s*(?:\|.*|\+[-=+]+\+?|[*+-]\s+\S.*|\d+[.)]\s+\S.*|#{1,6}\s.*|>.*)$")
_WORD = re.compile(r"\w")


def _is_prose(line: str) -> bool:
    return not _STRUCTURE.match(line) and _WORD.search(line) is not None


def _prose(text: str) -> Iterator[str]:
    """Stretches of plain prose, outside code blocks and markdown structure."""
    stretch: list[str] = []
    in_code = False
    for line in text.splitlines(keepends=True):
        if _FENCE.match(line):
            in_code = not in_code
        elif not in_code and (not line.strip() or _is_prose(line)):
            stretch.append(line)
            continue
        if stretch:
            yield "".join(stretch)
        stretch = []
    if stretch and not in_code:
        yield "".join(stretch)


def _loop_in(stretch: str, chunk: int, repeats: int) -> int:
    """How many times the text that loops is repeated in ``stretch`` (0: no loop)."""
    seen: dict[str, list[int]] = {}
    for start in range(len(stretch) - chunk + 1):
        piece = stretch[start : start + chunk]
        at = seen.setdefault(piece, [])
        at.append(start)
        if len(at) < repeats:
            continue
        recent = at[-repeats:]
        if (recent[-1] - recent[0]) / (repeats - 1) > 5 * chunk:
            continue  # occurrences too far apart
        periods = [stretch[a:b] for a, b in itertools.pairwise(recent)]
        if len(set(periods)) <= repeats // 2:  # a shared prefix of distinct items is no loop
            period = max(set(periods), key=periods.count)
            return stretch.count(period)  # how many times the repeated text was said
    return 0


def repeated_chunk(text: str, *, chunk: int = 50, repeats: int = 10) -> int:
    """How many times ``text`` repeats the text it loops on, or 0 when it does not loop.

    Args:
        text: One reply's text (only the newest 5,000 characters are read).
        chunk: Length of the chunks compared.
        repeats: Occurrences, close together (at most ``5 * chunk`` apart on average),
            that make a loop.
    """
    text = text[-_MAX_CHARS:]
    for stretch in _prose(text):
        found = _loop_in(stretch, chunk, repeats)
        if found:
            return found
    return 0
