"""``concierge eval``: the questions file, the verdicts, and a run through the real pipeline."""

from __future__ import annotations

import io
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from rich.console import Console

from broker.amqp import Broker
from broker.protocol import HistoryTurn
from cli.eval_run import EXIT_BAD_INPUT, EXIT_NO_ENGINE, EXIT_OK, print_report, run_eval
from cli.eval_scoring import (
    Case,
    CaseFileError,
    Reply,
    judge,
    load_cases,
    own_words,
    split_sources,
    summarize,
    unquoted_numbers,
)
from cli.main import main
from config.settings import Settings
from engine.answering.passages import format_sources
from engine.answering.wording import WORDING
from engine.backends.base import Backend
from engine.knowledge.models import Passage
from engine.knowledge.scrape.rescrape import rescrape
from tests.conftest import start_engine
from tests.helpers import WireTap
from tests.site_fixture import start as start_site

ROOT = Path(__file__).resolve().parent.parent
FERRY = "https://guide.example/articles/ferry-timetable.html"
MUSEUM = "https://guide.example/articles/museum-hours.html"
LAST_FERRY = Case(
    id="last-ferry",
    question="When does the last ferry leave?",
    expect_any=("16:50",),
    expect_source="ferry-timetable",
    must_not=("17:40",),
)
OSAKA = Case(id="osaka", question="When does the ferry to Osaka leave?", not_on_site=True)


def write_lines(path: Path, *lines: str) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def sources(*urls: str) -> str:
    return "\n\n" + format_sources([Passage(f"Title {n}", url, "") for n, url in enumerate(urls)])


# --- the questions file ---------------------------------------------------------------


def test_the_project_eval_files_load() -> None:
    cases = load_cases(ROOT / "eval" / "questions.jsonl")

    assert len(cases) >= 24
    assert any(case.not_on_site for case in cases)
    assert any("ようかん" in case.question for case in cases)
    assert len(load_cases(ROOT / "eval" / "heldout.jsonl")) >= 10


@pytest.mark.parametrize("site", ["realdocs", "npmdocs", "valgrinddocs", "nodedocs"])
def test_each_real_sites_questions_load_beside_its_site_and_licence(site: str) -> None:
    folder = ROOT / "eval" / site

    cases = load_cases(folder / "questions.jsonl")

    assert len(cases) >= 20 and any(case.not_on_site for case in cases)
    assert (folder / "site" / "sitemap.xml").is_file() and (folder / "LICENSE").is_file()


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("{not json", "2: not a JSON object"),
        ('{"id": "a", "question": "q", "expect_any": ["x"], "colour": 1}', "2: colour: Extra"),
        ('{"id": "a", "question": "q"}', "2: Value error, expect_any is empty"),
        ('{"id": "a", "question": "q", "not_on_site": true, "expect_any": ["x"]}', "2: Value"),
        ('{"id": "a", "expect_any": ["x"]}', "2: question: Field required"),
        ('["a list"]', "2: Input should be"),
        ('{"id": "first", "question": "again?", "expect_any": ["x"]}', "2: the id 'first'"),
    ],
)
def test_a_bad_line_is_named_by_its_number(tmp_path: Path, line: str, reason: str) -> None:
    path = write_lines(
        tmp_path / "q.jsonl", '{"id": "first", "question": "q?", "expect_any": ["x"]}', line
    )

    with pytest.raises(CaseFileError) as raised:
        load_cases(path)

    assert str(raised.value).startswith(f"{path}:")
    assert reason in str(raised.value)


def test_blank_lines_are_skipped_and_an_empty_file_is_refused(tmp_path: Path) -> None:
    good = write_lines(tmp_path / "q.jsonl", "", LAST_FERRY.model_dump_json(), "   ")

    assert load_cases(good) == [LAST_FERRY]
    with pytest.raises(CaseFileError, match="no questions"):
        load_cases(write_lines(tmp_path / "empty.jsonl", ""))
    with pytest.raises(CaseFileError, match="cannot read"):
        load_cases(tmp_path / "missing.jsonl")


