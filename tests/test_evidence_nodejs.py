"""The quote on Node.js's API reference (eval/nodedocs): an entry is found by its heading
though its anchor drops the dots ("ostmpdir"), every sentence of it is about its name, and
what it says first in its own words (not "Added in: v0.9.9", "Returns: <string>", a line of
code) is what it is or does."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.answering.evidence import ASKS_FOR_NUMBER_RE, find_evidence, is_entry_of
from engine.knowledge.models import Passage
from tests.test_evidence_docs import entry_passages

SITE = Path(__file__).resolve().parent.parent / "eval" / "nodedocs" / "site"


def quote(question: str, passages: list[Passage]) -> str:
    evidence = find_evidence(question, passages)
    assert evidence is not None
    return evidence.quote


def test_what_a_function_returns_is_its_entrys_sentence_not_its_type_line() -> None:
    passages = entry_passages(SITE / "os.html", "oscpus", "ostmpdir")

    said = quote("What does os.tmpdir() return?", passages)

    assert "Returns the operating system's default directory for temporary files" in said


def test_what_a_flag_does_is_its_description_not_the_sentence_saying_flag() -> None:
    passages = entry_passages(SITE / "cli.html", "--watch-path", "--watch")

    said = quote("What does the --watch flag do?", passages)

    assert said.startswith("--watch — Starts Node.js in watch mode.")
    assert "restart" in said
    assert "cannot be combined" not in said


def test_what_a_function_does_is_its_prose_not_its_example_code() -> None:
    passages = entry_passages(SITE / "util.html", "utilcallbackifyoriginal")

    said = quote("What does util.callbackify() do?", passages)

    assert "returns a function following the error-first callback style" in said


def test_an_options_default_further_on_its_line_joins_the_quote() -> None:
    passages = entry_passages(
        SITE / "child_process.html", "child_processexeccommand-options-callback"
    )

    said = quote("What is the default maxBuffer of child_process.exec()?", passages)

    assert "maxBuffer" in said
    assert said.endswith("… Default: 1024 * 1024.")


def test_a_sentence_going_on_from_the_one_before_brings_it() -> None:
    passages = entry_passages(SITE / "dns.html", "dnslookup")

    said = quote("How does dns.lookup() resolve a name?", passages)

    assert said.startswith("dns.lookup() — Under the hood, dns.lookup() uses the same operating")
    assert "For instance, dns.lookup() will almost always resolve" in said


def test_a_property_is_quoted_by_its_description_not_a_sentence_naming_it() -> None:
    passages = entry_passages(SITE / "process.html", "processexitcode_1")

    said = quote("What is process.exitCode?", passages)

    assert "The exit code." in said
    assert "Specifying a code" not in said


def test_a_japanese_question_asking_how_many_is_quoted_by_a_sentence_with_a_number() -> None:
    """ "いくつ" asks for a number, as "how many" does."""
    passages = entry_passages(
        SITE / "events.html", "emittergetmaxlisteners", "emittersetmaxlistenersn"
    )

    said = quote("EventEmitter のリスナーの最大数の既定値はいくつですか？", passages)  # noqa: RUF001

    assert "more than 10 listeners are added" in said


def test_a_label_is_quoted_when_it_is_what_is_asked() -> None:
    passages = entry_passages(SITE / "os.html", "ostmpdir")

    assert "Added in: v0.9.9" in quote("When was os.tmpdir() added?", passages)


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("EventEmitter のリスナーの最大数の既定値はいくつですか？", True),  # noqa: RUF001
        ("os.cpus() が返すオブジェクトのプロパティをいくつか教えてください。", False),  # some
        ("How many listeners can an event have?", True),
    ],
)
def test_how_many_asks_for_a_number_but_some_does_not(question: str, asks: bool) -> None:
    assert bool(ASKS_FOR_NUMBER_RE.search(question)) is asks


@pytest.mark.parametrize(
    ("heading", "names", "entry"),
    [
        ("Util \u203a util.callbackify(original)", ["util.callbackify"], True),
        ("Command-line API \u203a Options \u203a --inspect[=[host:]port]", ["--inspect"], True),
        ("Command-line API \u203a Options \u203a -r, --require module", ["--require"], True),
        ("Buffer \u203a Class: Buffer", ["buffer"], True),
        ("Glossary \u203a bytes-like object", ["bytes-like"], False),  # words, not a name
        ("http.server — HTTP servers", ["http.server"], False),
    ],
)
def test_an_entry_is_named_by_its_headings_name_not_by_words(
    heading: str, names: list[str], entry: bool
) -> None:
    passage = Passage("T", "http://docs.example/p.html", "text", heading=heading)

    assert is_entry_of(passage, names) is entry
