"""The web console against the real broker and engine: its event stream shows the queue move,
its actions need the token and come only from its own page, and it will not listen beyond
this machine without a token. (tests/test_console_browser.py drives the page itself.)"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import aiohttp
import pytest
from pydantic import SecretStr

from bots.ask import Ask
from bots.client import ConciergeClient
from broker.amqp import Broker
from broker.protocol import Cancel, Request, Started, TokenEvent
from cli.console import Console, check_bind
from cli.console.results import cancel_results
from cli.console.state import ConsoleState
from config.settings import ConfigError, Settings
from engine.backends.base import Backend
from tests.conftest import LONG_QUESTION, RunningEngine, start_engine
from tests.console_fixture import (
    TOKEN,
    StateStream,
    outcome_of,
    running,
    running_console,
    waiting,
)
from tests.helpers import collect, wait_for_tokens

AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def test_the_stream_shows_a_queued_request_and_how_each_ended(
    settings: Settings, long_engine: RunningEngine, client: ConciergeClient
) -> None:
    async with running_console(settings, long_engine) as console:
        stream = await StateStream().open(console.url)
        try:
            first = await client.ask(Ask(LONG_QUESTION, "u1"))
            await wait_for_tokens(first, 3)
            second = await client.ask(Ask("Say hello.", "u2"))

            state = await stream.until(lambda s: len(waiting(s)) == 1)
            row = waiting(state)[0]
            assert (row["session_id"], row["position"]) == (second.session_id, 1)
            assert (row["platform"], row["asker"], row["question"]) == ("test", "u2", "Say hello.")
            assert row["waited_s"] is not None
            state = await stream.until(lambda s: any(r["text"] for r in running(s)))
            assert running(state)[0]["session_id"] == first.session_id
            assert state["queue"]["workers"] == 1
            assert state["engine"]["reachable"] and state["engine"]["ok"]

            await client.cancel(first, "u1")
            state = await stream.until(lambda s: outcome_of(s, second.session_id) == "done")
            assert outcome_of(state, first.session_id) == "stopped"
            assert waiting(state) == [] and running(state) == []
            stopped = next(r for r in state["queue"]["outcomes"] if r["outcome"] == "stopped")
            assert stopped["detail"] == "by u1" and stopped["tokens"] >= 3
            await collect(first), await collect(second)
        finally:
            await stream.close()


async def test_stop_and_rescrape_need_the_token_and_the_console_s_own_page(
    settings: Settings,
    long_engine: RunningEngine,
    client: ConciergeClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    async with (
        running_console(settings, long_engine) as console,
        aiohttp.ClientSession() as http,
    ):
        answer = await client.ask(Ask(LONG_QUESTION, "u1"))
        await wait_for_tokens(answer, 2)
        stop = {"session_id": answer.session_id}
        foreign = {**AUTH, "Origin": "https://evil.example"}
        cross_site = {**AUTH, "Sec-Fetch-Site": "cross-site"}
        for path in ("api/stop", "api/rescrape", "api/demo/b/ask"):
            for headers, status in [
                ({}, 401),
                ({"Authorization": "Bearer wrong"}, 401),
                ({"Cookie": f"token={TOKEN}"}, 401),
                (foreign, 403),
                (cross_site, 403),
            ]:
                async with http.post(console.url + path, json=stop, headers=headers) as refused:
                    assert refused.status == status, (path, headers)
                    assert "error" in await refused.json()

        own_page = {**AUTH, "Origin": console.url.rstrip("/"), "Sec-Fetch-Site": "same-origin"}
        async with http.post(console.url + "api/stop", json=stop, headers=own_page) as response:
            assert response.status == 200
        events = await collect(answer)
        assert events[-1].type == "cancelled"
    assert TOKEN not in caplog.text
    assert f"stop of session {answer.session_id} sent as web-console" in caplog.text


async def test_a_rescrape_from_the_console_shows_its_progress(
    site_settings: Settings, backend: Backend, broker: Broker
) -> None:
    # Slow enough (a few seconds) that the page sees it run: the local site is read in 0.1 s.
    site_settings = site_settings.model_copy(update={"scrape_delay_s": 0.5})
    engine = await start_engine(site_settings, backend)
    try:
        async with (
            running_console(site_settings, engine) as console,
            aiohttp.ClientSession() as http,
        ):
            stream = await StateStream().open(console.url)
            try:
                async with http.post(console.url + "api/rescrape", headers=AUTH) as response:
                    assert response.status == 200
                    session_id = (await response.json())["session_id"]
                state = await stream.until(
                    lambda s: any(r["progress"] for r in running(s) if r["kind"] == "rescrape")
                )
                row = next(r for r in running(state) if r["session_id"] == session_id)
                assert row["asker"] == "web-console" and row["platform"] == "web"
                state = await stream.until(lambda s: outcome_of(s, session_id) == "done")
                state = await stream.until(lambda s: (s["kb"] or {}).get("articles", 0) > 0)
                assert state["kb"]["source"] == "engine" and state["kb"]["last_rescrape"]
            finally:
                await stream.close()
    finally:
        await engine.stop()


async def test_without_a_token_actions_are_off_and_only_local_names_are_answered(
    settings: Settings, engine: RunningEngine
) -> None:
    async with (
        running_console(settings, engine, token=None) as console,
        aiohttp.ClientSession() as http,
    ):
        async with http.post(console.url + "api/rescrape", headers=AUTH) as response:
            assert response.status == 403
            assert "CONCIERGE_WEB_TOKEN" in (await response.json())["error"]
        # a site whose name was pointed at 127.0.0.1 (DNS rebinding) reads nothing
        rebound = {"Host": f"evil.example:{console.port}"}
        for path in ("", "api/events", "api/bench/cancel"):
            async with http.get(console.url + path, headers=rebound) as response:
                assert response.status == 403, path
        async with http.get(f"http://localhost:{console.port}/api/bench/cancel") as response:
            assert response.status == 200


def test_it_refuses_to_listen_beyond_this_machine_without_a_token(settings: Settings) -> None:
    for host in ("0.0.0.0", "192.0.2.10", "::", "console.example"):
        with pytest.raises(ConfigError) as refused:
            Console(settings.model_copy(update={"web_host": host}))
        message = str(refused.value)
        assert "CONCIERGE_WEB_HOST" in message and "CONCIERGE_WEB_TOKEN" in message
        assert "\n" not in message
    for host in ("127.0.0.1", "::1", "localhost"):
        check_bind(settings.model_copy(update={"web_host": host}))
    check_bind(settings.model_copy(update={"web_host": "0.0.0.0", "web_token": SecretStr("t")}))


async def test_beyond_this_machine_reading_needs_the_token_too(
    settings: Settings, engine: RunningEngine
) -> None:
    wide = settings.model_copy(update={"web_host": "0.0.0.0"})
    async with running_console(wide, engine) as console, aiohttp.ClientSession() as http:
        url = f"http://127.0.0.1:{console.port}/"
        async with http.get(url + "api/events") as refused:
            assert refused.status == 401
        stream = await StateStream().open(url, headers=AUTH)
        await stream.close()


# --- the state alone ----------------------------------------------------------------------


def _request(session_id: str, user: str, sent_at: float = 100.0) -> Request:
    return Request(
        session_id=session_id,
        reply_to="bot-1",
        user_id=user,
        question="q?",
        sent_at=sent_at,
        deadline=sent_at + 300,
        platform="discord",
    )


def test_requests_queued_before_the_console_are_a_count_at_the_head() -> None:
    state = ConsoleState(stale_after_s=2.0)
    state.on_count(messages=3, consumers=1, now=100.0)  # three the console never saw
    state.on_request(_request("session-0004", "d"))
    state.on_count(messages=4, consumers=1, now=101.0)
    assert [r["position"] for r in state.snapshot(101.0)["waiting"]] == [4]
    state.on_count(messages=2, consumers=1, now=102.0)  # two left: the unseen ones, first
    state.on_count(messages=2, consumers=1, now=103.0)
    assert state.snapshot(103.0)["waiting"][0]["position"] == 4  # the delay is not over yet
    state.on_count(messages=2, consumers=1, now=104.5)
    snapshot = state.snapshot(104.5)
    assert snapshot["unknown_before"] == 1 and snapshot["waiting"][0]["position"] == 2


def test_any_event_moves_a_request_out_of_the_queue() -> None:
    state = ConsoleState()
    state.on_request(_request("session-0001", "a"))
    state.on_cancel(Cancel(session_id="session-0001", sent_at=101.0, user_id="web-console"))
    assert state.snapshot(102.0)["waiting"][0]["stop_by"] == "web-console"
    # its ``started`` went by before the console started: a token still moves it
    state.on_event(TokenEvent(session_id="session-0001", seq=1, text="Hi", tokens=1), 103.0)
    snapshot = state.snapshot(103.0)
    assert snapshot["waiting"] == [] and snapshot["running"][0]["text"] == "Hi"
    # an answer under way before the console started: known from its context
    context = {"user": "u9", "kind": "ask"}
    state.on_event(Started(session_id="session-0002", seq=0, waited_s=0.1, context=context), 104)
    assert state.snapshot(104.0)["running"][1]["asker"] == "u9"


def test_a_request_set_aside_past_its_delivery_limit_is_failed_not_expired() -> None:
    """Both come from the request queue's dead letters; the x-death reason tells them apart,
    and one that was being answered leaves the running list too."""
    state = ConsoleState()
    state.on_request(_request("session-0001", "a"))
    state.on_request(_request("session-0002", "b"))
    state.on_event(Started(session_id="session-0002", seq=0, waited_s=0.1), 101.0)
    state.on_expired(_request("session-0001", "a"), 102.0)
    state.on_expired(_request("session-0002", "b"), 103.0, set_aside=True)
    snapshot = state.snapshot(104.0)
    assert snapshot["waiting"] == [] and snapshot["running"] == []
    ends = {row["session_id"]: row for row in snapshot["outcomes"]}
    assert ends["session-0001"]["outcome"] == "expired"
    assert ends["session-0002"]["outcome"] == "failed"
    assert ends["session-0002"]["detail"].startswith("set aside")


def test_the_chart_reads_the_benchmark_s_document_or_shows_the_published_figures(
    tmp_path: Path,
) -> None:
    published = cancel_results(tmp_path / "none.json")
    assert "docs/benchmarks.md" in published["source"] and "note" in published
    assert {row["mode"] for row in published["rows"]} == {"fifo", "cancel_queue"}
    stats = {"median": 0.5, "p95": 0.6, "min": 0.4, "max": 0.6, "n": 2}
    row = {"runs": 2, "stop_s": stats, "tokens_after_cancel": stats, "cancel_seen_s": stats}
    doc = {
        "benchmark": "cancel",
        "started_at": "2026-12-01T10:00:00Z",
        "config": {"phase": "decode"},
        "summary": [{"mode": "fifo", "depth": 5, **row}],
    }
    (tmp_path / "cancel.json").write_text(json.dumps(doc))
    chart = cancel_results(tmp_path / "cancel.json")
    assert chart["rows"] == [
        {
            "mode": "fifo",
            "depth": 5,
            "runs": 2,
            "stop_s": 0.5,
            "stop_p95_s": 0.6,
            "seen_s": 0.5,
            "tokens_after": 0.5,
        }
    ]
