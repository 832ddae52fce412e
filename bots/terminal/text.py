"""An answer's text on stdout: as it comes for a pipe, rendered Markdown at a terminal.

The model writes Markdown (and the engine's notes are Markdown too). At a terminal each block
is rendered once it is complete (a blank line outside a code fence ends it), while the block
being written shows below in a live view that is redrawn on each piece. For a pipe the text is
written exactly as it arrives, so ``concierge ask ... | grep`` reads plain words.
"""

from __future__ import annotations

import math
import re
import time
from typing import Protocol, TextIO

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.markdown import Markdown
from rich.segment import Segment

FENCES = ("```", "~~~")
AUTOLINK = re.compile(r"<(https?://[^\s<>]+)>")
CODE_SPAN = re.compile(r"(`+[^`]*`+)")
# A bullet whose text begins with a number and a dot: a section's number in a source's title
# ("- 12. Virtual Environments and Packages"), which Markdown reads as a list inside the bullet
# and shows without its dot ("• 12 Virtual Environments").
NUMBERED_BULLET = re.compile(r"^(\s*[-*+]\s+\d+)\.(?=\s)")
LIVE_SPARE_LINES = 3  # of the screen, kept free above a block taller than it
LIVE_REFRESH_S = 0.05  # the live view is redrawn at most this often: each draw renders the
# answer's unprinted Markdown (milliseconds for a long one), and the engine shares the CPU


class AnswerText(Protocol):
    def add(self, piece: str) -> None:
        """The next piece of the answer as it streams."""
        ...

    def finish(self, text: str) -> None:
        """The whole final text (which may differ from what streamed): show what is missing."""
        ...

    def begin_again(self) -> None:
        """An answer anew (its engine died mid-answer): what was shown stays above, ended,
        and the next pieces and the final text start from nothing."""
        ...


def answer_text(stream: TextIO) -> AnswerText:
    if stream.isatty():
        return MarkdownText(Console(file=stream, highlight=False))
    return PlainText(stream)


def common_length(one: str, other: str) -> int:
    """How many characters of ``one`` ``other`` holds from their start, a run of whitespace
    matching one of any length: an answer the engine ended at a blank line streamed the
    newline before it, which its final text leaves out (docs/protocol.md, ``done``), and a
    pipe would otherwise get the quote and the sources after it twice."""
    i = j = 0
    while i < len(one) and j < len(other):
        if one[i].isspace() and other[j].isspace():
            run_end, other_end = _run_end(one, i), _run_end(other, j)
            if other_end == len(other):  # ``other`` ends in this run: as much of it as it has
                return min(run_end, i + other_end - j)
            i, j = run_end, other_end
        elif one[i] == other[j]:
            i, j = i + 1, j + 1
        else:
            break
    return i


def _run_end(text: str, start: int) -> int:
    """Where the run of whitespace at ``start`` ends."""
    while start < len(text) and text[start].isspace():
        start += 1
    return start


def shown_final(final: str, streamed: str) -> str:
    """What to finish on: ``final``, unless what streamed already ends with it: the engine
    left the model's words out of the final text (a number not on the site), and its last
    piece said so and brought the quote. Printed text cannot be taken back; printing the
    final text again below it would show the quote twice."""
    if final and final != streamed and streamed.endswith(final):
        return streamed
    return final


