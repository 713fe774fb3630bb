#!/usr/bin/env python3
"""Fails on broken internal links in a rendered mdBook.

Usage: scripts/check-book-links.py BOOK_HTML_DIR
       scripts/check-book-links.py --self-test

Every href and src in every .html file under BOOK_HTML_DIR that is not external
(no scheme, not protocol-relative) must name a file inside the book, and its
#fragment, when it has one, must be an id in that file; and no page may hold an
unexpanded mdbook directive such as `{{#include FILE}}` (what mdbook leaves when the
file is missing). mdbook itself only warns, or says nothing, about either. Prints each broken link with the page it is on;
exit status 1 when there is one.
"""

import os
import sys
import tempfile
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids = set()
        self.links = []
        self.directives = []

    def handle_data(self, data):
        at = data.find("{{#")
        if at >= 0:
            self.directives.append(data[at:data.find("}}", at) + 2 if "}}" in data[at:] else at + 40])

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key) and (key == "id" or tag == "a"):
                self.ids.add(attrs[key])
        for key in ("href", "src"):
            if attrs.get(key) is not None and tag in ("a", "img", "link", "script", "source"):
                self.links.append((tag, attrs[key]))


def read(path):
    page = Page()
    with open(path, encoding="utf-8") as f:
        page.feed(f.read())
    return page


def broken_links(root):
    root = os.path.realpath(root)
    pages = {}
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".html"):
                path = os.path.join(folder, name)
                pages[path] = read(path)
    if not pages:
        return [f"{root}: no .html files: is this a rendered book?"]
    broken = []
    for path, page in sorted(pages.items()):
        here = os.path.relpath(path, root)
        for directive in page.directives:
            broken.append(f"{here}: unexpanded mdbook directive {directive} (a missing file?)")
        for tag, link in page.links:
            parts = urlsplit(link)
            if parts.scheme or link.startswith("//"):
                continue
            if parts.path:
                target = os.path.realpath(os.path.join(os.path.dirname(path), unquote(parts.path)))
                if os.path.isdir(target):
                    target = os.path.join(target, "index.html")
            else:
                target = path
            if not (target == root or target.startswith(root + os.sep)):
                broken.append(f"{here}: <{tag}> {link}: points outside the book")
                continue
            if not os.path.isfile(target):
                broken.append(f"{here}: <{tag}> {link}: no such file")
                continue
            fragment = unquote(parts.fragment)
            if fragment and target.endswith(".html"):
                ids = pages[target].ids if target in pages else read(target).ids
                if fragment not in ids:
                    broken.append(f"{here}: <{tag}> {link}: no anchor #{fragment} in {os.path.relpath(target, root)}")
    return broken


def self_test():
    with tempfile.TemporaryDirectory() as d:
        os.mkdir(os.path.join(d, "images"))
        open(os.path.join(d, "images", "a.png"), "wb").close()
        with open(os.path.join(d, "a.html"), "w") as f:
            f.write('<h2 id="one">1</h2><a href="b.html#two">ok</a><a href="#one">ok</a>'
                    '<img src="images/a.png"><a href="https://example.invalid/x">external</a>')
        with open(os.path.join(d, "b.html"), "w") as f:
            f.write('<h2 id="two">2</h2><a href="a.html">ok</a>')
        assert broken_links(d) == [], broken_links(d)
        with open(os.path.join(d, "c.html"), "w") as f:
            f.write('<a href="missing.html">x</a><a href="a.html#nowhere">y</a>'
                    '<img src="images/b.png"><a href="first-run.md">z</a><a href="#gone">w</a>'
                    '<pre><code>{{#include ../../nope.rs}}</code></pre>')
        found = broken_links(d)
        assert len(found) == 6, found
        assert any("unexpanded mdbook directive {{#include ../../nope.rs}}" in b for b in found), found
        assert any("no anchor #nowhere" in b for b in found), found
        assert any("first-run.md: no such file" in b for b in found), found
    print("check-book-links: self-test passed (6 planted faults found, none in a clean book)")


def main(argv):
    if argv == ["--self-test"]:
        self_test()
        return 0
    if len(argv) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    broken = broken_links(argv[0])
    for line in broken:
        print(f"broken link: {line}", file=sys.stderr)
    if broken:
        print(f"check-book-links: {len(broken)} broken internal link(s) in {argv[0]}", file=sys.stderr)
        return 1
    print(f"check-book-links: every internal link and anchor in {argv[0]} resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
