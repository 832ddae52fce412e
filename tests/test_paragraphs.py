"""An answer ends at the blank line after its paragraphs (``CONCIERGE_ANSWER_PARAGRAPHS``):
the default model's first paragraph answers, the next comments and invents."""

from __future__ import annotations

import pytest

from bots.client import ConciergeClient
from engine.generation.paragraphs import ParagraphLimit
from tests.grounded_fixture import ask, replay, site_client  # noqa: F401  # the fixture

# The default model's own answer to "How long does a session last?" (eval/followups.jsonl),
# in pieces as it streamed them: the blank line comes as two pieces.
SESSION = [
    "The answer to this question is that each session lasts 60 minutes.",
    "\n",
    "\n",
    "In other words, a single session can last anywhere from 12 hours (3 days) to 48 hours",
    " (5 days).",
]
FIRST = SESSION[0]


def test_the_answer_ends_at_its_first_blank_line_and_nothing_after_it_is_generated() -> None:
    generation, emitted, backend = replay(SESSION, paragraphs=1)

    assert generation.answer == FIRST
    assert emitted == [FIRST, "\n"]  # the second newline, which made the blank line, is not sent
    assert backend.taken == 3  # the model was not asked for the invented paragraph
    assert generation.finish_reason == "stop" and generation.finished_naturally


def test_a_blank_line_inside_a_piece_keeps_the_piece_up_to_it() -> None:
    generation, emitted, _ = replay(
        ["Open at 9:30.", " Closed Mondays.\n\nIn other words"], paragraphs=1
    )

    assert generation.answer == "Open at 9:30. Closed Mondays."
    assert emitted == ["Open at 9:30.", " Closed Mondays."]


@pytest.mark.parametrize(
    ("paragraphs", "kept"),
    [
        (0, "".join(SESSION)),  # no limit
        (2, "".join(SESSION)),  # the answer has no third paragraph
        (1, FIRST),
    ],
)
def test_the_setting_says_how_many_paragraphs_are_kept(paragraphs: int, kept: str) -> None:
    generation, emitted, _ = replay(SESSION, paragraphs=paragraphs)

    assert generation.answer == kept
    assert "".join(emitted).rstrip() == kept


def test_blank_lines_before_any_text_and_several_in_a_row_count_once() -> None:
    limit = ParagraphLimit(2)
    fed = ["\n\n", "One.", "\n\n\n\n", "Two.", "\n", " \n", "Three."]
    ends = [limit.feed(piece) for piece in fed]

    assert ends[:5] == [None] * 5
    assert ends[5] == len("\n\nOne.\n\n\n\nTwo.")  # the blank line after the second paragraph


async def test_the_engine_answers_in_one_paragraph_then_quotes(
    site_client: ConciergeClient,  # noqa: F811  # the fixture imported above
) -> None:
    """Asked this, the default model went on after a blank line: "In this context, the
    sentence refers to a specific service that allows users to access internet without
    having to use a VPN"."""
    done, _ = await ask(site_client, "What is the free Wi-Fi network called?")

    words, quote = done.text.split("\n\nFrom the site: ", 1)
    assert "Minato-Free" in words and "\n\n" not in words
    assert "VPN" not in words
    assert quote.startswith("\u201cThe network is called Minato-Free.")
