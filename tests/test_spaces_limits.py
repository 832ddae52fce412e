"""A space's cap on open requests (issue #30): ``max_waiting`` in its table, else the file's
top-level one (``default``'s too); a bad one stops the start with one line naming the file; a
bot process over a space's cap refuses that space's next question at once, in the asker's
language, and only that space's. Pure for the file; the real broker for the refusals (no
engine runs, so every request asked stays open and waits)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bots.ask import Ask
from bots.client import AskRefused, ConciergeClient
from broker.amqp import Broker
from config.errors import EXIT_CONFIG
from config.settings import ConfigError, Settings
from config.spaces import load_spaces
from config.texts import t

CAPPED = """
max_waiting = 3

[spaces.alpha]
site_dir = "alpha"
system_prompt = "You are Alpha's helper."
max_waiting = 2

[spaces.beta]
site_dir = "beta"
system_prompt = "You are Beta's helper."
"""


def with_file(settings: Settings, folder: Path, text: str) -> Settings:
    path = folder / "spaces.toml"
    path.write_text(text)
    return settings.model_copy(update={"spaces_file": path})


def plain(tmp_path: Path) -> Settings:
    return Settings(_env_file=None, kb_path=tmp_path / "kb.sqlite3")  # type: ignore[call-arg]


# --- the file (pure) --------------------------------------------------------------------------


def test_a_space_cap_is_its_own_else_the_file_one_which_is_also_the_default_space_cap(
    tmp_path: Path,
) -> None:
    spaces = load_spaces(with_file(plain(tmp_path), tmp_path, CAPPED))
    assert spaces.max_waiting("alpha") == 2
    assert spaces.max_waiting("beta") == 3
    assert spaces.max_waiting("default") == 3
    assert spaces.max_waiting("gamma") == 3  # not in the file: the engine refuses it later
    assert load_spaces(plain(tmp_path)).max_waiting("default") is None  # no file: no cap
    uncapped = CAPPED.replace("max_waiting = 3\n", "")
    assert load_spaces(with_file(plain(tmp_path), tmp_path, uncapped)).max_waiting("beta") is None


@pytest.mark.parametrize("written", ["0", "-1", '"2"', "2.5", "true"])
@pytest.mark.parametrize("where", ["alpha", "top"])
def test_a_cap_that_is_not_a_whole_number_of_at_least_one_stops_the_start_naming_it(
    tmp_path: Path, written: str, where: str
) -> None:
    if where == "top":
        text, named = CAPPED.replace("max_waiting = 3", f"max_waiting = {written}"), "max_waiting"
    else:
        text = CAPPED.replace("max_waiting = 2", f"max_waiting = {written}")
        named = "spaces.alpha.max_waiting"
    with pytest.raises(ConfigError) as raised:
        load_spaces(with_file(plain(tmp_path), tmp_path, text))
    message = str(raised.value)
    assert raised.value.exit_code == EXIT_CONFIG
    assert "\n" not in message
    assert message.startswith(f"invalid CONCIERGE_SPACES_FILE: {named}: "), message


# --- the bot's refusal (the real broker, no engine) -------------------------------------------


@pytest.fixture
async def capped(settings: Settings, broker: Broker, tmp_path: Path) -> Settings:
    return with_file(settings, tmp_path, CAPPED)


@pytest.fixture
async def bot(capped: Settings) -> AsyncIterator[ConciergeClient]:
    async with ConciergeClient(capped, "test") as client:
        yield client


async def test_a_space_at_its_cap_is_refused_and_only_that_space(
    bot: ConciergeClient, broker: Broker
) -> None:
    first = await bot.ask(Ask("one?", "u1", space="alpha"))
    await bot.ask(Ask("two?", "u2", space="alpha"))

    with pytest.raises(AskRefused) as refused:
        await bot.ask(Ask("three?", "u3", space="alpha"))
    assert str(refused.value) == t("refusal.space_busy", "en", waiting=2)
    with pytest.raises(AskRefused) as in_japanese:
        await bot.ask(Ask("三つ目の質問", "u4", space="alpha", locale="ja"))
    assert str(in_japanese.value) == t("refusal.space_busy", "ja", waiting=2)

    await bot.ask(Ask("beta?", "u3", space="beta"))  # the other spaces are not held up
    await bot.ask(Ask("default?", "u3"))
    assert (await broker.request_queue_counts()).messages == 4  # the refused never queued

    bot.forget(first)  # an answer ended: the space has room again
    await bot.ask(Ask("three?", "u3", space="alpha"))
    assert bot.open_in_space("alpha") == 2


async def test_the_cap_counts_what_this_bot_process_has_open_not_another_s(
    bot: ConciergeClient, capped: Settings, broker: Broker
) -> None:
    """What the queue holds is one FIFO, not readable by space: each process counts its own."""
    for asker in ("u1", "u2"):
        await bot.ask(Ask("question?", asker, space="alpha"))
    async with ConciergeClient(capped, "other") as other:
        await other.ask(Ask("question?", "u3", space="alpha"))
        assert other.open_in_space("alpha") == 1
    with pytest.raises(AskRefused):
        await bot.ask(Ask("question?", "u4", space="alpha"))


async def test_the_per_asker_cap_is_said_first_when_both_are_reached(
    capped: Settings,
) -> None:
    solo = capped.model_copy(update={"max_waiting_per_user": 2})
    async with ConciergeClient(solo, "solo") as client:
        for question in ("one?", "two?"):
            await client.ask(Ask(question, "u1", space="alpha"))
        with pytest.raises(AskRefused) as refused:
            await client.ask(Ask("three?", "u1", space="alpha"))
    assert str(refused.value) == t("refusal.too_many_open", "en", waiting=2)
