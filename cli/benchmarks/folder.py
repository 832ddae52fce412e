"""How long a rescrape of a docs folder takes: ``python -m cli.benchmarks.folder [FILES]``
writes FILES Markdown files (default 100) made from the real documentation in
``eval/realdocs/site`` (its sections, with their headings, spread over the files) into a
temporary folder, then rescrapes it three times: all new, nothing changed, one file changed.
It refuses to print figures when a run did not read what it should have (the unchanged run
must read no file, the last exactly one)."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

from config.settings import Settings
from engine.knowledge.models import ScrapeResult
from engine.knowledge.scrape.rescrape import rescrape
from engine.knowledge.scrape.sections import page_sections

REALDOCS = Path(__file__).resolve().parents[2] / "eval" / "realdocs" / "site"


def write_markdown_files(folder: Path, count: int) -> int:
    """``count`` Markdown files holding the real pages' sections in order; their total size."""
    sections = []
    for page in sorted(REALDOCS.rglob("*.html")):
        parsed = page_sections(page.read_bytes())
        if parsed is not None:
            sections += [section for section in parsed.sections if section.text.strip()]
    per_file = -(-len(sections) // count)
    total = 0
    for index in range(count):
        part = sections[index * per_file : (index + 1) * per_file] or sections[index : index + 1]
        lines = [f"# {part[0].path[0]} (part {index + 1})", ""]
        for section in part:
            lines += [f"## {section.path[-1]}", "", section.text, ""]
        path = folder / f"section-{index + 1:03}.md"
        path.write_text("\n".join(lines), encoding="utf-8")
        total += path.stat().st_size
    return total


async def run(count: int) -> int:
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work) / "docs"
        folder.mkdir()
        size = write_markdown_files(folder, count)
        settings = Settings(_env_file=None, kb_path=Path(work) / "kb.sqlite3", site_dir=folder)
        first = await _scrape(settings)
        unchanged = await _scrape(settings)
        changed_file = folder / "section-001.md"
        changed_file.write_text(changed_file.read_text() + "\nOne more line.\n")
        os.utime(changed_file, ns=(0, changed_file.stat().st_mtime_ns + 1_000_000_000))
        one_changed = await _scrape(settings)
    problems = [
        f"{name}: read {result.fetched} files, {expected} expected"
        for name, result, expected in (
            ("first", first, count),
            ("unchanged", unchanged, 0),
            ("one changed", one_changed, 1),
        )
        if result.fetched != expected or result.failed
    ]
    if problems:
        print("no figures: " + "; ".join(problems), file=sys.stderr)
        return 1
    print(f"{count} Markdown files ({size / 1e6:.1f} MB), {first.passages} passages:")
    print(f"  first rescrape (all new):   {first.elapsed_s:6.1f} s")
    print(f"  nothing changed (0 read):   {unchanged.elapsed_s:6.1f} s")
    print(f"  one file changed (1 read):  {one_changed.elapsed_s:6.1f} s")
    return 0


async def _scrape(settings: Settings) -> ScrapeResult:
    return await rescrape(settings, lambda _: None, lambda: False)


if __name__ == "__main__":
    sys.exit(asyncio.run(run(int(sys.argv[1]) if len(sys.argv) > 1 else 100)))
