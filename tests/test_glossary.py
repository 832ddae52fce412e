"""A Japanese question meets English pages through a dictionary's English
(engine/knowledge/glossary.py, JMdict as ``jamdict-data`` ships it), on real pages: Valgrind's
manual (eval/valgrinddocs), Node.js's reference (eval/nodedocs) and npm's (eval/npmdocs)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from broker.protocol import make_request
from config.settings import Settings
from engine.answering.needs import met, question_needs
from engine.answering.on_site import BestArticle
from engine.answering.pipeline import AnswerPlanner, Plan
from engine.knowledge.glossary import Glossary, shared_glossary
from engine.knowledge.query import english_forms, grammar_mask, parse_query
from engine.knowledge.scrape.builder import build_kb
from engine.knowledge.scrape.extract import extract_article

EVAL = Path(__file__).resolve().parent.parent / "eval"
BASE = "http://docs.example"


def planner_for(tmp_path: Path, site: str, pages: tuple[str, ...]) -> AnswerPlanner:
    articles = []
    for path in pages:
        url = f"{BASE}/{path}"
        html = (EVAL / site / "site" / path).read_bytes()
        articles.append(extract_article(html, url).article(url))
    settings = Settings(kb_path=tmp_path / f"{site}.sqlite3")
    build_kb(settings.kb_path, settings.kb_path, articles, [], datetime.now(UTC))
    return AnswerPlanner(settings, lambda messages: 0)


def plan_for(planner: AnswerPlanner, question: str) -> Plan:
    return planner.plan(make_request(reply_to="b", user_id="u", question=question, ttl_s=9))


def test_a_word_is_read_in_english_its_trades_sense_first() -> None:
    glossary = shared_glossary()

    assert glossary.english("ヒープ") == ("heap",)
    assert glossary.english("パス")[0] == "path"  # "passing (a test)" is its first sense
    assert glossary.english("どれですか") == ()  # no entry


def test_a_run_is_read_longest_word_first_around_its_grammar() -> None:
    run = "ヒープの使用量を測るツールはどれですか"
    words = shared_glossary().words(run, grammar_mask(run))

    assert [run[start:end] for start, end, _ in words] == ["ヒープ", "使用量", "測る", "ツール"]


def test_a_noun_without_is_read_as_the_dictionarys_pair_not_as_the_noun() -> None:
    """ "関係のない複数の例外" asks about unrelated exceptions: "relation" would be the
    opposite; a noun the dictionary has no such pair for is read as before."""
    glossary = shared_glossary()
    run = "関係のない複数の例外をまとめて送出するには"
    words = glossary.words(run, grammar_mask(run))

    assert [run[start:end] for start, end, _ in words][:3] == ["関係のない", "複数", "例外"]
    assert words[0][2][0] == "unrelated"
    limitless = "制限のない数"
    assert glossary.words(limitless, grammar_mask(limitless))[0][:2] == (0, 2)


def test_without_the_dictionary_nothing_is_read_in_english() -> None:
    assert Glossary(None).english("ヒープ") == ()
    assert Glossary(None).words("ヒープ", [False] * 3) == []


def test_a_japanese_question_meets_an_english_sentence_and_searches_its_words() -> None:
    question = "メモリリークの詳細を表示するにはどのオプションを使いますか？"  # noqa: RUF001
    sentence = "If set to full, each individual memory leak will be shown in detail.".lower()

    leak = [need for need in question_needs(question) if "リーク" in need.forms]

    assert leak and all(met(need, sentence) for need in leak)
    assert '"memory leak"' in parse_query(question).match


def test_across_languages_the_names_must_be_on_the_page_whatever_the_english_met() -> None:
    """ "Python のアプリを Docker コンテナで…": the page's English may meet "app" and "container",
    but not "Docker". In one language the names count as the other words do."""
    across = BestArticle("u", share=0.8, cosine=0.5, across_languages=True, latin_share=0.5)
    same = BestArticle("u", share=0.8, cosine=0.5, latin_share=0.0)  # "…いくら? PDF は…"

    assert not across.on_site
    assert same.on_site


def test_a_gloss_is_kept_whole_and_never_a_negation() -> None:
    glossary = shared_glossary()

    assert glossary.english("メモリリーク") == ("memory leak",)
    assert "free" not in " ".join(glossary.english("有料"))  # "not free": paid
    assert glossary.words("中", [False]) == []  # a lone kanji is no word (22 senses)
    assert glossary.english("存在") == ("existence",)  # not "being", in any English page


def test_a_noun_in_english_meets_the_verb_on_the_page() -> None:
    forms = {run: found for run in ("インストール", "削除") for _, _, found in english_forms(run)}

    assert forms["インストール"] == ("install",)  # "installation"
    assert forms["削除"][0] == "dele"  # "deletion"


def test_a_damaged_dictionary_reads_as_none_and_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = tmp_path / "weird #dir" / "jamdict.db"
    broken.parent.mkdir()
    broken.write_bytes(b"not a database")
    glossary = Glossary(broken)

    assert glossary.english("ヒープ") == ()
    assert glossary.english("ツール") == ()
    assert len([r for r in caplog.records if "dictionary" in r.getMessage()]) == 1


def test_a_figure_is_never_on_the_site_by_meaning_alone() -> None:
    price = BestArticle("u", share=0.25, cosine=0.54, across_languages=True, asks_number=True)
    what = BestArticle("u", share=0.25, cosine=0.54, across_languages=True)

    assert not price.on_site
    assert what.on_site


@pytest.fixture(scope="module")
def valgrind(tmp_path_factory: pytest.TempPathFactory) -> AnswerPlanner:
    pages = ("mc-manual.html", "manual-core.html")
    return planner_for(tmp_path_factory.mktemp("valgrind"), "valgrinddocs", pages)


def test_a_japanese_question_in_japanese_words_is_answered_from_the_english_manual(
    valgrind: AnswerPlanner,
) -> None:
    """Its cosine with the manual's nearest passage is 0.38: the meaning alone refused it."""
    plan = plan_for(valgrind, "メモリリークの詳細を表示するにはどのオプションを使いますか？")  # noqa: RUF001

    assert plan.step == "quote_only"
    assert plan.sources == (f"{BASE}/mc-manual.html",)
    assert plan.evidence is not None
    assert "--leak-check=" in plan.evidence.quote


