"""A page's main content as sections: each heading's text, with its heading path and anchor.

Documentation pages are long and framed by chrome: a navigation bar, a sidebar with the
page's table of contents, "Show source" and "Edit this page" links, version banners, a
footer. Stored as article text, that chrome came back as answers, and a 56,000-character page
was one article in which the answer could not be found (docs/quality.md, "Real documentation").
So the page's main container is found (``<main>``, ``role=main``, ``<article>``, or a theme's
usual body), the chrome inside it is dropped (and an entry's collapsed history of changes
kept as "Added in: v…" alone), and the text is split at its headings: every
section carries the path of headings above it ("Data Structures > More on Lists") and the
id a link can point to (``page#more-on-lists``).

A page with no recognisable main container returns None: the caller falls back to a general
extractor (trafilatura), which reads article-like pages well.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from itertools import islice
from urllib.parse import unquote

from lxml import html as lxml_html
from lxml.etree import ParserError, _Element

from engine.knowledge.models import Article, Section
from engine.knowledge.query import STOPWORDS
from engine.knowledge.scrape.errors import NotAnArticle
from engine.knowledge.scrape.links import canonical_of

# Where a page's own content lives, most specific first.
MAIN_XPATHS = (
    "//*[@role='main']",
    "//main",
    "//article",
    "//*[contains(concat(' ', normalize-space(@class), ' '), ' body ')][.//h1]",
    "//*[@id='content' or @id='main-content' or @id='main']",
    # DocBook's and Texinfo's HTML (Valgrind's manual, zsh's, the GNU manuals): no <main>,
    # the page's division under a navigation table.
    *(
        f"//div[contains(concat(' ', normalize-space(@class), ' '), ' {division} ')]"
        for division in ("book", "part", "chapter", "appendix", "preface", "article", "sect1")
    ),
    # Texinfo's indexes, a division of this class alone (pandoc marks a section
    # "section level1 unnumbered": one section of a page, not its content)
    "//div[@class='unnumbered']",
)
# Chrome that themes put inside the main container too.
DROPPED_TAGS = frozenset(
    "nav aside footer script style noscript template form button select svg iframe".split()
)
# Class or id words of chrome that themes put inside the main container too (whole words:
# Sphinx's "toc-backref" is a heading's own link, not a table of contents).
DROPPED_NAMES = re.compile(
    r"headerlink|_?toc|(?!no_)[a-z]+_toc(?:_[a-z]+)?|toc_[a-z]+|_?table[-_]?of[-_]?contents|sphinxsidebar|related|breadcrumbs?|edit-?this-?page|"
    r"navigation|navbar|sidebar|version-?(?:badge|switcher|banner|warning)|skip-?link|"
    r"prev-?next|pagination|nav-?panel|feedback|copy-?button|sr-only|visually-hidden|footer|"
    r"srclink",
    re.IGNORECASE,
)
# An entry's history of changes, a collapsed table ("History": version, change), and the one
# line of it kept ("Added in: v0.1.25").
CHANGELOG_NAMES = re.compile(r"changelog", re.IGNORECASE)
ADDED_IN_RE = re.compile(r"\s*Added in: v")
# A label a theme puts beside a page's name in its heading ("npm-install @11.19.1"): the
# version, not part of the name the answers and the sources show.
HEADING_LABELS = re.compile(r"version|badge", re.IGNORECASE)
MIN_CONTENTS_LINKS = 3  # a list of only this many links to the page's own sections, or more
MIN_INDEX_LINKS = 100  # a list or table of only links, this many or more: an index
# The words of a bar of links to the pages around ("[ << ] [ < ] [ Up ] [ > ] [Top] [Index]")
PAGER_WORDS = frozenset("up top contents index next previous prev home back forward".split())
WORD_RE = re.compile(r"\w+")
PAGER_MAX_CHARS = 300  # Texinfo's bar, its spaces included, is about 100
# The heading of a list of links to other pages that is navigation, not the page's content
# (a list of links under another heading may be: "Wing IDE, Komodo IDE, PyCharm").
SEE_ALSO_RE = re.compile(r"(?:see also|related(?: pages| topics)?|popular pages):?", re.I)
HEADING_TAGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
BLOCK_TAGS = frozenset(
    "p div section article li ul ol dl dt dd pre blockquote table thead tbody tr caption "
    "figure figcaption br hr details summary header".split()
)
CELL_TAGS = frozenset({"td", "th"})
PERMALINK_MARKS = "¶#🔗§"  # the characters themes append to a heading as its link
MIN_MAIN_CHARS = 20  # less is a stub: the general extractor reads the page instead
ENTRY_NAME_CHARS = 80  # an entry with no parameters named by a long phrase: its start
SPACES_RE = re.compile(r"\s+")
BANNER_MAX_WORDS = 8  # a line before a body's first heading this long is prose, not a banner
LABEL_LEVEL = 7  # a labelled block sits under every heading above it
LABEL_MAX_CHARS = 150  # longer bold words are a paragraph in bold, not a label
# "2.1. " of "2.1. Checkpointing": not "2024 " of a heading, nor a release's "2.1 (2024-03-01)"
SECTION_NUMBER_RE = re.compile(r"^\d+(?:\.\d+)*\.\s+(?=[A-Za-z])")
OPTION_RE = re.compile(r"--?[A-Za-z][\w-]*")  # a command-line option, as an entry's name
# ... and as a manual's term begins it: "-4", "--3way", "--[no-]signed", "-<n>" too
OPTION_TERM_RE = re.compile(r"--?(?:\[no-\])?[A-Za-z0-9<]")
# ... and a setting's name, as a configuration reference's term: "gc.auto", "branch.<name>.remote"
SETTING_RE = re.compile(r"[a-z][\w-]*(?:\.(?:[\w-]+|<[\w-]+>))+")
CODE_TAGS = ("code", "tt", "kbd", "samp")  # what names a thing the reader types
MAX_TERM_STOPWORDS = 2  # after a term's name in code ("if the"): a sentence about it


OpenEntry = tuple[_Element, str, str | None]  # (its list, its name, its anchor)


@dataclass(frozen=True, slots=True)
class Page:
    title: str
    sections: tuple[Section, ...]
    canonical: str | None = None  # the page's rel=canonical address, when it gives one

    @property
    def text(self) -> str:
        return "\n".join(section.text for section in self.sections)

    def article(
        self, url: str, etag: str | None = None, last_modified: str | None = None
    ) -> Article:
        """The page as the knowledge base stores it."""
        return Article(
            url, self.title, self.text, etag, last_modified, self.sections, self.canonical
        )


def page_sections(html: bytes, root: _Element | None = None) -> Page | None:
    """The page's title and the sections of its main content; None when it has no
    recognisable main container (or too little text in it); ``NotAnArticle`` when what it
    holds is an index of links. ``root``: the page already parsed (the crawl's), changed
    here: its chrome is dropped."""
    if root is None:
        try:
            root = lxml_html.document_fromstring(html)
        except (ParserError, ValueError):
            return None
    main = _main_container(root)
    if main is None:
        return None
    blocks = [*_title_block(root, main), main]
    indexes = sum(_drop_chrome(block) for block in blocks)
    for block in blocks:
        _history_as_added_in(block)
    sections = _Splitter().split(blocks)
    joined = len(blocks) > 1
    framed = main.tag == "body"  # it holds the site's banner and menu too, before a heading
    if framed and not sections[0].path:
        sections = _without_banner(sections)
    if sum(len(section.text) for section in sections) < MIN_MAIN_CHARS:
        _refuse_an_index(indexes)
        return None  # a stub: the general extractor reads the page instead
    title = sections[0].path[0] if sections[0].path else _document_title(root)
    if framed or joined:  # "git-add(1)", not its heading's "git-add(1) Manual Page"
        title = _document_title(root) or title
    if not sections[0].path and _spaced(sections[0].text).strip() == title and sections[1:]:
        sections = sections[1:]  # the theme's banner of the page's title: no text of its own
    elif not sections[0].path:  # text before the first heading: under the page's title
        sections[0] = Section((title,), None, sections[0].text)
    return Page(title, tuple(sections), canonical_of(root))


def _refuse_an_index(indexes: int) -> None:
    """Raise ``NotAnArticle`` for a page with too little text once its indexes (``_is_index``)
    are left out: links alone, no article for the general extractor to read instead."""
    if indexes:
        raise NotAnArticle("an index: nothing but links to other pages")


def _title_block(root: _Element, main: _Element) -> list[_Element]:
    """The block just before ``main`` that holds the page's title (its ``<h1>``), when
    ``main`` holds none: read before it. AsciiDoc's manual pages (Git's) put the title and
    the NAME line ("git-gc - Cleanup unnecessary files and optimize the local repository")
    in a header before ``#content``: read without it, every page was titled "SYNOPSIS", and
    what a command does was nowhere. Read in place, not copied into a new element: the crawl
    parsed the page in another thread, and lxml must not mix two threads' documents."""
    if next(main.iter("h1"), None) is not None:
        return []
    title = next(root.iter("h1"), None)
    named = _document_title(root)
    if title is None or not named or not heading_text(title).startswith(named):
        return []  # a site's banner ("Acme Docs"), not this page's title
    header = next((block for block in title.iterancestors() if block.getnext() is main), None)
    if header is None or header.tag == "header" or header.get("role") == "banner":
        return []
    return [header]


