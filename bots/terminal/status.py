"""Where an exchange stands, on stderr: a line that changes while it waits (or a rescrape
runs), then one line saying how it ended.

At a terminal the waiting line is a spinner with the time waited, and a rescrape a progress
bar; both vanish when the answer's text begins or the exchange ends. For a pipe each state
worth knowing is printed once, as a line of its own.
"""

from __future__ import annotations

import time

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.spinner import Spinner
from rich.text import Text

from bots.session import Session
from broker.protocol import Progress
from config.texts import Locale, t

REFRESHES_PER_S = 8
BAR_WIDTH = 40


class _Waiting:
    """A spinner, what it waits for, and for how long so far (redrawn with the time)."""

    def __init__(self, label: str, locale: Locale) -> None:
        self.label = label
        self.locale = locale
        self.since = time.monotonic()
        self.spinner = Spinner("dots", style="cyan")

    def __rich__(self) -> RenderableType:
        waited_s = time.monotonic() - self.since
        waited = t("terminal.waited", self.locale, label=self.label, seconds=f"{waited_s:.0f}")
        self.spinner.update(text=Text(waited, style="dim"))
        return self.spinner


def _progress_bar(event: Progress) -> RenderableType:
    found = event.counts.get("found", 0)
    done = sum(event.counts.get(key, 0) for key in ("fetched", "unchanged", "failed", "skipped"))
    bar = ProgressBar(total=found or None, completed=done, width=BAR_WIDTH)  # pulses until known
    return Group(Text(event.text, style="dim"), bar)


class TerminalStatus:
    """The status lines of one exchange, in ``locale``."""

    def __init__(self, console: Console, locale: Locale) -> None:
        self.console = console
        self.locale = locale
        self.live: Live | None = None

    def queued(self, session: Session, ttl_s: float) -> None:
        """Just asked: how many wait before it, and whether any engine will take it."""
        ahead = session.queued_ahead
        if session.engines == 0:
            said = "terminal.no_engine" if ahead else "terminal.no_engine_first"
            self.tell(said, ahead=ahead, ttl_s=f"{ttl_s:g}")
            self._wait("terminal.waiting_engine")
        elif ahead:
            self._wait("terminal.queued", plain=True, ahead=ahead)
        else:
            self._wait("terminal.next_up", plain=True)

    def started(self, kind: str) -> None:
        """The engine took it; the text (or the rescrape's progress) follows."""
        self._wait("terminal.rescraping" if kind == "rescrape" else "terminal.answering")

    def progress(self, event: Progress) -> None:
        self._show(_progress_bar(event), plain=event.text)

    def text_begins(self) -> None:
        """The answer's text takes the screen from here."""
        self._stop()

    def say(self, markup: str) -> None:
        """A line for good (rich markup)."""
        self._stop()
        self.console.print(markup, highlight=False)

    def tell(self, key: str, **fields: object) -> None:
        """The catalogue's line ``key`` for good (its fields escaped by the caller)."""
        self.say(t(key, self.locale, **fields))

    def close(self) -> None:
        self._stop()

    def _wait(self, key: str, *, plain: bool = False, **fields: object) -> None:
        """A spinner with the text ``key``; for a pipe, the text once when ``plain``."""
        label = t(key, self.locale, **fields)
        self._show(_Waiting(label, self.locale), plain=label if plain else None)

    def _show(self, view: RenderableType, *, plain: str | None = None) -> None:
        """At a terminal, ``view`` replaces the changing line; else ``plain`` is printed."""
        if not self.console.is_terminal:
            if plain is not None:
                self.console.print(plain, style="dim", highlight=False, markup=False)
            return
        if self.live is None:
            self.live = Live(
                view,
                console=self.console,
                refresh_per_second=REFRESHES_PER_S,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self.live.start()
        self.live.update(view, refresh=True)

    def _stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