def test_the_command_exits_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_lines(tmp_path / "q.jsonl", LAST_FERRY.model_dump_json(), '{"id": 3}')

    code = main(["eval", str(path)])

    assert code == EXIT_BAD_INPUT
    assert f"{path}:2: id: Input should be a valid string" in capsys.readouterr().err


# --- verdicts -------------------------------------------------------------------------


def test_a_right_answer_citing_only_its_source() -> None:
    reply = Reply("done", "It leaves at 16:50." + sources(FERRY), tokens=9, elapsed_s=1.5)

    result = judge(LAST_FERRY, reply, max_tokens=512)

    assert (result.answer, result.cited) == ("It leaves at 16:50.", [FERRY])
    assert result.correct and result.right_source
    assert not result.looped and not result.said_not_on_site


def test_an_unrelated_source_or_a_forbidden_text_is_wrong() -> None:
    extra_source = judge(LAST_FERRY, Reply("done", "16:50." + sources(FERRY, MUSEUM)), 512)
    forbidden = judge(LAST_FERRY, Reply("done", "16:50, or 17:40." + sources(FERRY)), 512)

    assert extra_source.correct and extra_source.right_source is False
    assert not forbidden.correct and forbidden.must_not_found == ["17:40"]


def test_not_on_site_is_honest_only_when_said_and_nothing_is_cited() -> None:
    honest = judge(OSAKA, Reply("done", "I don't know: the site does not say."), 512)
    invented = judge(OSAKA, Reply("done", "It leaves at 16:50." + sources(FERRY)), 512)
    honest_but_cites = judge(OSAKA, Reply("done", "Not on the site." + sources(FERRY)), 512)
    japanese = judge(OSAKA, Reply("done", "その情報はサイトには載っていません。"), 512)

    assert honest.correct and honest.right_source and honest.said_not_on_site
    assert not invented.correct and invented.right_source is False
    assert not honest_but_cites.correct
    assert japanese.correct
    summary = summarize([honest, invented, honest_but_cites])
    assert (summary.right_or_honest, summary.invented, summary.not_on_site_questions) == (1, 1, 3)


def test_a_refusal_is_wrong_though_the_sections_it_points_to_name_the_answer() -> None:
    pointed = (
        "The site does not cover this: none of its articles answers that question.\n\n"
        "The nearest sections I found, in case they help:\n"
        "- Ferry timetable \u203a Last ferry 16:50 <https://guide.example/ferry#last>"
    )
    refused = judge(LAST_FERRY, Reply("done", pointed, not_on_site=True), 512)

    assert not refused.correct and refused.said_not_on_site
    assert summarize([refused]).missed == 1


def test_an_answer_whose_own_words_were_left_out_is_no_refusal() -> None:
    text = (
        f"{WORDING['en'].withdrawn}\n\nFrom the site: \u201cThe last ferry leaves at 16:50.\u201d"
    )
    quoted = judge(LAST_FERRY, Reply("done", text + sources(FERRY)), 512)

    assert quoted.correct and not quoted.said_not_on_site
    assert summarize([quoted]).missed == 0


def test_a_loop_is_what_done_says_or_the_cap_or_a_repetition() -> None:
    said_cut = Reply("done", "Fine.", tokens=5, finish_reason="repetition")
    said_capped = Reply("done", "Fine.", tokens=5, finish_reason="length")
    at_cap = Reply("done", "Fine prose.", tokens=48)  # an engine that does not say
    repeating = Reply("done", "The ferry leaves at 16:50.\n" * 12, tokens=20)

    for reply in (said_cut, said_capped, at_cap, repeating):
        assert judge(LAST_FERRY, reply, max_tokens=48).looped, reply
    assert not judge(LAST_FERRY, Reply("done", "Fine prose.", tokens=5), 48).looped


def test_dones_sources_and_not_on_site_are_believed() -> None:
    listed_in_text = Reply("done", "16:50." + sources(FERRY, MUSEUM), sources=(FERRY,))
    flagged = Reply("done", "Sorry!", not_on_site=True)

    assert judge(LAST_FERRY, listed_in_text, 512).cited == [FERRY]
    assert judge(OSAKA, flagged, 512).correct