def _without_banner(sections: list[Section]) -> list[Section]:
    """``sections`` without the short lines before the first heading of a page read from its
    body: a banner's and a menu's ("Small. Fast. Reliable.", "Home", "Documentation"), not an
    introduction's sentences."""
    first, *rest = sections
    kept = [line for line in first.text.splitlines() if len(line.split()) >= BANNER_MAX_WORDS]
    if not kept:
        return rest or sections
    return [replace(first, text="\n".join(kept)), *rest]


def heading_text(element: _Element) -> str:
    """A heading's words, without the permalink mark a theme appends ("Errors¶")."""
    text = _spaced(element.text_content()).strip()
    return text.rstrip(PERMALINK_MARKS).strip()


def _main_container(root: _Element) -> _Element | None:
    for xpath in MAIN_XPATHS:
        found = root.xpath(xpath)
        if found:
            return max(found, key=lambda element: len(element.text_content()))
    return _headings_holder(root)


def _headings_holder(root: _Element) -> _Element | None:
    """The smallest element that holds all the page's headings and labels (two or more):
    the content of a theme that marks none (SQLite's pages: a plain ``<div>`` after the
    site's banner and menu, or the body itself). Read by trafilatura as one article, a 40 KB
    page was passages without headings, and its answers were quoted from the wrong section."""
    headings = list(root.iter(*HEADING_TAGS))
    headings += [p for p in root.iter("p") if _label_of(p) is not None]
    if len(headings) < 2:
        return None
    holders = [set(heading.iterancestors()) for heading in headings[1:]]
    for holder in headings[0].iterancestors():
        if all(holder in ancestors for ancestors in holders):
            return None if holder.tag == "html" else holder
    return None


