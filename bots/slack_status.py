"""What the thread shows around an answer that has no text yet, in Slack's AI-app features.

The thread status ("<app> is waiting in the queue (2 ahead)…", ``assistant.threads.setStatus``
with ``loading_messages``, ``chat:write``) says where a queued answer stands, and that the
engine is reading the question (generating, nothing written yet); once text shows, or the
answer ends, it is cleared (status ""). Slack also clears it whenever the app replies in the
thread, so it is set after the answer's first message is posted; it lapses after two minutes
without a reply.

The agent session (``agents.sessions.setStatus``: "processing" while the answer runs, "active"
after) is what makes Slack show its own stop button, whose click arrives as
``agent_session_stopped``; only an app declared as an agent has sessions.

Only an answer in a thread has either. A refusal (a scope missing, an app that is no agent) is
logged once at info and turns that feature off (for the process; for this answer alone if it
is about the place): the answer goes on without it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import dataclass, field

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bots.renderer import FINAL_STATUSES, MessageContent, Status
from bots.slack_stream import PLACE_ERRORS
from config.texts import Locale, t

log = logging.getLogger(__name__)


@dataclass
class Feature:
    """Whether one of Slack's optional features works for this app, as far as this process
    has seen (``name`` is how the log calls it)."""

    name: str
    off: bool = False
    _said: set[str] = field(default_factory=set)

    def refused(self, error: str) -> None:
        """Slack answered ``error``: logged once a kind; off for every answer unless it is
        about the place."""
        if error not in self._said:
            self._said.add(error)
            log.info("slack: %s refused (%s); answers go on without it", self.name, error)
        self.off = self.off or error not in PLACE_ERRORS


def working_texts(content: MessageContent, locale: Locale) -> list[str]:
    """The status the thread should show for the answer's last message: what it waits for,
    rotating texts first; [] for none (text shows, or the answer is over)."""
    if content.status is Status.QUEUED:
        if content.ahead:
            return [t("working.queued", locale, ahead=content.ahead)]
        return [t("working.next_up", locale)]
    if content.status is Status.GENERATING and not content.body:
        return [t("working.reading", locale), t("working.searching", locale)]
    return []


class ThreadStatus:
    """The status and agent session of one answer's thread, set only when they change.
    ``asker`` starts the session; a ``resumed`` answer (taken over after a restart) may have
    left it processing, so its end sets it "active" in any case."""

    def __init__(
        self,
        web: AsyncWebClient,
        channel: str,
        thread_ts: str,
        *,
        asker: str,
        statuses: Feature,
        sessions: Feature,
        resumed: bool = False,
    ) -> None:
        self.web = web
        self.channel = channel
        self.thread_ts = thread_ts
        self.asker = asker
        self.features = {"status": statuses, "session": sessions}
        self.off: set[str] = set()  # features refused for this answer
        self.shown = {"status": "", "session": "processing" if resumed else ""}

    async def show(self, content: MessageContent, locale: Locale) -> None:
        """Follow the last message's ``content`` (others carry no status); never raises."""
        if content.status is None:
            return
        session = "processing" if content.status not in FINAL_STATUSES else "active"
        if self._changes("session", session):
            await self._set(
                "session",
                session,
                self.web.agents_sessions_setStatus(
                    channel_id=self.channel,
                    thread_ts=self.thread_ts,
                    status=session,
                    initiator_user_id=self.asker or None,
                ),
            )
        texts = working_texts(content, locale)
        status = texts[0] if texts else ""
        if self._changes("status", status):
            await self._set(
                "status",
                status,
                self.web.assistant_threads_setStatus(
                    channel_id=self.channel,
                    thread_ts=self.thread_ts,
                    status=status,
                    loading_messages=texts or None,
                ),
            )

    def _changes(self, feature: str, wanted: str) -> bool:
        """Whether ``feature`` should now show ``wanted`` (it is on, and shows something
        else; an "active" session, or an empty status, only ends what was set)."""
        if feature in self.off or self.features[feature].off or self.shown[feature] == wanted:
            return False
        return bool(self.shown[feature]) or wanted not in ("", "active")

    async def _set(self, feature: str, wanted: str, call: Awaitable[object]) -> None:
        try:
            await call
        except SlackApiError as error:
            self.features[feature].refused(str(error.response.get("error", "unknown")))
            self.off.add(feature)
        except Exception as error:  # Slack out of reach a moment: the answer goes on
            log.info("slack: the thread's %s was not set: %s", feature, error)
        else:
            self.shown[feature] = wanted
