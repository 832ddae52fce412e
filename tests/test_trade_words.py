"""A Japanese question in a programmer's words meets an English page through the trade's
English (engine/knowledge/trade_words.py) where the dictionary gives only a word's general
senses: 文字列 is JMdict's "character string", the page's "string"; on real pages of SQLite's
documentation (eval/sqlitedocs) and Python's (eval/realdocs)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from engine.answering.evidence import Evidence
from engine.answering.needs import met, question_needs
from engine.answering.pipeline import _with_quoted_section
from engine.knowledge.glossary import shared_glossary
from engine.knowledge.models import Passage
from engine.knowledge.query import parse_query
from tests.real_pages import BASE, plan_for, planner_on_pages

EVAL = Path(__file__).resolve().parent.parent / "eval"


def test_the_trades_english_follows_the_dictionarys() -> None:
    glossary = shared_glossary()

    assert glossary.english("文字列") == ("character string", "string")
    assert glossary.english("取り消す")[:1] == ("cancel",)  # JMdict's first sense stays first
    assert "undo" in glossary.english("取り消す")
    assert glossary.english("有効")[-1] == "enable"
    assert "usage" in glossary.english("使用量")  # "amount used" alone: Massif's page "uses"


def test_a_command_history_is_the_pages_history() -> None:
    """JMdict has コマンド履歴 only as "command history", which zsh's manual never writes: its
    options speak of "the history file" and "the history list" (eval/zshdocs)."""
    question = "zshで複数の端末の間でコマンド履歴を共有するオプションは何ですか\uff1f"
    history = [need for need in question_needs(question) if "command history" in need.forms]

    assert history and met(history[0], "appended to the history file immediately")
    assert "share" in shared_glossary().english("共有")  # JMdict: "joint ownership"


def test_the_trades_english_is_met_but_not_searched() -> None:
    """The search looks for a word's first English forms: the dictionary's, as before (the
    trade's words, searched too, pushed answering sections out of the first eight)."""
    question = "JSON から値を取り出す関数は何ですか\uff1f"
    extract = [need for need in question_needs(question) if "extract" in need.forms]

    assert extract and met(extract[0], "json_extract() extracts a value")
    assert "extract" not in parse_query(question).match


def test_a_string_in_japanese_meets_the_pages_string(tmp_path: Path) -> None:
    """Before, the limits page met all but 文字列 ("character string") and the question was
    refused, pointing to it. (Which of the section's sentences is quoted depends on the
    other pages: on the whole site, "The default value of this macro is 1 billion".)"""
    pages = ["limits.html", "lang_corefunc.html", "faq.html", "printf.html", "datatype3.html"]
    planner = planner_on_pages(tmp_path / "kb.sqlite3", EVAL / "sqlitedocs" / "site", pages)

    plan = plan_for(planner, "文字列の最大の長さの既定値はいくつですか\uff1f")

    assert plan.step == "quote_only"
    assert plan.sources == ("http://docs.example/limits.html",)
    assert plan.evidence is not None
    assert plan.evidence.link == "http://docs.example/limits.html#max_length"


def test_rewriting_one_character_of_a_string_is_answered_from_the_tutorial(
    tmp_path: Path,
) -> None:
    """書き換える is "rewrite" to the dictionary, "modify" or "change" to the page: the regex
    HOWTO's sentence about rewriting strings was quoted instead of "Python strings are
    immutable"."""
    pages = ["tutorial/introduction.html", "howto/regex.html", "library/stdtypes.html"]
    planner = planner_on_pages(tmp_path / "kb.sqlite3", EVAL / "realdocs" / "site", pages)

    plan = plan_for(planner, "Python の文字列の中の一文字だけを書き換えることはできますか\uff1f")

    assert plan.sources == ("http://docs.example/tutorial/introduction.html",)
    assert plan.evidence is not None and "immutable" in plan.evidence.quote


def test_a_folder_is_the_pages_directory(tmp_path: Path) -> None:
    """JMdict has フォルダ only as "folder"; documentation says "directory" (MkDocs' site_dir:
    "The directory where the output HTML and other files are created."). Tried in
    `concierge chat`: the question was refused, pointing to site_dir."""
    pages = ["getting-started.html", "user-guide/configuration.html"]
    planner = planner_on_pages(tmp_path / "kb.sqlite3", EVAL / "mkdocsdocs" / "site", pages)

    plan = plan_for(planner, "ビルドした HTML はどのフォルダに出力されますか\uff1f")

    assert plan.step == "quote_only"
    assert plan.evidence is not None
    assert plan.evidence.link == "http://docs.example/user-guide/configuration.html#site_dir"


def test_across_languages_the_quote_may_come_from_any_section_the_search_found(
    tmp_path: Path,
) -> None:
    """有効 meets the page's "enable", but the search ranked the one section saying it past
    the three of the page a model reads: the quote was "Recursion limit on foreign key
    actions". (On the whole site, "cargo yank を取り消すには" is quoted ``--undo``, the yank
    page's fourth section, the same way.)"""
    pages = ["foreignkeys.html", "lang_upsert.html", "lang_createtable.html", "faq.html",
             "quirks.html", "lang_delete.html"]  # fmt: skip
    planner = planner_on_pages(tmp_path / "kb.sqlite3", EVAL / "sqlitedocs" / "site", pages)

    plan = plan_for(planner, "外部キー制約を有効にするにはどうすればいいですか\uff1f")

    assert plan.sources == ("http://docs.example/foreignkeys.html",)
    assert plan.evidence is not None
    assert "enable or disable foreign key constraints" in plan.evidence.quote
    # its section leads the sources, where the reader checks the quote
    assert plan.passages[0].link == plan.evidence.link == f"{BASE}/foreignkeys.html#fk_enable"


def test_the_passage_quoted_is_the_one_holding_the_quote_not_its_sections_first() -> None:
    """A long section is several passages under one link (review): the one holding the
    quote leads, once, whatever scores its copies carry."""
    first = Passage("Page", "https://x.example/p", "It begins here.", heading="S", anchor="s")
    second = replace(first, text="Run it with --undo to take it back.")
    other = Passage("Page", "https://x.example/p", "Elsewhere.", heading="T", anchor="t")
    evidence = Evidence(
        "Page", first.url, "--undo — Run it with --undo to take it back.", first.link
    )

    chosen = _with_quoted_section([first, other], [first, other, second], evidence)
    assert chosen == [second, first, other]
    kept = _with_quoted_section(
        [second, other], [second, other, replace(second, score=2.0)], evidence
    )
    assert kept == [second, other]
