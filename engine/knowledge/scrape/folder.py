"""A folder of documents as the site: Markdown, HTML and plain-text files, each an article.

Many teams keep their docs as Markdown in a repository, not on a public site
(``CONCIERGE_SITE_DIR``). Each file is read like a page: Markdown is rendered to HTML by
markdown-it-py (rich's own Markdown parser) with GitHub's heading ids, and split at its
headings by ``sections.py``, like a page. Its source link is its address under
``CONCIERGE_SITE_DIR_URL`` (the folder as published, for example a repository's
``.../blob/main/docs/``), or else its ``file://`` path. A rescrape reads only the files whose
size or modification time changed: the pair is kept as the article's ETag (``file:SIZE:MTIME``).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from markdown_it import MarkdownIt

from engine.knowledge.models import PageFailure, Validators
from engine.knowledge.scrape.body import MIB
from engine.knowledge.scrape.crawl import CrawlOutcome
from engine.knowledge.scrape.errors import NoArticleText, NotAnArticle, RescrapeFailed
from engine.knowledge.scrape.extract import extract_article, read_in_turn
from engine.knowledge.scrape.progress import ProgressReporter
from engine.knowledge.scrape.sections import Page
from engine.knowledge.scrape.stopping import StopCheck

KINDS = {".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html"}
KINDS |= {".txt": "text"}
MAX_FILE_BYTES = 10 * MIB  # as for a page: a bigger file is not documentation
FRONT_MATTER_RE = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*\n", re.DOTALL)
FRONT_MATTER_TITLE_RE = re.compile(r"^title:[ \t]*['\"]?(.*?)['\"]?[ \t]*$", re.MULTILINE)
SLUG_DROPPED_RE = re.compile(r"[^\w\- ]")  # GitHub's heading ids: words, hyphens, spaces


@dataclass(frozen=True, slots=True)
class DocumentFile:
    """One file to read: where it is, the address it is cited by, and its change stamp."""

    path: Path
    url: str
    stamp: str  # "file:SIZE:MTIME_NS", stored as the article's ETag


@dataclass
class FolderListing:
    files: list[DocumentFile]
    capped: bool  # the folder holds more documents than ``max_pages``


def list_documents(root: Path, base_url: str | None, max_pages: int) -> FolderListing:
    """The folder's documents in path order, at most ``max_pages``; hidden files and folders
    (``.git``, ``.github``) are left out."""
    if not root.is_dir():
        raise RescrapeFailed("engine.rescrape.no_folder", path=str(root))
    files: list[DocumentFile] = []
    for path in _document_paths(root):
        if len(files) == max_pages:
            return FolderListing(files, capped=True)
        status = path.stat()
        stamp = f"file:{status.st_size}:{status.st_mtime_ns}"
        files.append(DocumentFile(path, document_url(root, path, base_url), stamp))
    return FolderListing(files, capped=False)


def _document_paths(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).parts
        if path.suffix.lower() in KINDS and path.is_file():
            if not any(part.startswith(".") for part in relative):
                yield path


def document_url(root: Path, path: Path, base_url: str | None) -> str:
    """The file's address under ``base_url`` (its path below the folder, kept as it is), or
    its ``file://`` URI."""
    if base_url:
        relative = quote(path.relative_to(root).as_posix())
        return base_url.rstrip("/") + "/" + relative
    return path.resolve().as_uri()


async def read_folder(
    listing: FolderListing,
    previous: dict[str, Validators],
    progress: ProgressReporter,
    stop: StopCheck,
) -> CrawlOutcome:
    """Read the files that changed since the stored copy; keep the others as they are."""
    outcome = CrawlOutcome()
    for file in listing.files:
        stored_stamp, _ = previous.get(file.url, (None, None))
        if stored_stamp == file.stamp:
            outcome.kept.append(file.url)
            progress.count("unchanged")
        else:
            await _read(file, outcome, progress)
        stop.check()
    return outcome


async def _read(file: DocumentFile, outcome: CrawlOutcome, progress: ProgressReporter) -> None:
    try:
        page = await read_in_turn(read_document, file.path, file.url)
    except (OSError, NoArticleText) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        kind: Literal["failed", "skipped"] = (
            "skipped" if isinstance(error, NotAnArticle) else "failed"
        )
        outcome.failures.append(PageFailure(file.url, reason, kind))
        progress.count(kind)
        return
    outcome.articles.append(page.article(file.url, etag=file.stamp))
    progress.count("fetched")


def read_document(path: Path, url: str) -> Page:
    """The file's title and sections. CPU-bound: call it through ``read_in_turn``."""
    if path.stat().st_size > MAX_FILE_BYTES:
        raise NoArticleText(f"larger than {MAX_FILE_BYTES // MIB} MiB")
    data = path.read_bytes()
    kind = KINDS[path.suffix.lower()]
    if kind == "html":
        return extract_article(data, url)
    text = data.decode("utf-8", errors="replace")
    page_html = markdown_page(text, path.stem) if kind == "markdown" else text_page(text, path.stem)
    return extract_article(page_html.encode(), url)


def markdown_page(text: str, stem: str) -> str:
    """A Markdown document as an HTML page: its front matter's ``title`` (else its first
    ``# heading``, else the file's name) as the title, and an id on every heading."""
    title = _file_title(stem)
    front_matter = FRONT_MATTER_RE.match(text)
    if front_matter:
        text = text[front_matter.end() :]
        named = FRONT_MATTER_TITLE_RE.search(front_matter.group(1))
        title = named.group(1).strip() if named and named.group(1).strip() else title
    markdown = MarkdownIt("commonmark").enable("table")
    tokens = markdown.parse(text)
    used: dict[str, int] = {}
    has_title_heading = False
    for opening, inline in pairwise(tokens):
        if opening.type == "heading_open":
            opening.attrSet("id", _unique_slug(inline.content, used))
            has_title_heading |= opening.tag == "h1"
    body = markdown.renderer.render(tokens, markdown.options, {})
    heading = "" if has_title_heading else f"<h1>{html.escape(title)}</h1>"
    return _page(title, heading + body)


def text_page(text: str, stem: str) -> str:
    """A plain-text document as an HTML page: its paragraphs under the file's name."""
    title = _file_title(stem)
    paragraphs = (part.strip() for part in re.split(r"\n\s*\n", text))
    body = "".join(f"<p>{html.escape(part)}</p>" for part in paragraphs if part)
    return _page(title, f"<h1>{html.escape(title)}</h1>{body}")


def _page(title: str, body: str) -> str:
    return (
        f"<html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head>"
        f"<body><main>{body}</main></body></html>"
    )


def _file_title(stem: str) -> str:
    """'getting-started' → 'Getting started'."""
    words = re.sub(r"[-_]+", " ", stem).strip()
    return words[:1].upper() + words[1:] if words else stem


def _unique_slug(heading: str, used: dict[str, int]) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens;
    a repeated one gets ``-1``, ``-2``…"""
    slug = SLUG_DROPPED_RE.sub("", heading.strip().lower()).replace(" ", "-")
    count = used.get(slug, 0)
    used[slug] = count + 1
    return f"{slug}-{count}" if count else slug