def _drop_chrome(main: _Element) -> int:
    """Remove the navigation, tables of contents, indexes, permalinks and the like inside
    ``main``, and the version labels inside its headings; how many indexes it removed."""
    doomed = [
        element
        for element in main.iter()
        if isinstance(element.tag, str)
        and element is not main
        and (
            element.tag in DROPPED_TAGS
            or _names_match(element, DROPPED_NAMES)
            or element.get("role") in ("navigation", "search", "banner", "contentinfo")
            or element.get("aria-hidden") == "true"
            or element.get("hidden") is not None
            or _is_link_list(element)
            or _is_pager(element)
        )
    ]
    doomed += [
        label
        for heading in main.iter(*HEADING_TAGS)
        for label in heading.iter()
        if label is not heading and _names_match(label, HEADING_LABELS)
    ]
    indexes = sum(_is_index(element) for element in doomed)
    for element in doomed:
        if element.getparent() is not None:
            element.drop_tree()  # keeps the element's tail text
    return indexes


def _history_as_added_in(main: _Element) -> None:
    """An entry's history of changes (Node.js's API pages: a collapsed "History" table of
    versions and changes before each entry's description) as the line "Added in: v0.1.25"
    alone: stored as it is, the table opened every entry's text, and so its quote and what the
    model read first ("History / Version | Changes / v6.0.0 / Passing a non-string…")."""
    for history in list(main.iter("details")):
        if not _names_match(history, CHANGELOG_NAMES) or history.getparent() is None:
            continue
        added = [text for text in map(_spaced, history.itertext()) if ADDED_IN_RE.match(text)]
        line = history.makeelement("p", {})  # of its own document: the crawl's thread made it
        line.text = " ".join(dict.fromkeys(text.strip() for text in added))
        line.tail = history.tail
        history.getparent().replace(history, line)


