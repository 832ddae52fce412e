"""``concierge eval --space``: the site a space's answers must cite (cli/eval_site.py), a leak
counted per question and in the summary, the other site's questions judged as not on this
one, and a run through the real engine, broker and model in a space of a spaces file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bots.ask import Ask
from bots.client import ConciergeClient
from broker.amqp import Broker
from broker.protocol import Done
from cli.eval_run import EXIT_OK, EvalOptions, chosen_cases, run_eval
from cli.eval_scoring import Case, Reply, judge, summarize
from cli.eval_site import site_rule
from cli.main import main
from config.settings import Settings
from config.spaces import load_spaces
from engine.answering.passages import format_sources
from engine.backends.base import Backend
from engine.knowledge.models import Passage
from tests.conftest import start_engine
from tests.helpers import collect

SITES = {
    "alpha": "# Warranty\n\nThe Alpha widget warranty lasts two years from the day of purchase.\n",
    "beta": "# Returns\n\nBeta takes a gadget back within thirty days of delivery.\n",
}
WARRANTY = Case(
    id="warranty",
    question="How long does the widget warranty last?",
    expect_any=("two years",),
    expect_source="warranty",
)
RETURNS = Case(
    id="returns", question="Within how many days can a gadget go back?", expect_any=("30",)
)


def url_of(space: str) -> str:
    return f"https://{space}.example/docs"


def write_spaces(folder: Path) -> Path:
    """Two folder spaces, each one page, published under two addresses."""
    tables = []
    for space, text in SITES.items():
        (folder / space).mkdir()
        (folder / space / ("warranty.md" if space == "alpha" else "returns.md")).write_text(text)
        tables.append(
            f'[spaces.{space}]\nsite_dir = "{space}"\nsite_dir_url = "{url_of(space)}"\n'
            f'system_prompt = "You are {space.capitalize()}\'s helper."\n'
        )
    path = folder / "spaces.toml"
    path.write_text("\n".join(tables))
    return path


@pytest.fixture
def spaces_settings(settings: Settings, tmp_path: Path) -> Settings:
    return settings.model_copy(update={"spaces_file": write_spaces(tmp_path)})


def answered_from(space: str) -> Reply:
    """An answer citing ``space``'s page, as the engine sends it."""
    source = f"{url_of(space)}/warranty.md"
    text = "Two years.\n\n" + format_sources([Passage("Warranty", source, "")])
    return Reply("done", text, tokens=3, sources=(source,))


# --- the site rule and the count -----------------------------------------------------


def test_an_answer_citing_another_space_site_is_a_leak(spaces_settings: Settings) -> None:
    spaces = load_spaces(spaces_settings)
    alpha, beta = (site_rule(spaces.named(name).settings) for name in ("alpha", "beta"))
    assert alpha is not None and beta is not None

    at_home = judge(WARRANTY, answered_from("alpha"), 512, alpha)
    leaked = judge(WARRANTY, answered_from("alpha"), 512, beta)

    assert at_home.leaks == [] and at_home.correct
    assert leaked.leaks == [f"{url_of('alpha')}/warranty.md"]
    assert summarize([at_home, leaked]).leaks == 1
    assert summarize([at_home]).leaks == 0
    assert beta.prefixes == (f"{url_of('beta')}/",)
    assert not beta.within("https://beta.example/docsearch")  # a folder, not a string prefix


def test_a_web_site_is_its_crawl_origins_under_the_folder_of_its_addresses(
    settings: Settings,
) -> None:
    docs = site_rule(
        settings.model_copy(update={"site_sitemap_url": "https://studio.example/docs/sitemap.xml"})
    )
    shop = site_rule(
        settings.model_copy(
            update={
                "site_start_url": ["https://studio.example/shop/"],
                "site_allowed_hosts": ["studio.example", "cdn.example"],
            }
        )
    )
    assert docs is not None and shop is not None

    assert docs.within("https://studio.example/docs/guide.html#install")
    assert docs.within("http://studio.example/docs/a.html")  # the crawler allows either scheme
    assert not docs.within("https://studio.example:8443/docs/a.html")  # another port
    assert docs.leaks(["https://studio.example/shop/cart.html"]) == [
        "https://studio.example/shop/cart.html"
    ]
    assert shop.within("https://studio.example/shop/cart.html")
    assert shop.within("https://cdn.example/anything/at/all.html")  # allowed, no folder named
    assert not shop.within("https://elsewhere.example/shop/cart.html")
    assert site_rule(settings) is None  # no site: leaks are not judged
    assert judge(WARRANTY, answered_from("alpha"), 512, None).leaks is None
    assert summarize([judge(WARRANTY, answered_from("alpha"), 512, None)]).leaks is None


def test_the_other_site_s_questions_expect_not_on_the_site_and_first_takes_the_first() -> None:
    follow_up = RETURNS.model_copy(update={"before": ("Hello?",)})
    cases = chosen_cases([WARRANTY, follow_up, RETURNS], EvalOptions(other_site=True, first=2))

    assert [case.id for case in cases] == ["warranty", "returns"]
    assert all(case.not_on_site and not case.expect_any for case in cases)
    assert cases[1].before == ("Hello?",) and cases[0].expect_source is None
    refused = judge(cases[0], Reply("done", "That is not on the site."), 512)
    assert refused.correct  # honest


def test_an_unknown_space_exits_2_naming_the_spaces(
    spaces_settings: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(WARRANTY.model_dump_json() + "\n")
    monkeypatch.setenv("CONCIERGE_SPACES_FILE", str(spaces_settings.spaces_file))

    assert main(["eval", str(path), "--space", "gamma"]) == 2
    assert "unknown space 'gamma': the spaces are default, alpha, beta" in capsys.readouterr().err


# --- through the real engine -----------------------------------------------------------


async def test_an_eval_in_a_space_counts_no_leak_for_its_own_answers(
    spaces_settings: Settings,
    broker: Broker,
    backend: Backend,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text(WARRANTY.model_dump_json() + "\n" + RETURNS.model_dump_json() + "\n")
    engine = await start_engine(spaces_settings, backend)
    try:
        await rescraped(spaces_settings, "alpha")
        code = await run_eval(
            spaces_settings, questions, as_json=True, options=EvalOptions(space="alpha")
        )
    finally:
        await engine.stop()

    assert code == EXIT_OK
    document = json.loads(capsys.readouterr().out)
    assert (document["space"], document["site"]) == ("alpha", [f"{url_of('alpha')}/"])
    warranty, returns = document["results"]
    assert warranty["cited"] == [f"{url_of('alpha')}/warranty.md"], warranty
    assert warranty["leaks"] == [] and warranty["correct"]
    assert returns["cited"] == [] and returns["leaks"] == []  # beta's page is not alpha's
    assert document["summary"]["leaks"] == 0


async def rescraped(settings: Settings, space: str) -> None:
    """A rescrape of ``space`` through the engine, as ``concierge rescrape --space`` asks it."""
    async with ConciergeClient(settings, "test") as client:
        session = await client.ask(Ask("", "tester", "rescrape", space=space))
        with client.showing(session):
            end = (await collect(session, timeout_s=120))[-1]
    assert isinstance(end, Done), end
