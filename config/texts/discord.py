# ruff: noqa: RUF001  # Japanese texts use full-width brackets and punctuation
"""The discord texts of the catalogue (see config.texts): key → English and Japanese.

Only what the Discord bot says in its own words; the status lines, refusals and the Stop and
vote buttons' texts are every bot's (``config/texts/bots.py``).
"""

from __future__ import annotations

from typing import Literal

TEXTS: dict[str, dict[Literal["en", "ja"], str]] = {
    "discord.help": {
        "en": (
            "Ask me by mentioning me with your question, for example: {mention} how do I "
            "claim the warranty? I answer in a reply: reply to my answer to follow up, press "
            "its Stop button (or react 🛑) to stop me."
        ),
        "ja": (
            "メンションして質問してください。例：{mention} 保証はどう申請しますか？"
            "返信で回答します。続けて質問するときは回答に返信してください。"
            "止めるときは回答の「停止」ボタンを押すか、🛑 でリアクションしてください。"
        ),
    },
    "discord.rescrape_started": {
        "en": (
            "Rebuilding the knowledge base: progress follows in this channel "
            "(its Stop button, or 🛑 on it, stops it)."
        ),
        "ja": (
            "ナレッジベースを作り直しています。進み具合はこのチャンネルに表示します"
            "（その「停止」ボタンか 🛑 のリアクションで止められます）。"
        ),
    },
    "discord.rescrape_description": {
        "en": "Rebuild the knowledge base from the site (admins only)",
        "ja": "サイトからナレッジベースを作り直します（管理者のみ）",
    },
}