def _names_match(element: _Element, pattern: re.Pattern[str]) -> bool:
    """Whether one of the element's class or id words is, whole, one ``pattern`` matches."""
    names = f"{element.get('class', '')} {element.get('id', '')}"
    return any(pattern.fullmatch(name) for name in names.split())


def _is_link_list(element: _Element) -> bool:
    """Navigation inside the content: a list (or a table) of nothing but links, to the page's
    own sections (a table of contents: "#synopsis", "#description", ..., stored as the
    page's first section, it came back as an answer), or, under a "See also" heading, to
    other pages (their command names outranked the page that documents them: "What does npm
    prune remove?" found npm's removal page's "See also" first), or an index."""
    if element.tag not in ("ul", "ol", "table"):
        return False
    links = _only_links(element)
    if not links:
        return False
    # the crawl made every link absolute, from the page's address (lxml quotes that one)
    page = unquote(str(element.base_url or "").split("#", 1)[0])
    own = [link for link in links if unquote(link.get("href", "").split("#", 1)[0]) in ("", page)]
    if len(own) == len(links) >= MIN_CONTENTS_LINKS or len(links) >= MIN_INDEX_LINKS:
        return True
    before = element.getprevious()
    return (
        before is not None
        and before.tag in HEADING_TAGS
        and SEE_ALSO_RE.fullmatch(heading_text(before)) is not None
    )


def _is_pager(element: _Element) -> bool:
    """A bar of links to the pages around, whose words are a pager's alone: Texinfo's "[ << ]
    [ < ] [ Up ] [ > ] [ >> ] [Top] [Contents] [Index] [ ? ]" above every node of zsh's
    manual, a line of chrome at the start of its sections."""
    if element.tag not in ("table", "div", "p", "ul", "ol"):
        return False
    links = (link for link in element.iter("a") if link.get("href") is not None)
    if len(list(islice(links, 2))) < 2:
        return False  # most blocks: no need to read their text
    text = _short_text(element, PAGER_MAX_CHARS)  # not a chapter's whole text per <div>
    return text is not None and set(WORD_RE.findall(text.lower())) <= PAGER_WORDS


def _short_text(element: _Element, limit: int) -> str | None:
    """``element``'s text if it has at most ``limit`` characters, else None (read no further)."""
    parts: list[str] = []
    for part in element.itertext():
        parts.append(part)
        limit -= len(part)
        if limit < 0:
            return None
    return "".join(parts)


def _is_index(element: _Element) -> bool:
    """An index: a list or a table of nothing but links, a hundred or more (Texinfo's
    "Variables Index": "HISTSIZE | 15.6 Parameters Used By The Shell", row after row)."""
    return element.tag in ("ul", "ol", "table") and len(_only_links(element)) >= MIN_INDEX_LINKS


def _only_links(element: _Element) -> list[_Element]:
    """The links of ``element`` when its text is theirs alone (a table's headers aside:
    "Index Entry", "Section", "Jump to:"), else none."""
    links = [link for link in element.iter("a") if link.get("href") is not None]
    linked = sum(_length(link) for link in links)
    headers = sum(_length(header) for header in element.iter("th", "caption"))
    return links if links and _length(element) - headers == linked else []


def _length(element: _Element) -> int:
    return len(SPACES_RE.sub("", element.text_content()))


