"""Two spaces in one engine (issue #30): each rebuilt by its own rescrape from its own site,
each answering the same question from its own articles only, in its own persona; a rescrape in
one leaves the other's knowledge base as it was, and the other answering while it runs; an
unknown space ends ``failed`` with the reason; the terminal asks in a space with ``--space``.
The real engine, broker and model; the sites are two folders of Markdown, published under two
addresses."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from bots.ask import Ask, Kind
from bots.client import ConciergeClient
from broker.amqp import Broker
from broker.protocol import Done, Failed, ReplyEvent, make_request
from config.settings import Settings
from config.texts import t
from engine.backends.base import Backend
from engine.knowledge.scrape import folder
from engine.knowledge.scrape.sections import Page
from engine.knowledge.store import KnowledgeBase
from tests.cli_fixture import cli_env, concierge
from tests.conftest import RunningEngine, start_engine
from tests.helpers import collect

QUESTION = "How long does the warranty last?"
SITES = {
    "alpha": {
        "warranty.md": "# Warranty\n\nThe Alpha widget warranty lasts two years from the day "
        "of purchase. Alpha repairs a broken widget for free while it is under warranty.\n",
        "shipping.md": "# Shipping\n\nAlpha ships every widget by train within three days.\n",
    },
    "beta": {
        "warranty.md": "# Warranty\n\nThe Beta gadget warranty lasts five years from the day "
        "of purchase. Beta replaces a broken gadget while it is under warranty.\n",
        "returns.md": "# Returns\n\nBeta takes a gadget back within thirty days of delivery.\n",
    },
}
PROMPTS = {"alpha": "You are Alpha's widget helper.", "beta": "You are Beta's gadget helper."}
GREETINGS = {"alpha": "Hello from the Alpha desk!", "beta": "Beta here: ask me about gadgets."}


def url_of(space: str) -> str:
    return f"https://{space}.example/docs"


def write_spaces(folder: Path) -> Path:
    """Each space's site as a folder beside the spaces file, and the file naming them."""
    tables = []
    for space, pages in SITES.items():
        (folder / space).mkdir()
        for name, text in pages.items():
            (folder / space / name).write_text(text)
        tables.append(
            f'[spaces.{space}]\nsite_dir = "{space}"\nsite_dir_url = "{url_of(space)}"\n'
            f'system_prompt = "{PROMPTS[space]}"\ngreeting = "{GREETINGS[space]}"\n'
        )
    path = folder / "spaces.toml"
    path.write_text("\n".join(tables))
    return path


@pytest.fixture
def spaces_settings(settings: Settings, tmp_path: Path) -> Settings:
    return settings.model_copy(update={"spaces_file": write_spaces(tmp_path)})


@pytest.fixture
async def spaces_engine(
    spaces_settings: Settings, backend: Backend, broker: Broker
) -> AsyncIterator[RunningEngine]:
    running = await start_engine(spaces_settings, backend)
    yield running
    await running.stop()


async def asked(
    client: ConciergeClient, question: str, space: str, kind: Kind = "ask"
) -> ReplyEvent:
    """The terminal event of ``question`` asked in ``space``."""
    ask = Ask(question, "tester", kind, space=space)
    session = await client.ask(ask)
    with client.showing(session):  # forgotten once ended: the asker's cap counts open ones
        return (await collect(session, timeout_s=120))[-1]


async def rescraped(client: ConciergeClient, space: str, engine: RunningEngine) -> Done:
    """A rescrape of ``space`` run to its end, and the job with it: it finishes just after its
    terminal event is out, and a rescrape asked in between is refused as "already running"."""
    end = await asked(client, "", space, "rescrape")
    assert isinstance(end, Done), end
    await engine.worker.rescrapes.wait()
    return end


async def rescraped_all(client: ConciergeClient, engine: RunningEngine) -> None:
    for space in SITES:
        await rescraped(client, space, engine)


