"""``config.text_helpers``: one way to shorten a text and one to split it into sentences."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from config.text_helpers import ELLIPSIS, shorten, split_sentences

# Words and spaces, English and Japanese, with a sentence's end marks and line ends among them.
TEXTS = (
    st.text(alphabet=st.sampled_from("ab c  .!?\n。\uff01\uff1f日本 \t…"), max_size=80) | st.text()
)


def test_a_text_that_fits_is_left_as_it_is() -> None:
    assert shorten("Open today.", 11) == "Open today."
    assert shorten("", 0) == ""


def test_a_long_text_is_cut_at_a_space_in_its_second_half() -> None:
    assert shorten("The museum opens at ten", 20) == "The museum opens…"
    assert shorten("The museum opens at ten", 20, ellipsis="...") == "The museum opens..."


def test_a_text_without_a_space_late_enough_is_cut_anywhere() -> None:
    assert shorten("Open: Monday-to-Friday", 20) == "Open: Monday-to-Fri…"
    assert shorten("博物館は月曜日に休館します。", 8) == "博物館は月曜日…"


def test_no_room_for_the_ellipsis_leaves_the_start_alone() -> None:
    assert shorten("abc", 0) == ""
    assert shorten("abcdef", 2, ellipsis="...") == "ab"


@given(TEXTS, st.integers(min_value=0, max_value=100), st.sampled_from([ELLIPSIS, "...", ""]))
def test_a_shortened_text_fits_and_is_the_texts_start_then_the_ellipsis(
    text: str, max_chars: int, ellipsis: str
) -> None:
    short = shorten(text, max_chars, ellipsis)
    assert len(short) <= max_chars
    if len(text) <= max_chars:
        assert short == text
    elif max_chars >= len(ellipsis):
        assert short.endswith(ellipsis)
        assert text.startswith(short[: len(short) - len(ellipsis)])
    else:
        assert text.startswith(short)


def test_sentences_end_at_english_and_japanese_marks_and_at_line_ends() -> None:
    text = (
        "Open at ten. Closed on Mondays!  Really?! 月曜日は休館です。本当\uff1f\nNo mark here\n..."
    )
    assert split_sentences(text) == [
        "Open at ten.",
        "Closed on Mondays!",
        "Really?!",
        "月曜日は休館です。",
        "本当\uff1f",
        "No mark here",
        "...",
    ]
    assert split_sentences(" \n ") == []


def test_a_rust_macros_name_does_not_end_its_sentence() -> None:
    """The Rust book's "The println! macro is only capable of printing to standard output"
    was quoted from "macro is only…" on (a held-out check of the seventh session)."""
    text = "The println! macro prints. Use eprintln! to print errors. Done! Next."

    assert split_sentences(text) == [
        "The println! macro prints.",
        "Use eprintln! to print errors.",
        "Done!",
        "Next.",
    ]


@given(TEXTS)
def test_splitting_into_sentences_loses_only_the_spaces_between_them(text: str) -> None:
    sentences = split_sentences(text)
    assert all(sentence and sentence == sentence.strip() for sentence in sentences)
    assert all("\n" not in sentence for sentence in sentences)
    assert "".join("".join(sentences).split()) == "".join(text.split())