class _Splitter:
    """Walks the main container in document order, cutting a section at every heading."""

    def __init__(self) -> None:
        self.sections: list[Section] = []
        self.path: list[tuple[int, str]] = []  # (level, text) of the headings above
        self.entries: list[OpenEntry] = []  # the API entries open, innermost last
        self.anchor: str | None = None
        self.heading_anchor: str | None = None
        self.lines: list[str] = []
        self.line: list[str] = []
        self.headings_seen = 0

    def split(self, blocks: list[_Element]) -> list[Section]:
        for block in blocks:
            self._walk(block)
        self._close_section()
        return self.sections or [Section((), None, "")]

    def _walk(self, element: _Element) -> None:
        tag = element.tag if isinstance(element.tag, str) else ""
        if tag in HEADING_TAGS:
            self._heading(element, HEADING_TAGS[tag])
        elif tag == "dt" and _is_entry(element):
            self._entry(element)
        elif tag == "p" and (label := _label_of(element)) is not None:
            self._label(*label)
        elif tag == "pre":
            self._break()
            self.lines.extend(line.rstrip() for line in element.text_content().splitlines())
        else:
            self._walk_children(element, tag)

    def _walk_children(self, element: _Element, tag: str) -> None:
        block = tag in BLOCK_TAGS
        if block:
            self._break()
        if tag and element.text:
            self.line.append(element.text)
        for child in element:
            self._walk(child)
            if child.tail:
                self.line.append(child.tail)
        if tag in CELL_TAGS:
            self.line.append(" | ")
        if block:
            self._break()
        if self.entries and self.entries[-1][0] is element:  # the entry's list ends
            self._close_section()
            self.entries.pop()
            self.anchor = self.entries[-1][2] if self.entries else self.heading_anchor

    def _heading(self, element: _Element, level: int) -> None:
        text = SECTION_NUMBER_RE.sub("", heading_text(element))  # "2.1. Checkpointing"
        if not text:
            return
        # The page's own title needs no anchor: its link is the page's ("#----npm-get----11191",
        # npm's id for "npm-get @11.19.1", pointed nowhere a reader needs). A page whose
        # sections are all <h1> (SQLite's) has its title elsewhere: the later ones are sections.
        titled = level > 1 or self.headings_seen > 0
        self._open(level, text, _anchor_of(element) if titled else None)
        self.headings_seen += 1

    def _label(self, text: str, anchor: str) -> None:
        """A labelled block (``_label_of``): a section of its own under the headings above,
        until the next label or heading."""
        self._open(LABEL_LEVEL, text, anchor)

    def _open(self, level: int, text: str, anchor: str | None) -> None:
        """A new section, named ``text`` under the headings above ``level``."""
        self._close_section()
        self.path = [(lvl, words) for lvl, words in self.path if lvl < level] + [(level, text)]
        self.entries = []
        self.anchor = self.heading_anchor = anchor

    def _entry(self, term: _Element) -> None:
        """An API entry, a glossary term or an option (``<dt id=...>``, or DocBook's ``<dt><a
        name=...>``): a section of its own, named by
            its first words under the headings above it, until its list ends."""
        anchor = _entry_id(term)
        code = None if anchor or _names_setting(term) else _code_name(term)
        name = code or _entry_name(heading_text(term))
        dl = term.getparent()
        before = term.getprevious()
        follows = before is not None and before.tag == "dt" and _is_entry(before)
        if follows and not anchor and self.entries and self.entries[-1][0] is dl:
            _, names, open_anchor = self.entries[-1]  # "-m <msg>", "--message=<msg>": one
            if name not in names.split(", "):  # "--force-with-lease=<refname>" after it
                self.entries[-1] = (dl, f"{names}, {name}", open_anchor)
        else:
            self._close_section()
            self.entries = [entry for entry in self.entries if entry[0] is not dl]
            self.entries.append((dl, name, anchor or self.heading_anchor))
            self.anchor = self.entries[-1][2]
        self.line.append(heading_text(term))
        self._break()

    def _break(self) -> None:
        line = _spaced("".join(self.line)).strip(" |")
        if line:
            self.lines.append(line)
        self.line = []

    def _close_section(self) -> None:
        self._break()
        text = "\n".join(line for line in self.lines if line.strip())
        path = tuple(words for _, words in self.path) + tuple(e[1] for e in self.entries)
        if text:
            self.sections.append(Section(path, self.anchor, text))
        self.lines = []


def _anchor_of(heading: _Element) -> str | None:
    """The id a link to the heading's section takes: the heading's own, an anchor inside it,
    or its enclosing ``<section>``'s (Sphinx puts it there)."""
    if heading.get("id"):
        return str(heading.get("id"))
    for inner in heading.iter("a"):
        if inner.get("id") or inner.get("name"):
            return str(inner.get("id") or inner.get("name"))
    parent = heading.getparent()
    if parent is not None and parent.tag in ("section", "div") and parent.get("id"):
        first_heading = next((c for c in parent if c.tag in HEADING_TAGS), None)
        if first_heading is heading:
            return str(parent.get("id"))
    return None