def kb_of(settings: Settings, space: str) -> Path:
    return settings.kb_path.with_name(f"{settings.kb_path.stem}.{space}{settings.kb_path.suffix}")


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class HeldRead:
    """``read_document`` that holds the first read of a file under ``url_prefix`` until the
    test releases it: a rescrape caught mid-read, as a slow page holds a crawl mid-fetch (a
    folder has no slow page). It runs in the rescrape's worker thread, so it tells the event
    loop through ``call_soon_threadsafe`` and waits on a thread's event."""

    HOLD_LIMIT_S = 90.0  # past the test's own waits: a test cut short must not hang the engine

    def __init__(
        self, url_prefix: str, read: Callable[[Path, str], Page], loop: asyncio.AbstractEventLoop
    ) -> None:
        self.url_prefix = url_prefix
        self.read = read
        self.loop = loop
        self.reading = asyncio.Event()  # a held read has begun: the rescrape is running
        self.release = threading.Event()  # lets every read go on

    def __call__(self, path: Path, url: str) -> Page:
        if url.startswith(self.url_prefix) and not self.release.is_set():
            self.loop.call_soon_threadsafe(self.reading.set)
            self.release.wait(self.HOLD_LIMIT_S)
        return self.read(path, url)


async def test_each_space_answers_the_same_question_from_its_own_site_only(
    spaces_engine: RunningEngine, spaces_settings: Settings
) -> None:
    async with ConciergeClient(spaces_settings, "test") as client:
        await rescraped_all(client, spaces_engine)
        for space, other in (("alpha", "beta"), ("beta", "alpha")):
            end = await asked(client, QUESTION, space)
            assert isinstance(end, Done), end
            assert end.sources, f"{space}: no source for {end.text!r}"
            assert all(source.startswith(url_of(space)) for source in end.sources), end.sources
            assert url_of(other) not in end.text
            assert other.capitalize() not in end.text  # neither its name nor its quote
    assert not spaces_settings.kb_path.exists()  # the default space was never rebuilt


async def test_what_reaches_the_model_is_the_space_own_persona_and_articles(
    spaces_engine: RunningEngine, spaces_settings: Settings
) -> None:
    async with ConciergeClient(spaces_settings, "test") as client:
        await rescraped_all(client, spaces_engine)
    answers = spaces_engine.worker.answers
    for space, other in (("alpha", "beta"), ("beta", "alpha")):
        request = make_request(reply_to="t", user_id="u", question=QUESTION, ttl_s=60, space=space)
        plan = await asyncio.to_thread(answers.planner(space).plan, request)
        assert plan.step == "model"
        assert plan.messages[0].role == "system"
        assert plan.messages[0].content.startswith(PROMPTS[space])
        prompt = "\n".join(message.content for message in plan.messages)
        assert PROMPTS[other] not in prompt
        assert other.capitalize() not in prompt  # none of its articles
        assert {passage.url[: len(url_of(space))] for passage in plan.passages} == {url_of(space)}


async def test_small_talk_gets_the_space_own_greeting(
    spaces_engine: RunningEngine, spaces_settings: Settings
) -> None:
    async with ConciergeClient(spaces_settings, "test") as client:
        for space, greeting in GREETINGS.items():
            end = await asked(client, "hi!", space)
            assert isinstance(end, Done) and end.text == greeting, end
        end = await asked(client, "hi!", "default")
        assert isinstance(end, Done) and end.text == t("engine.answer.greeting", "en"), end


async def test_a_rescrape_in_one_space_leaves_the_other_knowledge_base_as_it_was(
    spaces_engine: RunningEngine, spaces_settings: Settings, tmp_path: Path
) -> None:
    alpha, beta = kb_of(spaces_settings, "alpha"), kb_of(spaces_settings, "beta")
    async with ConciergeClient(spaces_settings, "test") as client:
        await rescraped(client, "alpha", spaces_engine)
        await rescraped(client, "beta", spaces_engine)
        beta_before = hashlib.sha256(beta.read_bytes()).hexdigest()
        (tmp_path / "alpha" / "repairs.md").write_text("# Repairs\n\nAlpha repairs widgets.\n")
        done = await rescraped(client, "alpha", spaces_engine)
    assert "3" in done.text.split("\n", 1)[0]  # three articles now
    assert KnowledgeBase(alpha).stats().articles == 3
    assert hashlib.sha256(beta.read_bytes()).hexdigest() == beta_before
    assert KnowledgeBase(beta).stats().articles == 2
    assert not spaces_settings.kb_path.exists()


