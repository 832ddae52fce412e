# ruff: noqa: RUF001  # Japanese texts use full-width brackets and punctuation
"""The texts every bot writes, whatever the platform (see ``config.texts``).

Status lines are one short line (Discord shows them as small text); refusals are whole
sentences that say what to do.
"""

from __future__ import annotations

from typing import Literal

TEXTS: dict[str, dict[Literal["en", "ja"], str]] = {
    # --- the status line under an answer ---
    "status.queued": {
        "en": "⏳ queued · {ahead} ahead",
        "ja": "⏳ 順番待ち · 前に {ahead} 件",
    },
    "status.next_up": {
        "en": "⏳ queued · next up",
        "ja": "⏳ 順番待ち · 次に回答します",
    },
    "status.answering": {
        "en": "✍️ answering… (🛑 to stop)",
        "ja": "✍️ 回答中…（🛑 で停止）",
    },
    "status.answering_again": {
        "en": "🔁 answering again: the engine restarted (🛑 to stop)",
        "ja": "🔁 回答し直しています：回答エンジンが再起動しました（🛑 で停止）",
    },
    "status.stopping": {"en": "🛑 stopping…", "ja": "🛑 停止しています…"},
    "status.done": {"en": "✅ done", "ja": "✅ 完了"},
    "status.stopped": {"en": "🛑 stopped", "ja": "🛑 停止しました"},
    "status.expired": {"en": "⌛ expired: {detail}", "ja": "⌛ 期限切れ：{detail}"},
    "status.failed": {"en": "⚠️ error: {detail}", "ja": "⚠️ エラー：{detail}"},  # says what failed
    "status.timed_out": {
        "en": "⏱️ timed out: no reply from the engine",
        "ja": "⏱️ 時間切れ：回答エンジンから返事がありません",
    },
    "status.refused": {"en": "⚠️ {detail}", "ja": "⚠️ {detail}"},
    # --- what the final status line adds when older messages were left out ---
    "notice.no_history": {
        "en": "the earlier messages were not used",
        "ja": "それより前のメッセージは使っていません",
    },
    "notice.last_message": {
        "en": "only the last message was used",
        "ja": "直前のメッセージだけを使いました",
    },
    "notice.last_messages": {
        "en": "only the last {used} messages were used",
        "ja": "直前の {used} 件のメッセージだけを使いました",
    },
    # --- refusals: why a question was not queued, and what to do ---
    "refusal.engine_down": {
        "en": "I can't reach the answering engine right now. Please try again later.",
        "ja": "いま回答エンジンに接続できません。しばらくしてからもう一度お試しください。",
    },
    "refusal.not_admin": {
        "en": "Only admins can rebuild the knowledge base.",
        "ja": "ナレッジベースを作り直せるのは管理者だけです。",
    },
    "refusal.not_here": {
        "en": "I don't answer in this channel.",
        "ja": "このチャンネルでは回答しません。",
    },
    "refusal.too_long": {
        "en": "That question is too long ({length} characters; the limit is {limit}).",
        "ja": "質問が長すぎます（{length} 文字。上限は {limit} 文字です）。",
    },
    "refusal.too_many_open": {
        "en": (
            "You already have {waiting} questions open; "
            "please wait for an answer before asking more."
        ),
        "ja": (
            "回答待ちの質問がすでに {waiting} 件あります。回答が届いてから次の質問をしてください。"
        ),
    },
    # a space's cap (config/spaces.py ``max_waiting``): the place, not the asker, is over it
    "refusal.space_busy": {
        "en": (
            "Too many questions asked here are already waiting ({waiting}). "
            "Please try again in a few minutes."
        ),
        "ja": (
            "ここで聞かれた質問がすでに {waiting} 件回答を待っています。"
            "数分後にもう一度お試しください。"
        ),
    },
    "refusal.queue_full": {
        "en": (
            "I'm busy right now: too many questions are waiting. Please try again in a few minutes."
        ),
        "ja": (
            "いま混み合っています（待っている質問が多すぎます）。数分後にもう一度お試しください。"
        ),
    },
    "refusal.warning": {"en": "⚠️ {reason}", "ja": "⚠️ {reason}"},
    # --- a request nobody took by its deadline (made by the bot, no engine was there) ---
    "expired.no_engine": {
        "en": "no engine took it within its time to live ({ttl_s} s)",
        "ja": "有効期限（{ttl_s} 秒）のうちに回答エンジンが受け付けませんでした",
    },
    # --- the stop control (a button or a reaction) ---
    "stop.button": {"en": "Stop", "ja": "停止"},
    "stop.not_allowed": {
        "en": "Only the person who asked, or an admin, can stop this answer.",
        "ja": "この回答を停止できるのは、質問した人か管理者だけです。",
    },
    "stop.already_ended": {
        "en": "This answer has already ended.",
        "ja": "この回答はすでに終わっています。",
    },
    "stop.stopping": {"en": "Stopping the answer.", "ja": "回答を停止します。"},
    # --- feedback on a finished answer ---
    "vote.up": {"en": "Helpful", "ja": "役に立った"},
    "vote.down": {"en": "Not helpful", "ja": "役に立たなかった"},
    "vote.thanks_up": {
        "en": "Thanks! Your vote: 👍 (click 👎 to change it).",
        "ja": "ありがとうございます。あなたの評価：👍（👎 で変更できます）",
    },
    "vote.thanks_down": {
        "en": (
            "Thanks! Your vote: 👎 (click 👍 to change it). "
            "Admins see which pages give bad answers."
        ),
        "ja": (
            "ありがとうございます。あなたの評価：👎（👍 で変更できます）。"
            "管理者は、悪い回答につながったページを確認できます。"
        ),
    },
    "vote.failed": {
        "en": "Your vote could not be saved right now. Please try again later.",
        "ja": "いま評価を保存できませんでした。しばらくしてからもう一度お試しください。",
    },
    # --- while the engine works, before any text (Slack's thread status, for one) ---
    "working.queued": {
        "en": "is waiting in the queue ({ahead} ahead)…",
        "ja": "が順番を待っています（前に {ahead} 件）…",
    },
    "working.next_up": {"en": "is next in the queue…", "ja": "の順番はもうすぐです…"},
    "working.reading": {"en": "is reading the question…", "ja": "が質問を読んでいます…"},
    "working.searching": {"en": "is searching the site…", "ja": "がサイトを調べています…"},
}