def _entry_id(term: _Element) -> str:
    """The id a link to a ``<dt>`` entry takes: its own, or that of an anchor (a named ``<a>``
    that links nowhere) it begins with; "" for a term no link can point to."""
    if term.get("id"):
        return str(term.get("id"))
    first = next(iter(term), None)
    if first is not None and first.tag == "a" and first.get("href") is None:
        return str(first.get("id") or first.get("name") or "")
    return _anchor_before(term) or ""  # SQLite's: <a name="abs"></a><dt>abs(X)</dt>


def _is_entry(term: _Element) -> bool:
    """Whether a ``<dt>`` is an entry: a link points to it, or it names an option, a setting
    or another thing typed (``_code_name``)."""
    return bool(_entry_id(term)) or _names_setting(term) or _code_name(term) is not None


def _names_setting(term: _Element) -> bool:
    """Whether a ``<dt>`` no link points to names an option or a setting ("--amend", "-m
    <msg>", "gc.auto"): a manual page's entry all the same (AsciiDoc's, Git's), whose
    description says what that name does."""
    text = heading_text(term)
    return OPTION_TERM_RE.match(text) is not None or SETTING_RE.fullmatch(text) is not None


def _code_name(term: _Element) -> str | None:
    """The name a ``<dt>`` begins with in code: "SHARE_HISTORY" of "SHARE_HISTORY <K>",
    "AUTO_CD" of "AUTO_CD (-J)", "zmv" of "zmv [ -finqQsvwW ] …", "%d". Texinfo's tables of
    options, parameters, commands and prompt escapes (zsh's manual) have no link to each
    entry: read as one section under their heading, a question about an option quoted
    another option's sentence that named it."""
    first = next(term.iter(*CODE_TAGS), None)
    if first is None or any(a.get("href") for a in first.iterancestors("a")):
        return None  # a link to the entry elsewhere (an overview's list), not the entry
    name = _spaced(first.text_content()).strip()
    text = heading_text(term)
    if not name or not text.startswith(name):
        return None
    grammar = [word for word in text[len(name) :].lower().split() if word in STOPWORDS]
    if len(grammar) >= MAX_TERM_STOPWORDS:  # "True if the build is strict": a sentence
        return None
    return _entry_name(name)  # "fetch()" of "fetch(url, options = {})", at most 80 characters


def _anchor_before(element: _Element) -> str | None:
    """The name of the empty anchor (``<a name=…></a>``, linking nowhere) right before
    ``element``: where older hand-written pages put a block's link target."""
    before = element.getprevious()
    if (
        before is None
        or before.tag != "a"
        or before.get("href") is not None
        or before.text_content().strip()
        or (before.tail or "").strip()
    ):
        return None
    name = before.get("name") or before.get("id")
    return str(name) if name else None


def _label_of(paragraph: _Element) -> tuple[str, str] | None:
    """(text, anchor) of a paragraph of bold words alone after an empty named anchor, itself
    or as the first thing of a list item: a block's label on hand-written pages ("(1) How do
    I create an AUTOINCREMENT field?" in SQLite's FAQ, "Maximum Number Of Columns" in its
    limits). Bold words without an anchor are emphasis, not a label."""
    children = list(paragraph)
    if (
        len(children) != 1
        or children[0].tag not in ("b", "strong")
        or (paragraph.text or "").strip()
        or (children[0].tail or "").strip()
    ):
        return None
    text = heading_text(children[0])
    if not text or len(text) > LABEL_MAX_CHARS:
        return None
    anchor = _anchor_before(paragraph)
    item = paragraph.getparent()
    if anchor is None and item is not None and item.tag == "li" and item[0] is paragraph:
        anchor = _anchor_before(item)
    return (text, anchor) if anchor else None


def _entry_name(signature: str) -> str:
    """ "json.dumps(obj, *, skipkeys=False, ...)" -> "json.dumps()": the name, not the list;
    "--num-callers=<number> [default: 12]" -> "--num-callers": the option, not its value."""
    if option := OPTION_RE.match(signature):
        return option.group()
    name = signature.split("(", 1)[0].strip() + ("()" if "(" in signature else "")
    return name[:ENTRY_NAME_CHARS]


def _document_title(root: _Element) -> str:
    """The page's ``<title>``, without the site's name after a dash or a bar."""
    title = _spaced(root.findtext(".//title") or "").strip()
    return re.split(r"\s+[\u2014\u2013|-]\s+", title)[0] if title else ""  # em/en dash


def _spaced(text: str) -> str:
    return SPACES_RE.sub(" ", text)