async def test_a_rescrape_running_in_one_space_leaves_the_other_answering_and_untouched(
    spaces_engine: RunningEngine, spaces_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beta is asked while alpha's rescrape is held mid-read, so the answer cannot come from
    a rescrape that had already ended; once alpha's ends, beta's file must be as it was and
    beta must answer again."""
    held = HeldRead(url_of("alpha"), folder.read_document, asyncio.get_running_loop())
    monkeypatch.setattr(folder, "read_document", held)
    beta_kb = kb_of(spaces_settings, "beta")
    async with ConciergeClient(spaces_settings, "test") as client:
        await rescraped(client, "beta", spaces_engine)
        beta_before = sha256_of(beta_kb)
        rescrape = await client.ask(Ask("", "admin", "rescrape", space="alpha"))
        with client.showing(rescrape):
            try:
                await asyncio.wait_for(held.reading.wait(), 30)
                during = await asyncio.wait_for(asked(client, QUESTION, "beta"), 60)
                running = spaces_engine.worker.rescrapes.running
            finally:
                held.release.set()
            rescrape_end = (await collect(rescrape, timeout_s=60))[-1]
        await spaces_engine.worker.rescrapes.wait()
        after = await asyncio.wait_for(asked(client, QUESTION, "beta"), 60)

    assert running is not None and running.session_id == rescrape.session_id, running
    assert running.space == "alpha"  # still reading alpha's site when beta's answer ended
    assert isinstance(rescrape_end, Done), rescrape_end
    assert KnowledgeBase(kb_of(spaces_settings, "alpha")).stats().articles == 2
    assert sha256_of(beta_kb) == beta_before
    for end in (during, after):
        assert isinstance(end, Done), end
        assert end.sources, f"no source for {end.text!r}"
        assert all(source.startswith(url_of("beta")) for source in end.sources), end.sources
        assert url_of("alpha") not in end.text
        assert "Alpha" not in end.text  # neither its name nor its quote


async def test_an_unknown_space_ends_failed_with_the_reason_and_the_engine_goes_on(
    spaces_engine: RunningEngine, spaces_settings: Settings
) -> None:
    async with ConciergeClient(spaces_settings, "test") as client:
        for kind in ("ask", "rescrape"):
            end = await asked(client, QUESTION if kind == "ask" else "", "gamma", kind)
            assert isinstance(end, Failed), end
            assert end.reason == t("engine.unknown_space", "en", space="gamma")
        end = await asked(client, "hi!", "alpha")  # answered: nothing dead-lettered or stuck
        assert isinstance(end, Done) and end.text == GREETINGS["alpha"]
    assert not kb_of(spaces_settings, "gamma").exists()


async def test_the_terminal_asks_and_reads_the_knowledge_base_in_a_space(
    spaces_engine: RunningEngine, spaces_settings: Settings
) -> None:
    env = cli_env(spaces_settings, CONCIERGE_SPACES_FILE=str(spaces_settings.spaces_file))
    for command in (["rescrape", "--space", "beta"], ["ask", "--space", "beta", QUESTION]):
        process = await concierge(*command, env=env)
        stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
        assert process.returncode == 0, stderr.decode()
    assert url_of("beta") in stdout.decode()
    assert url_of("alpha") not in stdout.decode()

    process = await concierge("kb", "stats", "--space", "beta", "--json", env=env)
    stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, stderr.decode()
    assert '"articles": 2' in stdout.decode()
    assert str(kb_of(spaces_settings, "beta").resolve()) in stdout.decode()

    process = await concierge("ask", "--space", "gamma", QUESTION, env=env)
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2
    assert stderr.decode() == (
        "concierge: unknown space 'gamma': the spaces are default, alpha, beta "
        "(CONCIERGE_SPACES_FILE)\n"
    )
