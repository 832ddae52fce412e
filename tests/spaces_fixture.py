"""What the spaces tests of the Discord and Slack adapters share: a spaces file written for a
test, the spaces it names loaded as a bot process loads them, and a fake Discord that also
takes the bot's nickname (``PATCH /guilds/{id}/members/@me``), or refuses it where told.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from config.settings import Settings
from config.spaces import Spaces, load_spaces
from tests.fake_discord import FakeDiscord
from tests.fake_discord_wire import API, BOT_USER, _json, member_payload

SITE_AND_PROMPT = 'site_start_url = ["https://{name}.example/"]\nsystem_prompt = "You are {name}."'


def space_table(name: str, *, places: dict[str, list[Any]], **keys: Any) -> str:
    """One ``[spaces.NAME]`` table and its places, as a person writes it (ids as integers
    where Discord's are numbers, as TOML allows)."""
    lines = [f"[spaces.{name}]", SITE_AND_PROMPT.format(name=name)]
    lines += [f"{key} = {_toml(value)}" for key, value in keys.items()]
    lines.append(f"[spaces.{name}.places]")
    lines += [f"{kind} = {_toml(ids)}" for kind, ids in places.items()]
    return "\n".join(lines) + "\n"


def with_spaces(settings: Settings, folder: Path, *tables: str) -> tuple[Settings, Spaces]:
    """``settings`` naming a spaces file of ``tables`` (written in ``folder``), and the spaces
    loaded from it as ``run_discord`` and ``run_slack`` load them."""
    path = folder / "spaces.toml"
    path.write_text("\n".join(tables))
    named = settings.model_copy(update={"spaces_file": path})
    return named, load_spaces(named)


def _toml(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    return str(value) if isinstance(value, int) else f'"{value}"'


@dataclass
class NicknamedDiscord(FakeDiscord):
    """The fake Discord, also taking the bot's own nickname in a server; a server in
    ``refuse_nickname`` answers 403, as Discord does without Change Nickname."""

    refuse_nickname: set[int] = field(default_factory=set)

    def app(self) -> web.Application:
        app = super().app()
        app.router.add_patch(f"{API}/guilds/{{guild}}/members/@me", self._edit_me)
        return app

    def nicknames(self) -> dict[int, str]:
        """The nickname the bot set in each server (answered 200), by server id."""
        return {
            int(call.path.split("/")[2]): call.body["nick"]
            for call in self.calls
            if call.method == "PATCH" and call.path.endswith("/members/@me") and call.status == 200
        }

    async def _edit_me(self, request: web.Request) -> web.Response:
        if int(request.match_info["guild"]) in self.refuse_nickname:
            raise web.HTTPForbidden(reason="Missing Permissions")
        nick = (await request.json()).get("nick")
        return _json(member_payload(BOT_USER) | {"nick": nick})
