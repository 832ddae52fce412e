"""Logging for every ``concierge`` command: plain lines for a terminal, JSON lines by option.

A request's session id rides on a context variable: the worker sets it around each job
(``with session_context(request.session_id):``) and ``SessionFilter`` stamps it on every
record logged meanwhile, by any module, in that task, in the tasks it creates and in
``asyncio.to_thread`` (which copies the context). Log calls need not repeat the id.

Two guards keep secrets out of the lines: the libraries' DEBUG output (discord.py logs every
gateway event whole: every user's message, interaction tokens) is held back unless asked for
on its own (``LibraryLevel``), and whatever is written has its bearer URLs and tokens redacted
(``redact``: interaction tokens, Slack response URLs), tracebacks included.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import TextIO

PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
NOISY_LOGGERS = ("aio_pika", "aiormq", "aiohttp.access")
# Third-party loggers (by their first name part), held at INFO unless asked for their DEBUG.
LIBRARY_LOGGERS = frozenset(
    {"discord", "slack_bolt", "slack_sdk", "aiormq", "aio_pika", "aiohttp", "httpx", "httpcore"}
    | {"urllib3", "websockets"}
)
LIBRARY_DEFAULT_LEVEL = logging.INFO
REDACTED = "[redacted]"
# What a log line must never hold, each with what is kept of it. Each one is a bearer secret.
_SECRETS = (
    # A Discord interaction token (in /interactions/<id>/<token>/callback and the followup's
    # /webhooks/<app id>/<token>) lets its holder post as the bot for 15 minutes; a webhook
    # token, for good.
    (re.compile(r"(/(?:interactions|webhooks)/\d+/)[\w.-]+"), rf"\1{REDACTED}"),
    # ... and the same token in a gateway payload ({'token': ...}), or a form's token=...
    (re.compile(r"""(["']token["']\s*:\s*["'])[^"']+"""), rf"\1{REDACTED}"),
    (re.compile(r"(\btoken=)[^&\s'\"]+"), rf"\1{REDACTED}"),
    # A Slack response_url (or incoming webhook) lets its holder post to the channel: plain,
    # JSON-escaped (https:\/\/hooks.slack.com\/...) or form-encoded (...%2F...).
    (
        re.compile(r"(hooks\.slack(?:-gov)?\.com(?:/|\\/|%2F))[^\s\"'<>&]+", re.IGNORECASE),
        rf"\1{REDACTED}",
    ),
    # A password in a URL (http://user:pass@host), as a library may log the URL it calls.
    (re.compile(r"(://)[^/\s@:]+:[^/\s@]+@"), r"\1***@"),
)
# Library lines that say nothing an operator can use, by logger and message start.
DROPPED_LINES = (
    # Each failed connect; the one-line BrokerUnavailable (or, on a reconnect, aio_pika's own
    # "Connection attempt ... failed" warning) already says it.
    ("aiormq.connection", "error when creating transport"),
    # discord.py at every start; the bot never joins a voice channel.
    ("discord.client", "PyNaCl is not installed"),
    ("discord.client", "davey is not installed"),
    # Bolt logs a whole refused request body at INFO. The HTTP listener checks signatures
    # itself first, so this is a second guard: anyone who can reach the port could fill the log.
    ("slack_bolt.RequestVerification", "Invalid request signature detected"),
)

current_session_id: ContextVar[str | None] = ContextVar("concierge_session_id", default=None)


@contextmanager
def session_context(session_id: str) -> Iterator[None]:
    """Every record logged inside (and in tasks and threads started inside) carries the id."""
    token = current_session_id.set(session_id)
    try:
        yield
    finally:
        current_session_id.reset(token)


class SessionFilter(logging.Filter):
    """Sets ``record.session_id`` (None outside a request); an explicit ``extra`` wins."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "session_id", None) is None:
            record.session_id = current_session_id.get()
        return True


class DropLibraryNoise(logging.Filter):
    """Drops the ``DROPPED_LINES``: a warning on every start teaches people to ignore warnings."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        return not any(
            record.name == name and message.startswith(start) for name, start in DROPPED_LINES
        )


class Levels(logging.Filter):
    """Our lines from ``own`` up, the ``LIBRARY_LOGGERS``' from ``libraries`` up, whatever the
    loggers' own levels (Bolt gives each logger it makes the root's level of that moment)."""

    def __init__(self, own: int, libraries: int) -> None:
        super().__init__()
        self.own, self.libraries = own, libraries

    def filter(self, record: logging.LogRecord) -> bool:
        library = record.name.partition(".")[0] in LIBRARY_LOGGERS
        return record.levelno >= (self.libraries if library else self.own)


def redact(text: str) -> str:
    """``text`` with every bearer token and URL in ``_SECRETS`` replaced by ``[redacted]``."""
    for pattern, kept in _SECRETS:
        text = pattern.sub(kept, text)
    return text


class PlainFormatter(logging.Formatter):
    """``time LEVEL logger: session <id>: message``, the id only when the line has one.

    A message that already names its session (``"session %s: ..."``) is not prefixed twice.
    """

    def __init__(self) -> None:
        super().__init__(PLAIN_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        session_id = getattr(record, "session_id", None)
        if session_id and session_id not in record.message:
            record = logging.makeLogRecord(record.__dict__)
            record.message = f"session {session_id}: {record.message}"
        return super().formatMessage(record)

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))  # the traceback too: aiohttp's errors hold URLs


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, session_id
    (when the line concerns a request) and the exception's traceback, if any."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        session_id = getattr(record, "session_id", None)
        if session_id:
            line["session_id"] = session_id
        if record.exc_info:
            line["exception"] = redact(self.formatException(record.exc_info))
        if record.stack_info:
            line["stack"] = redact(self.formatStack(record.stack_info))
        return json.dumps(line, ensure_ascii=False, default=str)


def setup_logging(
    level: str = "INFO",
    *,
    json_lines: bool = False,
    stream: TextIO | None = None,
    library_level: str | None = None,
) -> logging.Handler:
    """Send every log line to ``stream`` (stderr by default), plain or as JSON lines.

    ``library_level`` is the libraries' own (``LIBRARY_LOGGERS``); unset, it is ``level`` but
    never below INFO. Calling it again replaces the handler it installed before, and leaves
    other handlers (pytest's, for one) alone. Returns the handler.
    """
    own = logging.getLevelNamesMapping()[level]
    libraries = (
        logging.getLevelNamesMapping()[library_level]
        if library_level
        else max(own, LIBRARY_DEFAULT_LEVEL)
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "concierge", False)]:
        root.removeHandler(old)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.concierge = True  # type: ignore[attr-defined]
    handler.addFilter(DropLibraryNoise())
    handler.addFilter(Levels(own, libraries))
    handler.addFilter(SessionFilter())
    handler.setFormatter(JsonFormatter() if json_lines else PlainFormatter())
    root.addHandler(handler)
    root.setLevel(min(own, libraries))
    quiet = logging.NOTSET if min(own, libraries) <= logging.DEBUG else logging.WARNING
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(quiet)
    return handler
