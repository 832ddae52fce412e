"""Spaces: several sites in one deployment, each with its own knowledge base and persona.

A TOML file (``CONCIERGE_SPACES_FILE``) names the spaces; each has its site source, its
persona (system prompt, a display name, a greeting), its admins, its locale and the places it
serves (docs/spaces.md). A request names its space on the wire (``Request.space``); a place no
space names, and every request without a space, belongs to ``default``: the settings
themselves. So a deployment without the file runs exactly as before.

``max_waiting`` caps the requests of one space a bot process holds open at once (waiting or
being answered), so that one busy server cannot fill the one FIFO queue for the others: a
space's own value, else the file's top-level one, which is also ``default``'s; unset, no cap.

Each space's settings are the deployment's with the space's own overlaid and validated by
``Settings`` itself, so a space's site is checked as ``CONCIERGE_SITE_*`` is. Its knowledge
base sits beside ``CONCIERGE_KB_PATH``, named after the space: one per space, never shared.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from config.errors import EXIT_USAGE, ConciergeError
from config.settings import WEB_SITE_FIELDS, ConfigError, Settings
from config.texts import Locale

DEFAULT_SPACE = "default"  # the settings themselves; what a request without a space asks
SPACE_NAME_PATTERN = r"^[a-z0-9-]{1,32}$"  # safe in a file name and on the wire
SpaceName = Annotated[str, Field(pattern=SPACE_NAME_PATTERN)]
# "sample" is the sample site's knowledge base (cli/sample_site.py: concierge-kb.sample.sqlite3).
RESERVED_NAMES = (DEFAULT_SPACE, "sample")
VARIABLE = "CONCIERGE_SPACES_FILE"
# The site source a space brings; any not given is unset (never the default space's).
SITE_FIELDS = (*WEB_SITE_FIELDS, "site_dir", "site_dir_url", "site_allowed_hosts")
Platform = Literal["discord", "slack", "terminal"]


def _id_text(value: object) -> object:
    """A Discord or Slack id written as a TOML integer is kept as its digits."""
    return str(value) if type(value) is int else value


PlaceId = Annotated[str, BeforeValidator(_id_text), Field(min_length=1, max_length=200)]
# A count as TOML writes it: "5" or 5.0 is a mistake to name, not to guess at.
MaxWaiting = Annotated[int, Field(ge=1, strict=True)]


class Places(BaseModel):
    """Where a space answers: guilds and channels by id, and whether the terminal is it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    discord_guilds: tuple[PlaceId, ...] = ()
    discord_channels: tuple[PlaceId, ...] = ()
    slack_teams: tuple[PlaceId, ...] = ()
    slack_channels: tuple[PlaceId, ...] = ()
    terminal: bool = False


class SpaceEntry(BaseModel):
    """One ``[spaces.NAME]`` table as written; ``Settings`` then checks its site."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    site_sitemap_url: str | None = None
    site_feed_url: str | None = None
    site_urls: list[str] = []
    site_start_url: list[str] = []
    site_dir: Path | None = None
    site_dir_url: str | None = None
    site_allowed_hosts: list[str] = []
    system_prompt: str = Field(min_length=1)
    bot_name: str | None = Field(None, min_length=1, max_length=100)
    greeting: str | None = Field(None, min_length=1, max_length=500)
    locale: Locale | None = None
    admins: tuple[PlaceId, ...] = ()
    max_waiting: MaxWaiting | None = None
    places: Places = Places()


class SpacesFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_waiting: MaxWaiting | None = None  # every space's that sets none, ``default``'s included
    spaces: dict[SpaceName, SpaceEntry] = Field(min_length=1)


@dataclass(frozen=True)
class Space:
    """A space as the engine and the bots use it: its settings overlaid on the deployment's."""

    name: str
    settings: Settings
    bot_name: str | None = None  # the persona's display name (Slack username, Discord nick)
    greeting: str | None = None  # the engine's answer to "hi" in this space
    admins: frozenset[str] = frozenset()  # who may /rescrape it (bots/access.py)
    places: Places = field(default_factory=Places)
    max_waiting: int | None = None  # its requests one bot process holds open; None: no cap


class UnknownSpace(ConciergeError):
    """A space asked for by name (``--space``) that no spaces file names."""

    exit_code = EXIT_USAGE