def test_a_figure_asked_in_japanese_is_answered_only_by_a_quote_that_holds_one(
    valgrind: AnswerPlanner, tmp_path: Path
) -> None:
    """The price's words are met in English ("support", "contract"); on Valgrind's manual the
    quote was about the clone system call."""
    support = (
        "<html><body><main><h1>Support</h1><p>Valgrind support contracts are made with the"
        " developers. Ask them for a support contract.</p></main></body></html>"
    )
    url = f"{BASE}/support.html"
    articles = [extract_article(support.encode(), url).article(url)]
    build_kb(tmp_path / "kb.sqlite3", tmp_path / "kb.sqlite3", articles, [], datetime.now(UTC))
    planner = AnswerPlanner(Settings(kb_path=tmp_path / "kb.sqlite3"), lambda messages: 0)

    price = plan_for(planner, "Valgrind の商用サポート契約はいくらですか？")  # noqa: RUF001
    default = plan_for(valgrind, "--num-callers の既定値はいくつですか？")  # noqa: RUF001

    assert price.step == "not_on_site"
    assert price.sources == ()
    assert default.step == "quote_only"
    assert default.evidence is not None
    assert "12" in default.evidence.quote


def test_a_japanese_question_in_japanese_words_is_on_the_node_pages_a_price_is_not(
    tmp_path: Path,
) -> None:
    """Without the dictionary the first was refused (its nearest passage at 0.37); with every
    word of a gloss met alone, the second was answered: 商用, "business purpose", met by
    "testing purposes", サポート by "support", 年間 by "during"."""
    pages = ("worker_threads.html", "process.html", "errors.html", "cli.html")
    planner = planner_for(tmp_path, "nodedocs", pages)

    message = plan_for(planner, "ワーカースレッドからメインスレッドにメッセージを送るには？")  # noqa: RUF001
    price = plan_for(planner, "Node.js の商用サポートは年間いくらですか？")  # noqa: RUF001

    assert message.step == "quote_only"
    assert message.evidence is not None
    assert "postMessage" in message.evidence.quote
    assert price.step == "not_on_site"


def test_a_price_asked_in_japanese_is_not_answered_from_a_page_near_in_meaning(
    tmp_path: Path,
) -> None:
    planner = planner_for(tmp_path, "npmdocs", ("commands/npm.html", "commands/npm-help.html"))

    plan = plan_for(planner, "npm の有料プランは月いくらですか？")  # noqa: RUF001

    assert plan.step == "not_on_site"
    assert plan.sources == ()
