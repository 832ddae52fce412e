# ruff: noqa: RUF001  # Japanese texts use full-width brackets and punctuation
"""The engine texts of the catalogue (see config.texts): key → English and Japanese.

Plain text, no Markdown: Discord, Slack and the terminal each show it as written (the
empty-knowledge-base note once showed its ``_underscores_`` raw). An answer's own sentences
(``engine.answer.*``) follow the question's language; the rest (a rescrape's progress and
summary, why a request failed or expired) the asker's locale.
"""

from __future__ import annotations

from typing import Literal

TEXTS: dict[str, dict[Literal["en", "ja"], str]] = {
    # --- an answer's own sentences, in the question's language ---
    "engine.answer.not_on_site": {  # the whole answer to a question the site does not cover
        "en": "The site does not cover this: none of its articles answers that question.",
        "ja": "この質問の答えは、サイトの記事には載っていません。",
    },
    "engine.answer.nearest": {  # after "not on the site": the sections nearest the question
        "en": "The nearest sections I found, in case they help:",
        "ja": "近いと思われる節（参考まで）：",
    },
    "engine.answer.no_articles": {  # after a general answer, before the first rescrape
        "en": (
            "Not from the site: the knowledge base has no articles yet "
            "(an admin can run a rescrape to read the site)."
        ),
        "ja": (
            "サイトの記事からの答えではありません。まだ記事を読み込んでいません"
            "（管理者が rescrape を実行すると、サイトを読み込みます）。"
        ),
    },
    # small talk ("hi", "thanks!", engine/answering/smalltalk.py): the whole answer, no model, no
    # source
    "engine.answer.greeting": {
        "en": "Hello! Ask me anything about the site's articles.",
        "ja": "こんにちは！サイトの記事について、なんでも聞いてください。",
    },
    "engine.answer.thanks": {
        "en": "You're welcome! Ask me anything else about the site's articles.",
        "ja": "どういたしまして。ほかにもサイトの記事について、なんでも聞いてください。",
    },
    "engine.answer.goodbye": {
        "en": "Goodbye! Come back any time with a question about the site's articles.",
        "ja": "さようなら。サイトの記事について聞きたいことがあれば、いつでもどうぞ。",
    },
    "engine.answer.evidence": {  # before the quote of the article
        "en": "From the site: \u201c{quote}\u201d",
        "ja": "サイトの記事より：「{quote}」",
    },
    "engine.answer.cut_repetition": {
        "en": "(Cut here: the answer had started repeating itself.)",
        "ja": "（同じことを繰り返し始めたため、ここで打ち切りました。）",
    },
    "engine.answer.withdrawn": {
        "en": "(My own answer is left out: it gave a number that is not on the site.)",
        "ja": "（サイトにない数字を含んでいたため、回答を省きました。）",
    },
    "engine.answer.withdrawn_option": {
        "en": "(My own answer is left out: it gave a command-line option that is not on the site.)",
        "ja": "（サイトにないコマンドラインオプションを含んでいたため、回答を省きました。）",
    },
    "engine.answer.withdrawn_name": {
        "en": "(My own answer is left out: it did not name what the site names below.)",
        "ja": "（サイトの記事が挙げるものと違うものを挙げていたため、回答を省きました。）",
    },
    "engine.answer.withdrawn_term": {
        "en": "(My own answer is left out: it named something that is not on the site.)",
        "ja": "（サイトにない名前を挙げていたため、回答を省きました。）",
    },
    "engine.answer.cut_length": {
        "en": "(Cut here: the answer reached its limit of {max_tokens} tokens.)",
        "ja": "（長さの上限 {max_tokens} トークンに達したため、ここで打ち切りました。）",
    },
    # --- why a request ended early, in the asker's locale ---
    "engine.interrupted": {
        "en": "interrupted: the engine stopped while answering; please ask again",
        "ja": "中断しました：回答中に回答エンジンが停止しました。もう一度質問してください",
    },
    "engine.restarted": {
        "en": "the engine restarted before answering; please ask again",
        "ja": "回答する前に回答エンジンが再起動しました。もう一度質問してください",
    },
    "engine.set_aside": {
        "en": (
            "this question stopped the engine {times} times while it was being answered, "
            "so it was set aside; please ask it another way"
        ),
        "ja": (
            "この質問への回答中に回答エンジンが {times} 回停止したため、この質問は保留にしました。"
            "聞き方を変えて質問してください"
        ),
    },
    "engine.delivery_limit": {  # a quorum queue dead-lettered it past its x-delivery-limit
        "en": (
            "this question was set aside: the engine stopped {times} times before it could "
            "finish the answer; please ask it another way"
        ),
        "ja": (
            "回答エンジンが回答を終える前に {times} 回停止したため、この質問は保留にしました。"
            "聞き方を変えて質問してください"
        ),
    },
    "engine.expired_in_queue": {
        "en": "waited {waited} s in the queue, past its time to live",
        "ja": "順番待ちで {waited} 秒待ち、有効期限を過ぎました",
    },
    "engine.past_deadline": {
        "en": "waited {waited} s, past its deadline",
        "ja": "{waited} 秒待ち、期限を過ぎました",
    },
    "engine.question_too_long": {
        "en": "question too long: {length} > {limit}",
        "ja": "質問が長すぎます：{length} 文字（上限 {limit} 文字）",
    },
    "engine.unknown_space": {  # a request's space the engine's spaces file lacks
        "en": 'unknown space "{space}": this engine does not serve it (CONCIERGE_SPACES_FILE)',
        "ja": "スペース「{space}」はこの回答エンジンにありません（CONCIERGE_SPACES_FILE）",
    },
    "engine.time_limit": {
        "en": "time limit of {limit_s} s reached",
        "ja": "制限時間 {limit_s} 秒に達しました",
    },
    "engine.error": {  # a bug: the details (exception, traceback) go to the engine's log only
        "en": "an unexpected error in the engine (its log has the details)",
        "ja": "回答エンジンで予期しないエラーが起きました（詳細はエンジンのログにあります）",
    },
    "engine.generation_failed": {
        "en": "generation failed: {error}",
        "ja": "回答の生成に失敗しました：{error}",
    },
    # --- a rescrape: progress lines, summary, and how it ended ---
    "engine.rescrape.looking": {
        "en": "Rescrape: looking for articles…",
        "ja": "再読み込み：記事を探しています…",
    },
    "engine.rescrape.looking_in": {
        "en": "Rescrape: looking for articles in {site}…",
        "ja": "再読み込み：{site} から記事を探しています…",
    },
    "engine.rescrape.pages": {
        "en": "Rescrape: {done}/{found} pages ({counts})",
        "ja": "再読み込み：{done}/{found} ページ（{counts}）",
    },
    "engine.rescrape.saving": {
        "en": "Rescrape: saving {articles} ({counts})…",
        "ja": "再読み込み：{articles}を保存しています（{counts}）…",
    },
    "engine.rescrape.counts": {
        "en": "{fetched} fetched, {unchanged} unchanged, {failed} failed, {skipped} skipped",
        "ja": "取得 {fetched}、変更なし {unchanged}、失敗 {failed}、スキップ {skipped}",
    },
    "engine.rescrape.article": {"en": "{count} article", "ja": "記事 {count} 件"},
    "engine.rescrape.articles": {"en": "{count} articles", "ja": "記事 {count} 件"},
    "engine.rescrape.site_sitemap": {"en": "the sitemap {url}", "ja": "サイトマップ {url}"},
    "engine.rescrape.site_feed": {"en": "the feed {url}", "ja": "フィード {url}"},
    "engine.rescrape.site_start": {
        "en": "{url} and the pages it links to",
        "ja": "{url} とそこからリンクされたページ",
    },
    "engine.rescrape.site_start_more": {
        "en": "{url}, {more} more and the pages they link to",
        "ja": "{url} ほか {more} 件とそこからリンクされたページ",
    },
    "engine.rescrape.site_folder": {"en": "the folder {url}", "ja": "フォルダー {url}"},
    "engine.rescrape.site_urls": {
        "en": "{url} and {more} more",
        "ja": "{url} ほか {more} 件",
    },
    "engine.rescrape.done": {
        "en": "Rescrape done: {articles} in the knowledge base ({counts}) in {elapsed_s} s.",
        "ja": "再読み込み完了：ナレッジベースに{articles}（{counts}）、{elapsed_s} 秒。",
    },
    "engine.rescrape.capped": {
        "en": "Stopped at {max_pages} pages (CONCIERGE_SITE_MAX_PAGES): the site lists more.",
        "ja": (
            "{max_pages} ページで打ち切りました（CONCIERGE_SITE_MAX_PAGES）。"
            "サイトにはさらにページがあります。"
        ),
    },
    "engine.rescrape.not_read": {"en": "Not read:", "ja": "読み込めなかったページ："},
    "engine.rescrape.not_read_more": {"en": "…and {count} more", "ja": "…ほか {count} 件"},
    "engine.rescrape.stopped": {
        "en": "Rescrape stopped; the previous knowledge base is still in use.",
        "ja": "再読み込みを停止しました。これまでのナレッジベースをそのまま使います。",
    },
    "engine.rescrape.ended": {  # a time limit or an interruption
        "en": "{reason}; the previous knowledge base is still in use.",
        "ja": "{reason}。これまでのナレッジベースをそのまま使います。",
    },
    "engine.rescrape.failed": {
        "en": "rescrape failed: {error}",
        "ja": "再読み込みに失敗しました：{error}",
    },
    "engine.rescrape.running": {
        "en": "a rescrape is already running",
        "ja": "再読み込みはすでに実行中です",
    },
    "engine.rescrape.not_due": {  # a scheduled one, when another rebuilt it meanwhile
        "en": "not needed: the knowledge base was rebuilt after this scheduled rescrape was queued",
        "ja": "不要になりました：予定の再読み込みの受付後に、ナレッジベースが作り直されました",
    },
    # --- why a rescrape read nothing (after "rescrape failed: ") ---
    "engine.rescrape.no_site": {
        "en": (
            "no site configured on the engine: set CONCIERGE_SITE_START_URL, "
            "CONCIERGE_SITE_SITEMAP_URL, CONCIERGE_SITE_FEED_URL, CONCIERGE_SITE_URLS or "
            "CONCIERGE_SITE_DIR (a folder) where the engine runs (the engine's settings count, "
            "not the asker's)"
        ),
        "ja": (
            "回答エンジンにサイトが設定されていません。エンジンを動かす環境で "
            "CONCIERGE_SITE_START_URL、CONCIERGE_SITE_SITEMAP_URL、CONCIERGE_SITE_FEED_URL、"
            "CONCIERGE_SITE_URLS または CONCIERGE_SITE_DIR（フォルダー）を設定してください"
            "（質問する側ではなく、エンジン側の設定が使われます）"
        ),
    },
    "engine.rescrape.none_listed": {
        "en": "the sitemap, feed and URL list name no articles",
        "ja": "サイトマップ、フィード、URL の一覧のどれにも記事がありません",
    },
    "engine.rescrape.no_folder": {
        "en": "CONCIERGE_SITE_DIR: {path} is not a folder the engine can read",
        "ja": "CONCIERGE_SITE_DIR：{path} はエンジンから読めるフォルダーではありません",
    },
    "engine.rescrape.empty_folder": {
        "en": (
            "CONCIERGE_SITE_DIR: {path} holds no Markdown, HTML or text file (.md, .html, .txt)"
        ),
        "ja": (
            "CONCIERGE_SITE_DIR：{path} に Markdown・HTML・テキストのファイル"
            "（.md、.html、.txt）がありません"
        ),
    },
    "engine.rescrape.nothing_read": {
        "en": "no article could be read ({failed} failed, {skipped} skipped)",
        "ja": "読み込めた記事がありません（失敗 {failed}、スキップ {skipped}）",
    },
    "engine.rescrape.nothing_read_first": {
        "en": "no article could be read ({failed} failed, {skipped} skipped; first: {first})",
        "ja": "読み込めた記事がありません（失敗 {failed}、スキップ {skipped}。最初：{first}）",
    },
    "engine.rescrape.not_a_sitemap": {
        "en": "could not read {url} as a sitemap: {error}",
        "ja": "{url} をサイトマップとして読めませんでした：{error}",
    },
    "engine.rescrape.not_xml": {
        "en": "could not read {url} as XML: {error}",
        "ja": "{url} を XML として読めませんでした：{error}",
    },
    "engine.rescrape.not_fetched": {
        "en": "could not fetch {url}: {error}",
        "ja": "{url} を取得できませんでした：{error}",
    },
}
