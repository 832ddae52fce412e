"""``bots.footer``: the status line under an answer, laid out and read back the same way."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from bots.footer import FooterLayout
from config.texts import t

DISCORD_LIKE = FooterLayout("\n-# ", "-# ", 30)
SLACK_LIKE = FooterLayout("\n\n", "", 30)
DONE = t("status.done", "en")


def test_the_status_line_follows_the_body_or_stands_alone_shortened_to_its_room() -> None:
    assert DISCORD_LIKE.join("Open at ten.", DONE) == f"Open at ten.\n-# {DONE}"
    assert DISCORD_LIKE.join("", DONE) == f"-# {DONE}"
    assert SLACK_LIKE.join("Open at ten.", "") == "Open at ten."
    long = SLACK_LIKE.after("body", "⚠️ failed: the model server said no " * 3)
    assert long.startswith("\n\n⚠️ failed") and long.endswith("…") and len(long) <= 32


def test_a_last_line_that_is_no_status_line_stays_in_the_body() -> None:
    assert DISCORD_LIKE.split("text\n-# a small note") == ("text\n-# a small note", "")
    assert SLACK_LIKE.split("piece one\n\npiece two") == ("piece one\n\npiece two", "")
    assert DISCORD_LIKE.split("a continuation piece") == ("a continuation piece", "")


def test_read_turns_the_status_line_back_into_text_and_leaves_the_body() -> None:
    def unescape(text: str) -> str:
        return text.replace("&amp;", "&")

    shown = SLACK_LIKE.join("Fish &amp; chips", f"{DONE} &amp; more")
    assert SLACK_LIKE.split(shown, read=unescape) == ("Fish &amp; chips", f"{DONE} & more")


@given(st.text(max_size=60), st.sampled_from([DISCORD_LIKE, SLACK_LIKE]))
def test_what_join_lays_out_split_reads_back(body: str, layout: FooterLayout) -> None:
    body = re.sub(r"\n+", "\n", body).replace("\n-# ", "\n-#")  # a body holds no separator
    assert layout.split(layout.join(body, DONE)) == (body, DONE)
