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


# The default model's answer to "What is name mangling for class members whose names start
# with two underscores?" (Python's documentation), in one line to the 256-token cap.
RAMBLE = (
    "In C++ terminology, normally class members (including the data members) are public "
    "(except see below Private Variables), and all member functions are virtual. As in "
    "Modula-3 terms, classes themselves can be objects. This provides semantics for importing "
    "and renaming. Unlike C++ and Modula-3, built-in types can be used as base classes for "
    "extension by the user. Also, like in Python, most built-in operators with special syntax "
    "(arithmetic operators) are defined to work on all data types except those that implement "
    "it directly. The sentence is referring to a convention of naming class members whose "
    "names start with two underscores. This is not a feature of C++ but rather a feature of"
)


def test_a_paragraph_that_runs_on_ends_at_a_sentence_past_the_length() -> None:
    pieces = [word + " " for word in RAMBLE.split(" ")]  # the space comes after the period
    generation, emitted, backend = replay(pieces, paragraphs=1)

    end = RAMBLE.index(".", 600) + 1  # the first sentence's end past 600 characters
    assert generation.answer == RAMBLE[:end]
    assert "".join(emitted).rstrip() == RAMBLE[:end]
    assert backend.taken < len(pieces)  # the model was not asked for the rest
    assert generation.finish_reason == "stop"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("x" * 600 + " and on\nthe next line", "x" * 600 + " and on"),  # a line's end
        ("x" * 600 + " 日本語です。続き", "x" * 600 + " 日本語です。"),  # a Japanese one
        ("x" * 590 + " e.g. 3.12 stays. Then", "x" * 590 + " e.g. 3.12 stays."),  # "3.12"
        ("short. " * 20, None),  # under the length: as before
    ],
)
def test_past_the_length_a_sentence_or_a_line_ends_the_answer(text: str, kept: str | None) -> None:
    limit = ParagraphLimit(1)
    ends = [limit.feed(piece) for piece in text]  # a character a piece
    found = next((end for end in ends if end is not None), None)

    assert (text[:found] if found is not None else None) == kept


def test_without_a_paragraph_limit_there_is_no_length_limit_either() -> None:
    limit = ParagraphLimit(0)
    assert all(limit.feed(piece) is None for piece in [RAMBLE, ". ", "\n\nMore."])
