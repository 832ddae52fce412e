# ruff: noqa: RUF001  # Japanese texts use full-width brackets and punctuation
"""The slack texts of the catalogue (see config.texts): key → English and Japanese.

Slack shows them as its ``mrkdwn``: ``*x*`` is bold and ``` `x` ``` is code. The first line of
an ``/ask`` answer (``slack.asked``) is read back from the thread as the question it names
(``bots.slack.history``), so its ``{name}`` stays between ``*`` and its ``{question}`` last.
"""

from __future__ import annotations

from typing import Literal

_INVITE_ME: dict[Literal["en", "ja"], str] = {
    "en": (
        "I can't post in this channel. Invite me (`/invite @` and my name), or ask a workspace "
        "admin to give the app the `chat:write.public` scope (public channels only)."
    ),
    "ja": (
        "このチャンネルには投稿できません。私を招待する（`/invite @` と私の名前）か、"
        "ワークスペースの管理者にアプリへ `chat:write.public` スコープを付けてもらってください"
        "（公開チャンネルのみ）。"
    ),
}

TEXTS: dict[str, dict[Literal["en", "ja"], str]] = {
    # --- how to ask, when the question is missing ---
    "slack.ask_usage": {
        "en": "Ask me a question: `/ask what are the office hours?`",
        "ja": "質問をどうぞ：`/ask 営業時間は？`",
    },
    "slack.mention_usage": {
        "en": "Ask me something after the mention, for example: what are the office hours?",
        "ja": "メンションのあとに質問を書いてください。例：営業時間は？",
    },
    # --- the first line of an /ask answer in the channel: who asked what ---
    "slack.asked": {"en": "*{name}* asked: {question}", "ja": "*{name}* さんの質問：{question}"},
    "slack.someone": {"en": "Someone", "ja": "どなたか"},
    # --- why the first message of an answer could not be posted (Slack's error) ---
    "slack.cannot_post.not_in_channel": _INVITE_ME,
    "slack.cannot_post.channel_not_found": _INVITE_ME,  # a private channel or DM it is not in
    "slack.cannot_post.is_archived": {
        "en": "This channel is archived: I can't post in it.",
        "ja": "このチャンネルはアーカイブされているため、投稿できません。",
    },
    "slack.cannot_post.restricted_action": {
        "en": "This channel's posting permissions don't let me post in it.",
        "ja": "このチャンネルの投稿権限の設定により、私は投稿できません。",
    },
    "slack.cannot_post.restricted_action_read_only_channel": {
        "en": "This channel is read-only: I can't post in it.",
        "ja": "このチャンネルは読み取り専用のため、投稿できません。",
    },
    "slack.cannot_post.restricted_action_thread_only_channel": {
        "en": "This channel takes threads only: mention me in one.",
        "ja": "このチャンネルはスレッドでのみ投稿できます。スレッドの中でメンションしてください。",
    },
    "slack.cannot_post.other": {
        "en": "I couldn't post my answer here (Slack said: {error}). Try again later.",
        "ja": (
            "ここに回答を投稿できませんでした（Slack のエラー：{error}）。"
            "あとでもう一度お試しください。"
        ),
    },
}
