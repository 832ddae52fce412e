"""The terminal's rendering of an answer's markdown, block by block."""

from __future__ import annotations

import io

import pyte
from rich.console import Console

from bots.terminal.text import MarkdownText, PlainText, finished_length
from tests.terminal_fixture import COLS, ROWS

# --- how the text is shown ------------------------------------------------------------------

ANSWER = "Some **bold** and _slanted_ words.\n\n- one\n- two\n\n```\nx = 1\n\n```\nEnd.\n\n"


def _rendered(pieces: list[str], final: str) -> list[str]:
    """What a terminal shows once ``pieces`` streamed into a ``MarkdownText`` and ended."""
    screen = pyte.HistoryScreen(COLS, ROWS, history=100)
    stream = pyte.Stream(screen)
    buffer = io.StringIO()
    text = MarkdownText(
        Console(file=buffer, force_terminal=True, width=COLS, height=ROWS, color_system=None),
        refresh_s=0,  # every piece drawn
    )
    for piece in pieces:
        text.add(piece)
        stream.feed(buffer.getvalue().replace("\n", "\r\n"))
        buffer.seek(0)
        buffer.truncate()
    text.finish(final)
    stream.feed(buffer.getvalue().replace("\n", "\r\n"))
    return [line.rstrip() for line in screen.display if line.strip()]


def test_markdown_is_rendered_for_a_terminal_block_by_block() -> None:
    pieces = [ANSWER[i : i + 3] for i in range(0, len(ANSWER), 3)]
    shown = _rendered(pieces, ANSWER + "Sources:\n- A page <https://example.com/a>")
    assert shown[0] == "Some bold and slanted words."
    assert shown[1:3] == [" • one", " • two"]
    assert "x = 1" in shown[3]
    assert shown[4:] == ["End.", "Sources:", " • A page https://example.com/a"]
    assert not [line for line in shown if "**" in line or "_s" in line or "```" in line]


def test_angle_brackets_are_shown_as_written_in_code_and_out() -> None:
    """Markdown drops what looks like HTML: a synopsis's "[<key>]" had shown as "[]"."""
    quote = "From the site: \u201cnpm cache clean [<key>]\u201d and `a <b>` too"
    shown = _rendered([quote], quote + "\n\n```\nx <y> z\n```\n")
    assert shown[0] == "From the site: \u201cnpm cache clean [<key>]\u201d and a <b> too"
    assert "x <y> z" in shown[1]


def test_a_sources_section_number_keeps_its_dot() -> None:
    """ "- 12. Virtual Environments" is a bullet, not a list numbered from 12 inside one."""
    sources = (
        "Sources:\n- 12. Virtual Environments \u203a 12.3. Managing Packages <https://d.example/v>"
    )
    shown = _rendered([sources], sources + "\n")
    assert any("12. Virtual Environments" in line for line in shown)


def test_pieces_between_draws_are_shown_at_the_next_draw_or_at_the_end() -> None:
    """The live view is redrawn at most every ``refresh_s``: pieces in between wait for it."""
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=COLS, height=ROWS, color_system=None)
    text = MarkdownText(console, refresh_s=3600)
    text.add("First ")
    drawn = buffer.getvalue()
    text.add("second ")
    assert "First" in drawn and buffer.getvalue() == drawn  # not redrawn yet
    text.finish("First second third.")
    assert "First second third." in buffer.getvalue()


def _piped(pieces: list[str], final: str) -> str:
    """What a pipe gets once ``pieces`` streamed into a ``PlainText`` and ended."""
    piped = io.StringIO()
    plain = PlainText(piped)
    for piece in pieces:
        plain.add(piece)
    plain.finish(final)
    return piped.getvalue()


def test_text_a_lost_piece_left_out_is_shown_at_the_end() -> None:
    shown = _rendered(["One ", "two "], "One two three.")
    assert shown == ["One two three."]
    piped = io.StringIO()
    plain = PlainText(piped)
    plain.add("One _two_ ")
    plain.finish("One _two_ three.")
    assert piped.getvalue() == "One _two_ three.\n"  # a pipe gets the text as written


def test_a_final_text_that_left_the_models_words_out_is_not_shown_twice() -> None:
    """The engine withdrew the model's words (a number not on the site): its last piece
    brought the note and the quote, and the final text is that piece alone."""
    final = "(My own answer is left out.)\n\nFrom the site: \u201c300000\u201d"
    pieces = ["The default is ", "30000.", "\n\n" + final]

    shown = _rendered(pieces, final)
    assert shown == ["(My own answer is left out.)", "From the site: \u201c300000\u201d"]
    assert _piped(pieces, final) == "".join(pieces) + "\n"  # a pipe cannot take it back


def test_withdrawn_words_printed_for_good_stay_and_the_quote_is_not_shown_twice() -> None:
    """An answer taller than the screen printed its first blocks for good: they stay, and
    the final text's note and quote come once, below them."""
    final = "(My own answer is left out.)\n\nFrom the site: \u201c300000\u201d"
    long_answer = "".join(f"Line {n} of a long answer.\n\n" for n in range(ROWS + 5))
    pieces = [long_answer, "The default is ", "30000.", "\n\n" + final]

    shown = _rendered(pieces, final)
    assert shown[-2:] == ["(My own answer is left out.)", "From the site: \u201c300000\u201d"]
    assert sum("From the site" in line for line in shown) == 1


def test_an_answer_ended_at_a_blank_line_does_not_show_its_quote_twice() -> None:
    """Seen in ``concierge chat < questions.txt``: the engine ended the model's answer at a
    blank line after streaming its first newline, which the final text leaves out; the pipe
    got the quote and the sources again after the streamed ones."""
    closing = "From the site: \u201c1,200 yen\u201d\nSources:\n- Ferry <https://x/ferry>"
    pieces = ["The answer is: 1,200 yen.", "\n", "\n\n" + closing]
    final = "The answer is: 1,200 yen.\n\n" + closing
    assert _piped(pieces, final) == "".join(pieces) + "\n"
    shown = _rendered(pieces, final)
    assert sum("From the site" in line for line in shown) == 1


def test_a_block_ends_at_a_blank_line_outside_a_code_fence() -> None:
    assert finished_length("Para one.\n\nPara") == len("Para one.\n\n")
    assert finished_length("```\ncode\n\nmore") == 0
    assert finished_length("Para one.\n") == 0