class PlainText:
    """Pieces written as they come; the end of the final text a lost piece left out."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.text = ""

    def add(self, piece: str) -> None:
        self.stream.write(piece)
        self.stream.flush()
        self.text += piece

    def finish(self, text: str) -> None:
        text = shown_final(text, self.text)
        rest = text[common_length(text, self.text) :]
        shown = self.text + rest
        if shown and not shown.endswith("\n"):
            rest += "\n"
        self.stream.write(rest)
        self.stream.flush()

    def begin_again(self) -> None:
        if self.text and not self.text.endswith("\n"):
            self.stream.write("\n")
            self.stream.flush()
        self.text = ""


def finished_length(text: str) -> int:
    """How much of ``text`` is whole Markdown blocks that can no longer change: up to its last
    blank line outside a code fence (0 when there is none yet)."""
    end = position = 0
    in_fence = False
    for line in text.splitlines(keepends=True):
        position += len(line)
        if line.lstrip().startswith(FENCES):
            in_fence = not in_fence
        elif not in_fence and line.endswith("\n") and not line.strip():
            end = position
    return end


class MarkdownText:
    """Rendered block by block: the answer shows in a live view, redrawn on each piece, and
    whole blocks are printed for good only once the view would no longer fit the screen. So
    the final text replaces a short answer whole: words the engine withdrew (an option or a
    number nothing it read gives) do not stay on screen above its note saying so."""

    def __init__(self, console: Console, refresh_s: float = LIVE_REFRESH_S) -> None:
        self.console = console
        self.refresh_s = refresh_s
        self.text = ""
        self.printed = 0  # characters of ``text`` rendered for good
        self.blocks = 0
        self.live: Live | None = None
        self._drawn_at = -math.inf

    def add(self, piece: str) -> None:
        self.text += piece
        now = time.monotonic()
        if now - self._drawn_at < self.refresh_s:
            return  # shown at the next draw, or by ``finish``
        self._drawn_at = now
        end = self.printed + finished_length(self.text[self.printed :])
        if end > self.printed and not self._fits(self.text[self.printed :]):
            self._print(self.text[self.printed : end])
            self.printed = end
        self._show_growing(self.text[self.printed :])

    def finish(self, text: str) -> None:
        self._stop_live()
        if self.printed:  # what is printed stays: show what the final text adds below it
            text = shown_final(text, self.text)
        printed = self.text[: self.printed]
        self._print(text[common_length(text, printed) :])

    def _fits(self, blocks: str) -> bool:
        """Whether ``blocks`` render within the live view's height."""
        lines = self.console.render_lines(_markdown(blocks), pad=False)
        return len(lines) <= self.console.height - LIVE_SPARE_LINES

    def begin_again(self) -> None:
        self.finish(self.text)
        self.text, self.printed = "", 0

    def _print(self, blocks: str) -> None:
        """Render whole blocks under those printed before (one blank line between)."""
        if not blocks.strip():
            return
        self._stop_live()
        if self.blocks:
            self.console.print()
        self.console.print(_markdown(blocks))
        self.blocks += 1

    def _show_growing(self, block: str) -> None:
        if not block.strip():
            return
        view: RenderableType = _Tail(_markdown(block), self.console.height - LIVE_SPARE_LINES)
        if self.blocks:  # the blank line between blocks, gone with the live view
            view = Group("", view)
        if self.live is None:
            self.live = Live(
                view,
                console=self.console,
                auto_refresh=False,
                transient=True,  # replaced by the block rendered for good
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self.live.start()
        self.live.update(view, refresh=True)

    def _stop_live(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def _markdown(text: str) -> Markdown:
    """Links show their address (not every terminal shows hyperlinks); an address written as
    one (``<https://...>``, as in the sources list) shows once, as it is."""
    return Markdown(_prose_lines(AUTOLINK.sub(r"\1", text.strip("\n"))), hyperlinks=False)


def _prose_lines(text: str) -> str:
    """Each line outside a code fence as a chat shows it: ``_as_shown``."""
    lines = text.split("\n")
    in_fence = False
    for index, line in enumerate(lines):
        if line.lstrip().startswith(FENCES):
            in_fence = not in_fence
        elif not in_fence and line.strip():
            lines[index] = _as_shown(line)
    return "\n".join(lines)


def _as_shown(line: str) -> str:
    """A hard break at the end ("  "): each newline a line break, as a chat shows it (Markdown
    would join the lines into one paragraph). And each "<" outside code as an entity: Markdown
    drops what looks like an HTML tag, and a synopsis's "npm cache clean [<key>]" showed as
    "npm cache clean []". A bullet's leading "12." keeps its dot (``NUMBERED_BULLET``)."""
    line = NUMBERED_BULLET.sub(r"\1\\.", line)
    parts = CODE_SPAN.split(line.rstrip())  # the code spans at odd places
    kept = (part if place % 2 else part.replace("<", "&lt;") for place, part in enumerate(parts))
    return "".join(kept) + "  "


class _Tail:
    """The last ``lines`` lines of a renderable: the live block's newest words stay in view."""

    def __init__(self, renderable: RenderableType, lines: int) -> None:
        self.renderable = renderable
        self.lines = max(1, lines)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        rendered = console.render_lines(self.renderable, options, pad=False)
        for line in rendered[-self.lines :]:
            yield from line
            yield Segment.line()