class Spaces:
    """Every space by name, ``default`` among them, and which one a place belongs to."""

    def __init__(
        self, default: Settings, named: Iterable[Space] = (), max_waiting: int | None = None
    ) -> None:
        self.default = Space(DEFAULT_SPACE, default, max_waiting=max_waiting)
        self._max_waiting = max_waiting  # the file's, for a name it does not have
        self._spaces = {DEFAULT_SPACE: self.default} | {space.name: space for space in named}
        self._places: dict[tuple[str, str], str] = {}  # (kind, id) -> space; checked unique
        self._terminal = DEFAULT_SPACE
        for space in self._spaces.values():
            self._note_places(space)

    @property
    def names(self) -> list[str]:
        return list(self._spaces)

    def get(self, name: str) -> Space | None:
        return self._spaces.get(name)

    def named(self, name: str) -> Space:
        """The space ``name``, or ``UnknownSpace`` naming the ones there are."""
        space = self._spaces.get(name)
        if space is None:
            known = ", ".join(self._spaces)
            raise UnknownSpace(f"unknown space {name!r}: the spaces are {known} ({VARIABLE})")
        return space

    def max_waiting(self, name: str) -> int | None:
        """The cap on ``name``'s open requests in one bot process; a name this file does not
        have gets the file's own (the engine refuses it anyway, but not before it waits)."""
        space = self._spaces.get(name)
        return space.max_waiting if space is not None else self._max_waiting

    def space_for_place(
        self, platform: Platform, guild_or_team: str | None = None, channel: str | None = None
    ) -> str:
        """The space serving a place: a channel named by a space beats its guild (or team)
        named by another; a place no space names is ``default``'s."""
        if platform == "terminal":
            return self._terminal
        group = "discord_guilds" if platform == "discord" else "slack_teams"
        for kind, place in ((f"{platform}_channels", channel), (group, guild_or_team)):
            if place is not None and (found := self._places.get((kind, place))):
                return found
        return DEFAULT_SPACE

    def _note_places(self, space: Space) -> None:
        places = space.places
        for kind in ("discord_guilds", "discord_channels", "slack_teams", "slack_channels"):
            for place in getattr(places, kind):
                owner = self._places.setdefault((kind, place), space.name)
                if owner != space.name:
                    raise _invalid(f"{kind} {place} is in both {owner!r} and {space.name!r}")
        if places.terminal:
            if self._terminal != DEFAULT_SPACE:
                raise _invalid(f"terminal is in both {self._terminal!r} and {space.name!r}")
            self._terminal = space.name


def load_spaces(settings: Settings) -> Spaces:
    """The spaces of ``CONCIERGE_SPACES_FILE``, or only ``default`` when it is unset; a file
    that is missing, not TOML or not valid is a one-line ``ConfigError`` naming it."""
    path = settings.spaces_file
    if path is None:
        return Spaces(settings)
    try:
        with path.open("rb") as file:
            document = tomllib.load(file)
    except FileNotFoundError:
        raise _invalid(f"no file at {path}") from None
    except OSError as error:
        raise _invalid(f"cannot read {path}: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise _invalid(f"{path} is not TOML: {error}") from None
    try:
        parsed = SpacesFile.model_validate(document)
    except ValidationError as error:
        raise _invalid(_problems(error)) from None
    base = path.resolve().parent  # a space's relative site_dir is read beside the file
    cap = parsed.max_waiting
    spaces = [_space(settings, name, entry, base, cap) for name, entry in parsed.spaces.items()]
    return Spaces(settings, spaces, max_waiting=cap)


def space_kb_path(kb_path: Path, name: str) -> Path:
    """``concierge-kb.sqlite3`` -> ``concierge-kb.<name>.sqlite3``, beside it."""
    return kb_path.with_name(f"{kb_path.stem}.{name}{kb_path.suffix}")


def _space(
    settings: Settings, name: str, entry: SpaceEntry, base: Path, max_waiting: int | None
) -> Space:
    """The space's settings: the deployment's, its site, persona, locale and knowledge base
    overlaid, validated as ``Settings`` validates the environment; its cap, else the file's."""
    if name in RESERVED_NAMES:
        raise _invalid(f"spaces.{name}: the name {name!r} is reserved")
    site = {name: getattr(entry, name) for name in SITE_FIELDS}
    if entry.site_dir is not None:
        site["site_dir"] = base / entry.site_dir
    if not any(site[name] for name in (*WEB_SITE_FIELDS, "site_dir")):
        fields = ", ".join((*WEB_SITE_FIELDS, "site_dir"))
        raise _invalid(f"spaces.{name}: no site: set one of {fields}")
    update = {
        **site,
        "system_prompt": entry.system_prompt,
        "locale": entry.locale or settings.locale,
        "kb_path": space_kb_path(settings.kb_path, name),
    }
    try:
        overlaid = Settings.model_validate({**settings.model_dump(), **update})
    except ValidationError as error:
        raise _invalid(_problems(error, f"spaces.{name}")) from None
    return Space(
        name,
        overlaid,
        bot_name=entry.bot_name,
        greeting=entry.greeting,
        admins=frozenset(entry.admins),
        places=entry.places,
        max_waiting=entry.max_waiting or max_waiting,
    )


def _invalid(problem: str) -> ConfigError:
    return ConfigError(f"invalid {VARIABLE}: {problem}")


def _problems(error: ValidationError, within: str = "") -> str:
    """pydantic's issues as ``spaces.alpha.site_dir_url: must start with ...``, on one line."""
    issues = []
    for issue in error.errors(include_url=False):
        where = ".".join(str(part) for part in (within, *issue["loc"]) if part != "")
        message = " ".join(issue["msg"].removeprefix("Value error, ").split())
        if where.endswith(".[key]") and issue["type"] == "string_pattern_mismatch":
            where = where.removesuffix(".[key]")  # a space's name: say what a name may be
            message = "a space's name is 1 to 32 lowercase letters, digits and dashes"
        issues.append(f"{where or 'the file'}: {message}")
    return "; ".join(issues)
