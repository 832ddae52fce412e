"""What the thread shows around an answer that has no text yet, in Slack's AI-app features.

The thread status ("<app> is waiting in the queue (2 ahead)…", ``assistant.threads.setStatus``
with ``loading_messages``, ``chat:write``) says where a queued answer stands, and that the
engine is reading the question (generating, nothing written yet); once text shows, or the
answer ends, it is cleared (status ""). Slack also clears it whenever the app replies in the
thread, so it is set after the answer's first message is posted; it lapses after two minutes
without a reply, so one still set is sent again every ``STATUS_REFRESH_S``.

The agent session (``agents.sessions.setStatus``: "processing" while the answer runs, "active"
after) is what makes Slack show its own stop button, whose click arrives as
``agent_session_stopped``; only an app declared as an agent has sessions.

Only an answer in a thread has either. A refusal (a scope missing, an app that is no agent) is
logged once at info and turns that feature off (for ``FEATURE_RETRY_S``; for this answer alone
if it is about the place): the answer goes on without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bots.renderer import FINAL_STATUSES, MessageContent, Status
from bots.slack.stream import Feature
from config.texts import Locale, t

log = logging.getLogger(__name__)

STATUS_REFRESH_S = 90.0  # Slack drops a thread status after about two minutes without a reply


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
        refresh_s: float = STATUS_REFRESH_S,
    ) -> None:
        self.web = web
        self.channel = channel
        self.thread_ts = thread_ts
        self.asker = asker
        self.features = {"status": statuses, "session": sessions}
        self.off: set[str] = set()  # features refused for this answer
        self.shown = {"status": "", "session": "processing" if resumed else ""}
        self.refresh_s = refresh_s
        self._texts: list[str] = []  # the status shown, rotating texts first
        self._refresh: asyncio.Task[None] | None = None  # sends it again while it is set

    async def show(self, content: MessageContent, locale: Locale) -> None:
        """Follow the last message's ``content`` (others carry no status); never raises."""
        if content.status is None:
            return
        session = "processing" if content.status not in FINAL_STATUSES else "active"
        if self._changes("session", session):
            await self._set(
                "session",
                session,
                lambda: self.web.agents_sessions_setStatus(
                    channel_id=self.channel,
                    thread_ts=self.thread_ts,
                    status=session,
                    initiator_user_id=self.asker or None,
                ),
            )
        texts = working_texts(content, locale)
        if not texts or content.status in FINAL_STATUSES:
            await self.close()
        status = texts[0] if texts else ""
        if self._changes("status", status):
            await self._set("status", status, lambda: self._send_status(texts))
            if self.shown["status"] == status:
                self._texts = texts
            if self.shown["status"] and self._refresh is None:
                self._refresh = asyncio.create_task(self._keep_status())

    async def close(self) -> None:
        """Stop sending the status again (the answer has text, or is over)."""
        refresh, self._refresh = self._refresh, None
        if refresh is not None:
            refresh.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await refresh

    @property
    def refreshing(self) -> bool:
        """Whether the status is being sent again, so that Slack keeps it."""
        return self._refresh is not None

    async def _keep_status(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_s)
            if self.shown["status"] and "status" not in self.off:
                await self._set(
                    "status", self.shown["status"], lambda: self._send_status(self._texts)
                )

    def _send_status(self, texts: list[str]) -> Awaitable[object]:
        return self.web.assistant_threads_setStatus(
            channel_id=self.channel,
            thread_ts=self.thread_ts,
            status=texts[0] if texts else "",
            loading_messages=texts or None,
        )

    def _changes(self, feature: str, wanted: str) -> bool:
        """Whether ``feature`` should now show ``wanted`` (it is on, and shows something
        else; an "active" session, or an empty status, only ends what was set)."""
        if feature in self.off or not self.features[feature].allowed():
            return False
        if self.shown[feature] == wanted:
            return False
        return bool(self.shown[feature]) or wanted not in ("", "active")

    async def _set(self, feature: str, wanted: str, call: Callable[[], Awaitable[object]]) -> None:
        """Make ``call`` (Slack's method for ``feature``); whatever fails is logged here."""
        try:
            await call()
        except SlackApiError as error:
            self.features[feature].refused(str(error.response.get("error", "unknown")))
            self.off.add(feature)
        except Exception as error:  # Slack out of reach a moment: the answer goes on
            log.info("slack: the thread's %s was not set: %s", feature, error)
        else:
            self.shown[feature] = wanted
