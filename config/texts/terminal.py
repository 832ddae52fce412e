# ruff: noqa: RUF001  # Japanese texts use full-width brackets and punctuation
"""The terminal texts of the catalogue (see config.texts): key → English and Japanese.

What ``concierge ask``, ``chat`` and ``rescrape`` say on stderr in their own words; the
answer, and the engine's own lines (a rescrape's progress, why a request failed), come from the
engine in the same locale. Lines printed for good are rich markup: ``[yellow]…[/]`` colours a
part, and the caller escapes what fills a field. The waiting labels (``terminal.queued`` to
``terminal.waited``) and the prompt are plain text. Keys (``Ctrl+D``, ``/new``) stay as typed.
"""

from __future__ import annotations

from typing import Literal

TEXTS: dict[str, dict[Literal["en", "ja"], str]] = {
    # --- the chat: its banner, its commands, and what it says to a line that asks nothing ---
    "terminal.help": {
        "en": "ask anything · Ctrl+C stops an answer · [bold]/rescrape[/] reads the site · {keys}",
        "ja": (
            "なんでも質問してください · Ctrl+C で回答を停止 · "
            "[bold]/rescrape[/] でサイトを再読み込み · {keys}"
        ),
    },
    "terminal.keys": {
        "en": "[bold]/new[/] starts a new conversation · Ctrl+D leaves",
        "ja": "[bold]/new[/] で新しい会話 · Ctrl+D で終了",
    },
    "terminal.log_file": {
        "en": "[dim]the engine logs to {path}[/]",
        "ja": "[dim]回答エンジンのログは {path} に書き込まれます[/]",
    },
    "terminal.prompt": {"en": "you> ", "ja": "あなた> "},
    # The first minute (cli/sample_site.py): no site configured yet.
    "terminal.sample_offer": {
        "en": (
            "No site is configured yet: type /rescrape to read the sample site ({name}, "
            '{pages} pages), then ask "{question}". For your own site, set '
            "CONCIERGE_SITE_SITEMAP_URL, CONCIERGE_SITE_START_URL or CONCIERGE_SITE_DIR "
            "(see .env.example)."
        ),
        "ja": (
            "サイトがまだ設定されていません。/rescrape と入力するとサンプルサイト（{name}、"
            "{pages} ページ）を読み込みます。そのあと「{question}」などと聞いてみてください。"
            "ご自分のサイトには CONCIERGE_SITE_SITEMAP_URL、CONCIERGE_SITE_START_URL または "
            "CONCIERGE_SITE_DIR を設定してください（.env.example を参照）。"
        ),
    },
    "terminal.sample_ready": {
        "en": (
            'Answering from the sample site ({name}, {pages} pages): try "{question}". '
            "For your own site, set CONCIERGE_SITE_SITEMAP_URL, CONCIERGE_SITE_START_URL or "
            "CONCIERGE_SITE_DIR (see .env.example)."
        ),
        "ja": (
            "サンプルサイト（{name}、{pages} ページ）から回答します。「{question}」などと"
            "聞いてみてください。ご自分のサイトには CONCIERGE_SITE_SITEMAP_URL、"
            "CONCIERGE_SITE_START_URL または CONCIERGE_SITE_DIR を設定してください"
            "（.env.example を参照）。"
        ),
    },
    "terminal.no_question": {
        "en": "[yellow]type a question first[/] · {keys}",
        "ja": "[yellow]先に質問を入力してください[/] · {keys}",
    },
    "terminal.no_command": {
        "en": "[yellow]no command {command}[/] · {keys}",
        "ja": "[yellow]{command} というコマンドはありません[/] · {keys}",
    },
    "terminal.new_conversation": {
        "en": "[green]new conversation:[/] the questions before are forgotten",
        "ja": "[green]新しい会話：[/]これまでの質問は引き継ぎません",
    },
    # --- a question not sent ---
    "terminal.empty_question": {
        "en": "[red]not asked:[/] the question is empty",
        "ja": "[red]質問できませんでした：[/]質問が空です",
    },
    "terminal.not_asked": {  # the client's refusal, in the same locale
        "en": "[red]not asked:[/] {reason}",
        "ja": "[red]質問できませんでした：[/]{reason}",
    },
    # --- while it waits: a line for good, then a spinner's label with the time waited ---
    "terminal.no_engine": {
        "en": (
            "[yellow]no engine is running;[/] your question waits, {ahead} ahead "
            "(it expires in {ttl_s} s unless an engine starts)"
        ),
        "ja": (
            "[yellow]回答エンジンが動いていません。[/]質問は順番を待っています（前に {ahead} 件。"
            "エンジンが起動しなければ {ttl_s} 秒で期限切れになります）"
        ),
    },
    "terminal.no_engine_first": {  # the same, with no question before it
        "en": (
            "[yellow]no engine is running;[/] your question waits "
            "(it expires in {ttl_s} s unless an engine starts)"
        ),
        "ja": (
            "[yellow]回答エンジンが動いていません。[/]質問は順番を待っています"
            "（エンジンが起動しなければ {ttl_s} 秒で期限切れになります）"
        ),
    },
    "terminal.queued": {"en": "queued · {ahead} ahead", "ja": "順番待ち · 前に {ahead} 件"},
    "terminal.next_up": {"en": "queued · next up", "ja": "順番待ち · 次に回答します"},
    "terminal.waiting_engine": {
        "en": "waiting for an engine",
        "ja": "回答エンジンの起動を待っています",
    },
    "terminal.answering": {"en": "answering", "ja": "回答中"},
    "terminal.rescraping": {"en": "rescraping", "ja": "再読み込み中"},
    "terminal.waited": {"en": "{label} · {seconds} s", "ja": "{label} · {seconds} 秒"},
    # --- how it ended ---
    "terminal.done": {"en": "done", "ja": "完了"},
    "terminal.tokens": {"en": "{count} tokens", "ja": "{count} トークン"},
    "terminal.tokens_per_s": {"en": "{rate} tokens/s", "ja": "{rate} トークン/秒"},
    "terminal.cut_length": {
        "en": "cut off at the token limit (CONCIERGE_MAX_TOKENS)",
        "ja": "トークン数の上限（CONCIERGE_MAX_TOKENS）で打ち切りました",
    },
    "terminal.cut_repetition": {
        "en": "stopped because it was repeating itself",
        "ja": "同じことを繰り返し始めたため打ち切りました",
    },
    "terminal.removed": {
        "en": "[yellow]removed from the queue:[/] it will not be answered",
        "ja": "[yellow]順番待ちから外しました：[/]この質問には回答しません",
    },
    "terminal.restarted": {  # the text above it stays: a terminal cannot take lines back
        "en": "[yellow]the engine restarted mid-answer:[/] the whole answer follows again",
        "ja": "[yellow]回答中に回答エンジンが再起動しました：[/]最初から回答し直します",
    },
    "terminal.stopped": {"en": "[yellow]stopped[/]", "ja": "[yellow]停止しました[/]"},
    "terminal.stopped_after": {
        "en": "[yellow]stopped[/] after {tokens} tokens",
        "ja": "[yellow]停止しました[/]（{tokens} トークンまで回答）",
    },
    "terminal.failed": {  # the reason often says "failed" itself (the engine's)
        "en": "[red]error:[/] {reason}",
        "ja": "[red]エラー：[/]{reason}",
    },
    "terminal.expired": {"en": "[red]expired:[/] {reason}", "ja": "[red]期限切れ：[/]{reason}"},
    "terminal.timed_out": {
        "en": "[red]timed out:[/] no reply within {wait_s} s",
        "ja": "[red]時間切れ：[/]{wait_s} 秒以内に返事がありませんでした",
    },
}
