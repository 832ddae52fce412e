"""An answer that begins by copying the prompt's label ("The sentence that answers it: …")
is sent and kept without it (engine/generation/echo.py); any other beginning passes as it
came, piece by piece."""

from __future__ import annotations

from engine.answering.prompt import EVIDENCE_INTRO
from tests.grounded_fixture import replay

# SmolLM2-135M's own answer to "What does os.homedir() return?" on Node.js's pages, in pieces
COPIED = ["The", " sentence", " that", " answers", " it", ":", " os", ".homedir()", " returns",
          " the string path of the current user's home directory."]  # fmt: skip


def test_a_copied_label_is_neither_sent_nor_kept() -> None:
    generation, emitted, _ = replay(COPIED, label=EVIDENCE_INTRO)

    answer = "os.homedir() returns the string path of the current user's home directory."
    assert generation.answer == answer
    assert "".join(emitted) == answer
    assert generation.tokens == len(COPIED)  # the model's pieces, all counted


def test_the_label_made_a_sentence_is_a_copy_too() -> None:
    pieces = ["The", " sentence", " that", " answers", " it", " is", ":", " Sets", " the", " size."]

    generation, _, _ = replay(pieces, label=EVIDENCE_INTRO)

    assert generation.answer == "Sets the size."


def test_another_beginning_passes_piece_by_piece() -> None:
    pieces = ["The", " sentence", " is", " short."]

    generation, emitted, _ = replay(pieces, label=EVIDENCE_INTRO)

    assert emitted == pieces
    assert generation.answer == "The sentence is short."


def test_an_answer_that_ends_while_it_could_still_be_the_label_is_sent_whole() -> None:
    generation, emitted, _ = replay(["The", " sentence"], label=EVIDENCE_INTRO)

    assert emitted == ["The", " sentence"] and generation.answer == "The sentence"


def test_the_answers_paragraph_after_a_copied_label_is_kept() -> None:
    pieces = ["The sentence that answers it:", "\n\n", "It is 5.", "\n\n", "More."]

    generation, emitted, _ = replay(pieces, paragraphs=1, label=EVIDENCE_INTRO)

    assert generation.answer == "It is 5."
    assert "".join(emitted).strip() == "It is 5."


def test_without_a_label_in_the_prompt_nothing_is_held_or_left_out() -> None:
    generation, emitted, _ = replay(COPIED)

    assert emitted == COPIED and generation.answer == "".join(COPIED)


# SmolLM2-135M's answers on MkDocs' and npm's pages (eval runs of 2026-12-05), in pieces
HEADED = [
    ["1", ".", " Deploying", " your", " docs", " \u203a", " GitHub", " Pages", " (http://",
     "127.0.0.1:38433/user-guide/deploying-your-docs.html#github-pages)", "\n",
     "You", " can", " use", " a", " custom", " domain."],
    ["npm", "-cache", " \u203a", " Default", " (https://", "127.0.0.1:52751/commands/",
     "npm-cache.html#default)", "\n", "You", " can", " use", " a", " custom", " domain."],
]  # fmt: skip


def test_a_copied_passage_header_is_left_out_of_the_final_text() -> None:
    for pieces in HEADED:
        generation, emitted, _ = replay(pieces, label=EVIDENCE_INTRO)

        assert generation.answer == "You can use a custom domain."
        assert "".join(emitted) == "".join(pieces)  # streamed as it came, not held back


def test_a_line_that_only_looks_like_a_header_stays() -> None:
    for text in (
        "1. Open Settings \u203a Pages.\nThen save.",  # no address
        "See Deploying \u203a GitHub Pages (http://docs.example/deploy) for the steps.",
    ):
        generation, _, _ = replay([text], label=EVIDENCE_INTRO)

        assert generation.answer == text


def test_a_line_restating_the_quote_after_the_label_is_left_out_of_the_final_text() -> None:
    """SmolLM2-135M's answer to "What does npm prune do?" (eval run of 2026-12-05): its own
    words, then the prompt's label on a line of its own and the quote again."""
    own = "npm-prune removes packages that are not listed as any package's dependency list."
    pieces = [own, "\n", "The", " sentence", " that", " answers", " it", ":", " npm", " prune"]

    generation, emitted, _ = replay(pieces, label=EVIDENCE_INTRO)

    assert generation.answer == own
    assert "".join(emitted) == "".join(pieces)  # streamed as it came: the final text replaces it
    for kept in (f"{own}\nThe sentence is short.", f"{own} The sentence that answers it: no"):
        assert replay([kept], label=EVIDENCE_INTRO)[0].answer == kept


def test_a_restated_quote_cut_for_repeating_ends_the_answer_as_it_stopped() -> None:
    """What the repetition detector (or the token cap) cut came after the label's line: the
    answer shown is whole, so no note says it was cut; a blank line before it is dropped."""
    own = "npm prune removes x."
    again = [
        "\n",
        "The",
        " sentence",
        " that",
        " answers",
        " it",
        ":",
        " npm",
        " prune",
        " removes",
    ]
    looping = [own, "\n", *again * 8]

    generation, _, _ = replay(looping, label=EVIDENCE_INTRO)
    capped, _, _ = replay([own, *again], max_tokens=len(again) + 1, label=EVIDENCE_INTRO)

    assert generation.answer == own and generation.finish_reason == "stop"
    assert capped.answer == own and capped.finish_reason == "stop"
