"""Word-level differences between a kept document and a removed one, as escaped HTML.

Words are runs of non-space characters; the whitespace after each word is kept as it
was, so the texts read as written. difflib matches the two word sequences (autojunk off:
a frequent word is still a word to match), and words present on one side only are
wrapped in <del> (kept side) or <ins> (removed side).
"""

from __future__ import annotations

import difflib
import html
import re

_WORD = re.compile(r"(\S+)(\s*)")
# C0 controls other than tab and newlines, and DEL, would render as nothing or garbage.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def escape(text: str) -> str:
    """Text as HTML character data: markup escaped, control characters made visible."""
    return html.escape(_CONTROL.sub("\ufffd", text), quote=True)


def _words(text: str) -> tuple[str, list[tuple[str, str]]]:
    """(leading whitespace, [(word, whitespace after it)])."""
    lead = text[: len(text) - len(text.lstrip())]
    return lead, [(m.group(1), m.group(2)) for m in _WORD.finditer(text, len(lead))]


def _render(lead: str, words: list[tuple[str, str]], changed: list[bool], tag: str) -> str:
    out = [escape(lead)]
    i = 0
    while i < len(words):
        if not changed[i]:
            out.append(escape(words[i][0] + words[i][1]))
            i += 1
            continue
        # One element per run of changed words, the space between them inside it.
        j = i
        while j + 1 < len(words) and changed[j + 1]:
            j += 1
        inner = "".join(w + s for w, s in words[i:j]) + words[j][0]
        out.append(f"<{tag}>{escape(inner)}</{tag}>{escape(words[j][1])}")
        i = j + 1
    return "".join(out)


def word_diff(kept: str, removed: str) -> tuple[str, str]:
    """(kept as HTML with words missing from `removed` in <del>, removed as HTML with words
    missing from `kept` in <ins>)."""
    lead_a, a = _words(kept)
    lead_b, b = _words(removed)
    only_a, only_b = [True] * len(a), [True] * len(b)
    matcher = difflib.SequenceMatcher(None, [w for w, _ in a], [w for w, _ in b], autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            only_a[block.a + k] = False
            only_b[block.b + k] = False
    return _render(lead_a, a, only_a, "del"), _render(lead_b, b, only_b, "ins")
