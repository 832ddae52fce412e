"""Follow-up questions: footers and the bots' messages are read back as their status."""

from __future__ import annotations

from typing import Any

import pytest

from bots.discord.history import split_status as discord_split_status
from bots.renderer import MessageContent, Renderer, Status, footer_for, history_notice, status_of
from bots.session import Session
from bots.slack.format import message_text
from bots.slack.history import Me, plain
from bots.slack.history import split_status as slack_split_status
from broker.protocol import Done, Started, make_request
from tests.conversations_helpers import turns


@pytest.mark.parametrize("status", list(Status))
def test_every_footer_is_read_back_as_its_status(status: Status) -> None:
    footer = footer_for(status, "a reason", 2)
    found = status_of(footer + " · only the last 3 messages were used")
    same_text = {Status.GENERATING, Status.DETACHED}
    assert found is status or {found, status} <= same_text
    assert status_of("Just some text") is None


def test_the_notice_counts_the_turns_the_model_read() -> None:
    done = Done(
        session_id="abcdef0123456789", seq=3, text="x", tokens=1, ttft_s=0, tokens_per_s=0,
        elapsed_s=0, history_used=3, history_dropped=2,
    )  # fmt: skip
    untouched = done.model_copy(update={"history_used": 5, "history_dropped": 0})
    assert history_notice(5, False, untouched) == ""
    assert history_notice(5, True, untouched) == "only the last 5 messages were used"
    assert history_notice(5, False, done) == "only the last 3 messages were used"
    assert history_notice(12, True, None) == "only the last 12 messages were used"
    assert history_notice(1, True, None) == "only the last message was used"
    assert history_notice(None, False, done) == "only the last 3 messages were used"
    assert history_notice(2, False, done) == "the earlier messages were not used"


class RecordingSink:
    """What each message shows now, and what each showed when posted."""

    def __init__(self) -> None:
        self.messages: list[MessageContent] = []
        self.posted: list[MessageContent] = []

    async def post(self, content: MessageContent, after: Any | None) -> int:
        self.messages.append(content)
        self.posted.append(content)
        return len(self.messages) - 1

    async def edit(self, handle: int, content: MessageContent) -> None:
        self.messages[handle] = content


async def test_the_final_footer_says_when_older_messages_were_left_out() -> None:
    history = turns(("user", "q1"), ("assistant", "a1"), ("user", "q2"), ("assistant", "a2"))
    request = make_request(reply_to="bot", user_id="u", question="q3", ttl_s=30, history=history)
    session = Session.for_request(request, timeout_s=5)
    session.history_cut = True
    session_id = request.session_id
    session.items.put_nowait(Started(session_id=session_id, seq=0, waited_s=0))
    done = Done(
        session_id=session_id, seq=1, text="a3", tokens=1, ttft_s=0, tokens_per_s=0, elapsed_s=0
    )
    session.items.put_nowait(done.model_copy(update={"history_used": 3, "history_dropped": 1}))
    sink = RecordingSink()

    assert await Renderer(sink, max_chars=100, edit_interval_s=0).run(session) is Status.DONE
    assert sink.messages[-1] == MessageContent("a3", "✅ done · only the last 3 messages were used")
    assert sink.posted[0].footer.startswith("⏳ queued")  # said only once the answer ends


# --- how each platform's messages are read back ---------------------------------------------


def test_the_bots_discord_and_slack_messages_are_read_back_as_body_and_status() -> None:
    assert discord_split_status("Hello\nthere\n-# ✅ done") == ("Hello\nthere", "✅ done")
    assert discord_split_status("-# 🛑 stopped") == ("", "🛑 stopped")
    assert discord_split_status("a continuation piece") == ("a continuation piece", "")
    assert discord_split_status("text\n-# a small note") == ("text\n-# a small note", "")

    shown = message_text(MessageContent("Fish & <chips>", "✅ done · only the last 2 messages"))
    assert slack_split_status(shown) == (
        "Fish &amp; &lt;chips&gt;",
        "✅ done · only the last 2 messages",
    )
    assert slack_split_status("piece one\n\npiece two") == ("piece one\n\npiece two", "")


def test_slack_markup_is_read_as_text() -> None:
    me = Me("UBOT", "BBOT")
    text = (
        "<@UBOT> ask <@U2|bob> in <#C1|general> <!here>: "
        "see <https://a.example/x|the page> &amp; <https://b.example>"
    )
    assert (
        plain(text, me)
        == "ask @bob in #general @here: see [the page](https://a.example/x) & https://b.example"
    )