def test_a_failed_answer_is_wrong_and_counted() -> None:
    failed = judge(LAST_FERRY, Reply("failed", "16:50", reason="engine error"), 512)
    right = judge(LAST_FERRY, Reply("done", "16:50" + sources(FERRY), elapsed_s=2.0), 512)
    slow = judge(LAST_FERRY, Reply("done", "16:50" + sources(FERRY), elapsed_s=9.0), 512)

    assert not failed.correct and failed.outcome == "failed: engine error"
    summary = summarize([failed, right, slow])
    assert (summary.failed, summary.right_or_honest, summary.right_source) == (1, 2, 2)
    assert (summary.engine_s_total, summary.engine_s_per_answer_median) == (11.0, 5.5)


def test_the_table_has_a_line_per_question_and_the_summary() -> None:
    results = [
        judge(
            LAST_FERRY, Reply("done", "It leaves at 16:50." + sources(FERRY), elapsed_s=2.0), 512
        ),
        judge(OSAKA, Reply("done", "At 16:50." + sources(FERRY), elapsed_s=4.0), 512),
    ]
    out = io.StringIO()

    print_report(results, summarize(results), Console(file=out, width=100))

    text = out.getvalue()
    assert "last-ferry" in text and "osaka" in text and "invented" in text
    assert "right or honest: 1/2 (50%)" in text
    assert "invented answers to not-on-site questions: 1/1" in text
    assert "engine seconds: 6.0 in all, median 3.0 per answer" in text


def test_the_models_own_words_are_judged_apart_from_the_quote_after_them() -> None:
    quote = "\n\nFrom the site: \u201cThe last ferry leaves Minato at 16:50.\u201d" + sources(FERRY)
    garbled = judge(LAST_FERRY, Reply("done", "It leaves at 17:40." + quote, tokens=7), 512)
    right = judge(LAST_FERRY, Reply("done", "At 16:50." + quote, tokens=4), 512)
    quote_only = judge(LAST_FERRY, Reply("done", quote.strip(), tokens=0), 512)

    assert own_words(garbled.answer) == "It leaves at 17:40."
    assert (garbled.own_words_right, right.own_words_right, quote_only.own_words_right) == (
        False,
        True,
        None,  # the model wrote nothing: the quote is the whole answer
    )
    assert not garbled.correct and right.correct and quote_only.correct
    summary = summarize([garbled, right, quote_only])
    assert (summary.own_words_right, summary.own_words_of) == (1, 2)
    # The engine left the model's words out (a number not on the site): none to judge.
    left_out = WORDING["en"].withdrawn + quote
    withdrawn = judge(LAST_FERRY, Reply("done", left_out, tokens=7), 512)
    assert own_words(withdrawn.answer) == "" and withdrawn.own_words_right is None
    assert withdrawn.correct


def test_numbers_the_model_wrote_that_were_neither_quoted_nor_asked_are_listed() -> None:
    quote = "\n\nFrom the site: \u201cEach session lasts 60 minutes.\u201d" + sources(FERRY)
    case = Case(id="s", question="How long is a session on day 2?", expect_any=("60",))
    invented = "It lasts 60 minutes.\n\nFrom 12 hours (3 days) to 48 hours, on day 2."

    assert unquoted_numbers(case, invented + quote) == ["12", "3", "48"]  # 60 and 2 were given
    assert unquoted_numbers(case, "1,200 yen, at 07:10." + quote) == ["1200", "7:10"]
    assert unquoted_numbers(case, quote.strip()) == []  # the quote alone
    pointed = "Not on the site.\n\nNearest:\n- Ferry <http://127.0.0.1:8042/ferry-2.html#s1>"
    assert unquoted_numbers(case, pointed) == []  # an address claims nothing
    asked_before = case.model_copy(update={"before": ("And for 48 hours?",)})
    assert unquoted_numbers(asked_before, invented + quote) == ["12", "3"]
    judged = judge(case, Reply("done", invented + quote, tokens=9), 512)
    assert judged.unquoted_numbers == ["12", "3", "48"]
    assert summarize([judged]).unquoted_numbers == 1
    nearest = "Not on the site.\n\nNearest:\n- 5. Data Structures \u203a 5.1. More on Lists <x>"
    engine_alone = judge(case, Reply("done", nearest, tokens=0), 512)
    assert engine_alone.unquoted_numbers == []  # the model wrote none of it


