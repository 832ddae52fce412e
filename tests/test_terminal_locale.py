# ruff: noqa: RUF001  # the Japanese lines use full-width brackets and punctuation
"""The terminal client in ``CONCIERGE_LOCALE``: its own lines, the request's locale (so the
engine's lines follow), and the English lines as they always were.

Each case runs ``concierge`` as a user would, against the real broker (and the real engine
where one answers); what the engine receives is read by a tap beside the queues.
"""

from __future__ import annotations

import asyncio
import getpass
from collections.abc import Callable

import pytest

from bots.ask import Ask
from bots.client import ConciergeClient
from broker.amqp import Broker
from config.settings import Settings
from tests.cli_fixture import cli_env, concierge
from tests.conftest import RunningEngine
from tests.helpers import WireTap
from tests.terminal_fixture import Terminal, terminals  # noqa: F401  # the fixture

KEYS = {
    "en": "/new starts a new conversation · Ctrl+D leaves",
    "ja": "/new で新しい会話 · Ctrl+D で終了",
}
CHAT = {
    "en": [
        "Concierge · ask anything · Ctrl+C stops an answer · /rescrape reads the site · "
        f"{KEYS['en']}",
        "you> /nope",
        f"no command /nope · {KEYS['en']}",
        "you> /new",
        "new conversation: the questions before are forgotten",
    ],
    "ja": [
        "Concierge · なんでも質問してください · Ctrl+C で回答を停止 · "
        f"/rescrape でサイトを再読み込み · {KEYS['ja']}",
        "あなた> /nope",
        f"/nope というコマンドはありません · {KEYS['ja']}",
        "あなた> /new",
        "新しい会話：これまでの質問は引き継ぎません",
    ],
}
EMPTY = {"en": "not asked: the question is empty", "ja": "質問できませんでした：質問が空です"}
NO_ENGINE = {
    "en": [
        "no engine is running; your question waits, 1 ahead "
        "(it expires in 2 s unless an engine starts)",
        "expired: no engine took it within its time to live (2 s)",
    ],
    "ja": [
        "回答エンジンが動いていません。質問は順番を待っています（前に 1 件。"
        "エンジンが起動しなければ 2 秒で期限切れになります）",
        "期限切れ：有効期限（2 秒）のうちに回答エンジンが受け付けませんでした",
    ],
}
WAITING = {"en": "waiting for an engine · ", "ja": "回答エンジンの起動を待っています · "}
REMOVED = {
    "en": "removed from the queue: it will not be answered",
    "ja": "順番待ちから外しました：この質問には回答しません",
}
GREETED = {"en": ["queued · next up", "done"], "ja": ["順番待ち · 次に回答します", "完了"]}
NO_SITE = {  # the engine's own reason, after the terminal's label
    "en": "error: rescrape failed: no site configured on the engine: set ",
    "ja": "エラー：再読み込みに失敗しました：回答エンジンにサイトが設定されていません。",
}
LOCALES = pytest.mark.parametrize("locale", ["en", "ja"])


def _lines(output: bytes) -> list[str]:
    return [line for line in output.decode().splitlines() if line.strip()]


@LOCALES
async def test_the_chat_and_an_empty_question_speak_the_locale(
    settings: Settings, broker: Broker, locale: str
) -> None:
    """The banner, the prompt, the commands' answers; no engine is needed for them."""
    env = cli_env(settings, CONCIERGE_LOCALE=locale)
    process = await concierge("chat", env=env)
    _, stderr = await asyncio.wait_for(process.communicate(b"\n/nope\n/new\n"), 30)
    assert process.returncode == 0, stderr.decode()
    assert _lines(stderr) == CHAT[locale]
    process = await concierge("ask", "  ", env=env)
    _, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert (process.returncode, _lines(stderr)) == (2, [EMPTY[locale]])


@LOCALES
async def test_a_question_no_engine_takes_says_so_and_expires_in_the_locale(
    settings: Settings, broker: Broker, client: ConciergeClient, locale: str
) -> None:
    """The waiting line is the client's, the expiry its session's: both in the locale, and the
    request carries it for the engine."""
    tap = await WireTap.open(broker, "nobody")
    await client.ask(Ask("Already waiting?", "someone"))
    env = cli_env(settings, CONCIERGE_LOCALE=locale, CONCIERGE_REQUEST_TTL_S="2")
    process = await concierge("ask", "Hello?", env=env)
    _, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 1
    assert _lines(stderr) == NO_ENGINE[locale]
    assert (await tap.request_from(getpass.getuser())).locale == locale


@LOCALES
async def test_the_engine_answers_and_fails_a_rescrape_in_the_locale(
    engine: RunningEngine, settings: Settings, broker: Broker, locale: str
) -> None:
    """Small talk ends with the terminal's done line (the answer stays the engine's, in the
    question's language); a rescrape with no site fails with the engine's reason, in the
    locale the request carried."""
    env = cli_env(settings, CONCIERGE_LOCALE=locale)
    process = await concierge("ask", "hello", env=env)
    stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, stderr.decode()
    assert stdout.decode().startswith("Hello!")  # "hello" is English: so is its answer
    assert _lines(stderr) == GREETED[locale]
    process = await concierge("rescrape", env=env)
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 1, stderr.decode()
    assert _lines(stderr)[-1].startswith(NO_SITE[locale])


@LOCALES
async def test_at_a_terminal_the_waiting_line_and_ctrl_c_speak_the_locale(
    settings: Settings,
    broker: Broker,
    client: ConciergeClient,
    terminals: Callable[..., Terminal],  # noqa: F811  # the fixture imported above
    locale: str,
) -> None:
    """The spinner's label (wide characters on a terminal) and the line Ctrl+C leaves."""
    await client.ask(Ask("Already waiting?", "someone"))
    ask = terminals("ask", "Hello?", env=cli_env(settings, CONCIERGE_LOCALE=locale))
    await ask.shows(rf"{WAITING[locale]}\d+ ")
    await ask.shows(NO_ENGINE[locale][0][:12])
    ask.send("\x03")
    assert await ask.exit_code() == 130
    await ask.shows(REMOVED[locale])
    assert WAITING[locale] not in ask.text()  # the spinner went with its line
