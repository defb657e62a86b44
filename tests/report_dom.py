"""A small DOM of report.html for the tests: the page as rendered (tests/unit) or as
Chromium dumps it after loading (tests/e2e), parsed with the standard library."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser

_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = field(default_factory=list)

    def walk(self) -> Iterator[Node]:
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.walk()

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def find_all(self, tag: str | None = None, cls: str | None = None) -> list[Node]:
        return [
            n
            for n in self.walk()
            if (tag is None or n.tag == tag) and (cls is None or cls in n.attrs.get("class", "").split())
        ]

    def by_id(self, ident: str) -> Node | None:
        return next((n for n in self.walk() if n.attrs.get("id") == ident), None)

    def table_rows(self) -> list[list[str]]:
        """The cell texts of each body row."""
        return [[td.text() for td in tr.find_all("td")] for tr in self.find_all("tr") if tr.find_all("td")]


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in _VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(html: str) -> Node:
    builder = _Builder()
    builder.feed(html)
    builder.close()
    return builder.root


@dataclass(frozen=True)
class Pair:
    kept_header: str
    kept_text: str
    removed_header: str
    removed_text: str
    deleted: list[str]  # the texts of the kept side's <del> elements
    inserted: list[str]  # the texts of the removed side's <ins> elements


def sample_pairs(root: Node) -> list[tuple[str, list[Pair]]]:
    """Each sample cluster's heading and its kept/removed pairs."""
    out = []
    for article in root.find_all("article", "sample"):
        (h3,) = article.find_all("h3")
        pairs = []
        for pair in article.find_all("div", "pair"):
            kept, removed = pair.find_all("div", "doc")
            (kt,), (rt,) = kept.find_all("div", "text"), removed.find_all("div", "text")
            pairs.append(
                Pair(
                    kept.find_all("h4")[0].text(),
                    kt.text(),
                    removed.find_all("h4")[0].text(),
                    rt.text(),
                    [d.text() for d in kt.find_all("del")],
                    [d.text() for d in rt.find_all("ins")],
                )
            )
        out.append((h3.text(), pairs))
    return out


def external_references(root: Node) -> list[str]:
    """Every src/href/action/poster value that would make a request (not data: or #anchor),
    and every script, link, iframe, object or embed element."""
    found = []
    for n in root.walk():
        if n.tag in ("script", "link", "iframe", "object", "embed", "base"):
            found.append(f"<{n.tag}>")
        for key in ("src", "href", "action", "poster", "srcset", "xlink:href"):
            value = n.attrs.get(key)
            if value is not None and not value.startswith(("data:", "#")):
                found.append(f"{key}={value}")
        style = n.attrs.get("style", "") + (n.text() if n.tag == "style" else "")
        if "url(" in style or "@import" in style:
            found.append(f"style: {style[:80]}")
    return found