def test_sources_are_read_from_the_engines_own_format() -> None:
    answer, cited = split_sources("The answer.\n\n" + format_sources([Passage("F", FERRY, "")]))

    assert (answer, cited) == ("The answer.", [FERRY])
    assert split_sources("No sources here <https://x.example>") == (
        "No sources here <https://x.example>",
        [],
    )


# --- against the real pipeline --------------------------------------------------------


async def test_no_engine_is_said_at_once(
    settings: Settings, broker: Broker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_lines(tmp_path / "q.jsonl", LAST_FERRY.model_dump_json())
    started = time.monotonic()

    code = await run_eval(settings, path)

    assert code == EXIT_NO_ENGINE
    assert time.monotonic() - started < 15  # at once: long before any reply timeout
    assert f"no engine takes requests from the queue '{settings.prefix}.request'" in (
        capsys.readouterr().err
    )


@pytest.fixture
async def eval_site() -> AsyncIterator[str]:
    """The project's test site (eval/site), served as files."""
    app = web.Application()
    app.router.add_static("/", ROOT / "eval" / "site")
    server = await start_site(app)
    yield f"http://127.0.0.1:{server.port}"
    await server.close()


async def test_eval_runs_each_question_through_the_engine(
    settings: Settings,
    broker: Broker,
    backend: Backend,
    eval_site: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    site_settings = settings.model_copy(
        update={
            "kb_path": tmp_path / "kb.sqlite3",
            "site_sitemap_url": f"{eval_site}/sitemap.xml",
            "scrape_delay_s": 0.0,
        }
    )
    scraped = await rescrape(site_settings, lambda _: None, lambda: False)
    assert scraped.articles == 10
    warranty = Case(id="warranty", question="How long is the warranty?", not_on_site=True)
    crossing = Case(  # a follow-up: its earlier question is asked first, then sent with it
        id="crossing",
        before=("When does the last ferry leave?",),
        question="And how long does the crossing take?",
        expect_any=("35",),
        expect_source="ferry-timetable",
    )
    lines = (LAST_FERRY, warranty, crossing)
    path = write_lines(tmp_path / "q.jsonl", *(case.model_dump_json() for case in lines))
    tap = await WireTap.open(broker, "nobody")
    engine = await start_engine(site_settings, backend)
    try:
        code = await run_eval(site_settings, path, as_json=True)
    finally:
        await engine.stop()

    assert code == EXIT_OK
    document = json.loads(capsys.readouterr().out)
    ferry, no_match, follow_up = document["results"]
    assert follow_up["id"] == "crossing" and follow_up["question"] == crossing.question
    asked = [request.question for request in tap.requests]
    assert asked == [LAST_FERRY.question, warranty.question, *crossing.before, crossing.question]
    earlier, answer = tap.requests[-1].history  # the judged one carries the one before
    assert earlier == HistoryTurn(role="user", text="When does the last ferry leave?")
    assert answer.role == "assistant" and "16:50" in answer.text
    assert "Sources:" not in answer.text  # as a bot sends an answer back
    assert tap.requests[-2].history == ()
    assert "unquoted_numbers" in ferry and "unquoted_numbers" in document["summary"]
    assert ferry["id"] == "last-ferry"
    assert f"{eval_site}/articles/ferry-timetable.html" in ferry["cited"]
    assert ferry["answer"] and "Sources:" not in ferry["answer"]
    assert 0 < ferry["tokens"] <= site_settings.max_tokens
    assert ferry["elapsed_s"] > 0 and ferry["ttft_s"] > 0
    assert ferry["cited"] == [f"{eval_site}/articles/ferry-timetable.html"]  # and no other
    assert no_match["cited"] == [] and no_match["correct"]  # "the site does not cover this"
    summary = document["summary"]
    assert (summary["questions"], summary["invented"]) == (3, 0)
    assert summary["engine_s_total"] >= ferry["elapsed_s"]
