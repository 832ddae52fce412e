"""The first minute: with no site configured, ``concierge up`` (the terminal chat) offers the
sample site that comes with the project, so a newcomer sees an answer from a site, with its
source, before configuring anything.

The sample is the test site's ten pages of a made-up town guide (``eval/site/articles``), read
as a folder (``CONCIERGE_SITE_DIR``) into a knowledge base of its own beside
``CONCIERGE_KB_PATH``, so the operator's own knowledge base is never mixed with it. It is
offered only while no site is configured and no knowledge base exists at
``CONCIERGE_KB_PATH``: a deployment with a site, or with a knowledge base built some other way,
sees nothing of it.
"""

from __future__ import annotations

from pathlib import Path

from config.settings import Settings
from config.spaces import space_kb_path
from engine.knowledge.scrape.rescrape import describe_site

SAMPLE_DIR = Path(__file__).resolve().parent.parent / "eval" / "site" / "articles"
SAMPLE_NAME = "Minato Town Guide"
SAMPLE_QUESTION = "When does the last ferry leave?"


def with_sample_site(settings: Settings) -> Settings | None:
    """The settings that read and answer from the sample site, or None when it is not for this
    installation (a site is configured, a knowledge base exists, or the sample is not here:
    an install without the repository)."""
    if describe_site(settings) is not None or settings.kb_path.exists():
        return None
    if not SAMPLE_DIR.is_dir():
        return None
    sample_kb = space_kb_path(settings.kb_path, "sample")  # named like a space's, reserved
    return settings.model_copy(update={"site_dir": SAMPLE_DIR, "kb_path": sample_kb})


def sample_site_note(settings: Settings) -> tuple[str, dict[str, object]]:
    """The chat's line about the sample (a text key and its fields): how to read it, or that
    it is the one answering; either way, how to point Concierge at one's own site."""
    pages = sum(1 for _ in SAMPLE_DIR.glob("*.html"))
    key = "terminal.sample_ready" if settings.kb_path.exists() else "terminal.sample_offer"
    return key, {"name": SAMPLE_NAME, "pages": pages, "question": SAMPLE_QUESTION}
