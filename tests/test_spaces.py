"""The spaces file (config/spaces.py), pure: what it accepts, each problem as one line naming
CONCIERGE_SPACES_FILE, where each space's knowledge base goes, which space a place belongs to,
and the request's ``space`` on the wire (left out when it is the default)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from broker.protocol import ProtocolError, decode_request, encode, make_request
from config.errors import EXIT_CONFIG, EXIT_USAGE
from config.settings import ConfigError, Settings
from config.spaces import DEFAULT_SPACE, Platform, UnknownSpace, load_spaces, space_kb_path
from tests.cli_fixture import cli_env, concierge

TWO_SPACES = """
[spaces.alpha]
site_sitemap_url = "https://alpha.example/sitemap.xml"
system_prompt = "You are Alpha's helper."
greeting = "Hello from Alpha!"
bot_name = "Alpha"
locale = "ja"
admins = ["111", 222]

[spaces.alpha.places]
discord_guilds = [900000000000000001]
slack_channels = ["C0ALPHA"]
terminal = true

[spaces.beta]
site_dir = "beta-docs"
site_dir_url = "https://beta.example/docs"
system_prompt = "You are Beta's helper."

[spaces.beta.places]
discord_channels = ["700"]
slack_teams = ["T0BETA"]
"""

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "spaces.md"
# The worked example's places (the ids its spaces file comments on), and ones it names nowhere.
SHOP_GUILD, SUPPORT_CHANNEL = "1187712305623015000", "1187712305623015444"
DOCS_GUILD, SLACK_WORKSPACE = "1190000000000000001", "T0123ABCD"
STUDIO_GUILD = "1187700000000000001"  # the studio's own server: in no space, so default's
Place = tuple[Platform, str | None, str | None]  # as space_for_place takes it
# Each row of the guide's "where | space | knowledge base" table, as places to look up.
PLACES_OF_ROW: dict[str, list[Place]] = {
    "the shop's server, any channel": [
        ("discord", SHOP_GUILD, "1187712305623015001"),
        ("discord", SHOP_GUILD, "1187712305623015002"),
    ],
    "`#support` in the studio's server": [("discord", STUDIO_GUILD, SUPPORT_CHANNEL)],
    "any other channel of the studio's server, a DM": [
        ("discord", STUDIO_GUILD, "1187700000000000002"),
        ("discord", None, "1187700000000000003"),  # a DM is in no server
    ],
    "the docs team's server; the Slack workspace": [
        ("discord", DOCS_GUILD, "1190000000000000002"),
        ("slack", SLACK_WORKSPACE, "C0GENERAL1"),
        ("slack", SLACK_WORKSPACE, "D0DIRECT01"),  # a DM with the bot is in the workspace
    ],
    "`concierge ask`, `chat`, `rescrape` without `--space`": [("terminal", None, None)],
}


def settings_with(tmp_path: Path, text: str | None) -> Settings:
    path = None
    if text is not None:
        path = tmp_path / "spaces.toml"
        path.write_text(text)
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        kb_path=tmp_path / "concierge-kb.sqlite3",
        site_start_url=["https://default.example/"],
        system_prompt="You are the default helper.",
        spaces_file=path,
    )


def problem(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as raised:
        load_spaces(settings_with(tmp_path, text))
    message = str(raised.value)
    assert "\n" not in message
    assert raised.value.exit_code == EXIT_CONFIG
    assert message.startswith("invalid CONCIERGE_SPACES_FILE: "), message
    return message


def test_without_a_spaces_file_there_is_only_the_default_space_the_settings_themselves(
    tmp_path: Path,
) -> None:
    settings = settings_with(tmp_path, None)
    spaces = load_spaces(settings)
    assert spaces.names == [DEFAULT_SPACE]
    assert spaces.named(DEFAULT_SPACE).settings is settings
    assert spaces.space_for_place("discord", "1", "2") == DEFAULT_SPACE
    assert spaces.space_for_place("terminal") == DEFAULT_SPACE


def test_each_space_has_its_own_site_persona_locale_and_knowledge_base(tmp_path: Path) -> None:
    settings = settings_with(tmp_path, TWO_SPACES)
    spaces = load_spaces(settings)
    alpha, beta = spaces.named("alpha"), spaces.named("beta")
    assert spaces.names == ["default", "alpha", "beta"]

    assert alpha.settings.site_sitemap_url == "https://alpha.example/sitemap.xml"
    assert alpha.settings.site_start_url == []  # never the default space's site
    assert alpha.settings.system_prompt == "You are Alpha's helper."
    assert alpha.settings.locale == "ja"
    assert (alpha.greeting, alpha.bot_name) == ("Hello from Alpha!", "Alpha")
    assert alpha.admins == {"111", "222"}  # an id written as a number is kept as its digits
    assert alpha.settings.kb_path == tmp_path / "concierge-kb.alpha.sqlite3"

    assert beta.settings.site_dir == tmp_path / "beta-docs"  # beside the spaces file
    assert beta.settings.site_dir_url == "https://beta.example/docs"
    assert beta.settings.locale == settings.locale
    assert beta.greeting is None
    assert beta.settings.kb_path == tmp_path / "concierge-kb.beta.sqlite3"
    assert spaces.named(DEFAULT_SPACE).settings.kb_path == settings.kb_path


def worked_example(guide: str) -> tuple[str, list[list[str]]]:
    """The guide's worked example as it is written: the ```toml block after the line naming
    ``/srv/concierge/spaces.toml``, and the cells of each row of the table after it."""
    lines = guide.splitlines()
    named = next(n for n, line in enumerate(lines) if "/srv/concierge/spaces.toml" in line)
    opening = lines.index("```toml", named)
    closing = lines.index("```", opening + 1)
    header = next(n for n in range(closing, len(lines)) if lines[n].startswith("| where |"))
    rows = []
    for line in lines[header + 2 :]:  # past the header and its |---| line
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return "\n".join(lines[opening + 1 : closing]) + "\n", rows


def test_the_guide_worked_example_loads_and_serves_each_place_from_the_space_it_says(
    tmp_path: Path,
) -> None:
    """The example is what people copy: it must load as written, and its table must say
    where each question goes as ``space_for_place`` decides it."""
    spaces_file, rows = worked_example(GUIDE.read_text())
    settings = settings_with(tmp_path, spaces_file).model_copy(
        update={"site_start_url": ["https://studio.example/"]}  # the example's .env
    )
    spaces = load_spaces(settings)

    assert spaces.names == [DEFAULT_SPACE, "shop", "docs"]
    assert spaces.named("docs").settings.site_dir == tmp_path / "docs-checkout" / "docs"
    assert [row[0] for row in rows] == list(PLACES_OF_ROW)  # every row checked, none missed
    for where, space_cell, kb_cell in rows:
        named = re.match(r"`([a-z0-9-]+)`", space_cell)
        assert named is not None, space_cell
        space = named.group(1)
        for place in PLACES_OF_ROW[where]:
            assert spaces.space_for_place(*place) == space, (where, place)
        assert spaces.named(space).settings.kb_path.name == kb_cell.strip("`"), where


def test_a_space_knowledge_base_is_named_after_it_beside_the_settings_one() -> None:
    assert space_kb_path(Path("/data/concierge-kb.sqlite3"), "alpha") == Path(
        "/data/concierge-kb.alpha.sqlite3"
    )
    assert space_kb_path(Path("kb"), "beta") == Path("kb.beta")


def test_a_channel_beats_its_guild_and_an_unnamed_place_is_the_default_space(
    tmp_path: Path,
) -> None:
    spaces = load_spaces(settings_with(tmp_path, TWO_SPACES))
    guild = "900000000000000001"  # alpha's guild
    assert spaces.space_for_place("discord", guild, "123") == "alpha"
    assert spaces.space_for_place("discord", guild, "700") == "beta"  # beta's channel in it
    assert spaces.space_for_place("discord", "5", "700") == "beta"
    assert spaces.space_for_place("discord", "5", "6") == DEFAULT_SPACE
    assert spaces.space_for_place("discord", None, None) == DEFAULT_SPACE  # a DM
    assert spaces.space_for_place("slack", "T0BETA", "C0ALPHA") == "alpha"
    assert spaces.space_for_place("slack", "T0BETA", "C9") == "beta"
    assert spaces.space_for_place("slack", "T9", "C9") == DEFAULT_SPACE
    assert spaces.space_for_place("slack", None, "700") == DEFAULT_SPACE  # Discord's channel
    assert spaces.space_for_place("terminal") == "alpha"


def test_an_unknown_space_asked_by_name_is_a_usage_error_naming_the_spaces(
    tmp_path: Path,
) -> None:
    spaces = load_spaces(settings_with(tmp_path, TWO_SPACES))
    with pytest.raises(UnknownSpace) as raised:
        spaces.named("gamma")
    assert raised.value.exit_code == EXIT_USAGE
    assert str(raised.value) == (
        "unknown space 'gamma': the spaces are default, alpha, beta (CONCIERGE_SPACES_FILE)"
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[spaces.alpha\n", "is not TOML"),
        ("", "spaces: Field required"),
        ("[spaces]\n", "spaces: Dictionary should have at least 1 item"),
        (
            '[spaces.Alpha]\nsystem_prompt = "x"\nsite_urls = ["https://a.example/"]\n',
            "spaces.Alpha: a space's name is 1 to 32 lowercase letters, digits and dashes",
        ),
        (
            '[spaces.default]\nsystem_prompt = "x"\nsite_urls = ["https://a.example/"]\n',
            "spaces.default: the name 'default' is reserved",
        ),
        (
            '[spaces.alpha]\nsystem_prompt = "x"\nsite_urls = ["https://a.example/"]\ncolour = 1\n',
            "spaces.alpha.colour: Extra inputs are not permitted",
        ),
        ('[spaces.alpha]\nsite_urls = ["https://a.example/"]\n', "system_prompt: Field required"),
        ('[spaces.alpha]\nsystem_prompt = "x"\n', "spaces.alpha: no site: set one of"),
        (
            '[spaces.alpha]\nsystem_prompt = "x"\nsite_dir = "d"\nsite_dir_url = "ftp://d"\n',
            "spaces.alpha.site_dir_url: must start with http:// or https://",
        ),
        (
            '[spaces.alpha]\nsystem_prompt = "x"\nsite_dir = "d"\n'
            'site_sitemap_url = "https://a.example/s.xml"\n',
            "spaces.alpha.site_dir: a folder instead of a web site",
        ),
        (
            '[spaces.alpha]\nsystem_prompt = "x"\nsite_urls = ["https://a.example/"]\n'
            'locale = "fr"\n',
            "spaces.alpha.locale",
        ),
        (
            '[spaces.alpha]\nsystem_prompt = "x"\nsite_urls = ["https://a.example/"]\n'
            "[spaces.alpha.places]\nterminal = true\nslack = 1\n",
            "spaces.alpha.places.slack: Extra inputs are not permitted",
        ),
        (
            '[spaces.a]\nsystem_prompt = "x"\nsite_urls = ["https://a.example/"]\n'
            '[spaces.a.places]\ndiscord_channels = ["7"]\n'
            '[spaces.b]\nsystem_prompt = "y"\nsite_urls = ["https://b.example/"]\n'
            '[spaces.b.places]\ndiscord_channels = ["7"]\n',
            "discord_channels 7 is in both 'a' and 'b'",
        ),
        (
            '[spaces.a]\nsystem_prompt = "x"\nsite_urls = ["https://a.example/"]\n'
            "[spaces.a.places]\nterminal = true\n"
            '[spaces.b]\nsystem_prompt = "y"\nsite_urls = ["https://b.example/"]\n'
            "[spaces.b.places]\nterminal = true\n",
            "terminal is in both 'a' and 'b'",
        ),
    ],
)
def test_a_bad_spaces_file_is_one_line_naming_the_variable(
    tmp_path: Path, text: str, says: str
) -> None:
    assert says in problem(tmp_path, text)


def test_a_missing_spaces_file_is_named_with_its_path(tmp_path: Path) -> None:
    settings = settings_with(tmp_path, None).model_copy(
        update={"spaces_file": tmp_path / "nowhere.toml"}
    )
    with pytest.raises(ConfigError) as raised:
        load_spaces(settings)
    assert str(raised.value) == f"invalid CONCIERGE_SPACES_FILE: no file at {tmp_path}/nowhere.toml"


def test_the_request_names_its_space_and_leaves_the_default_out_of_the_body() -> None:
    plain = make_request(reply_to="bot", user_id="u", question="q", ttl_s=60)
    body = json.loads(encode(plain))
    assert "space" not in body  # byte for byte a request of before
    assert decode_request(encode(plain)).space == DEFAULT_SPACE

    alpha = make_request(reply_to="bot", user_id="u", question="q", ttl_s=60, space="alpha")
    assert json.loads(encode(alpha))["space"] == "alpha"
    assert decode_request(encode(alpha)) == alpha


@pytest.mark.parametrize("space", ["", "Alpha", "a b", "x" * 33, 7])
def test_a_space_that_is_no_name_makes_the_request_invalid(space: object) -> None:
    body = json.loads(encode(make_request(reply_to="bot", user_id="u", question="q", ttl_s=60)))
    with pytest.raises(ProtocolError) as raised:
        decode_request(json.dumps(body | {"space": space}).encode())
    assert raised.value.reason.startswith("invalid request: space:")


async def test_a_bad_spaces_file_stops_the_engine_before_it_loads_anything(
    tmp_path: Path,
) -> None:
    from engine.main import run_engine

    settings = settings_with(tmp_path, '[spaces.alpha]\nsystem_prompt = "x"\n')
    with pytest.raises(ConfigError, match=r"^invalid CONCIERGE_SPACES_FILE: spaces\.alpha: no"):
        await run_engine(settings, asyncio.Event())


async def test_the_command_ends_on_a_bad_file_or_an_unknown_space_with_one_line(
    tmp_path: Path,
) -> None:
    settings = settings_with(tmp_path, TWO_SPACES)
    env = cli_env(settings, CONCIERGE_SPACES_FILE=str(settings.spaces_file))
    process = await concierge("kb", "stats", "--space", "gamma", env=env)
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert (process.returncode, stderr.decode().count("\n")) == (EXIT_USAGE, 1)
    assert "unknown space 'gamma'" in stderr.decode()

    (tmp_path / "spaces.toml").write_text("[spaces.alpha]\nsystem_prompt = 1\n")
    process = await concierge("kb", "stats", "--space", "alpha", env=env)
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert (process.returncode, stderr.decode().count("\n")) == (EXIT_CONFIG, 1)
    assert stderr.decode().startswith("concierge: invalid CONCIERGE_SPACES_FILE: spaces.alpha.")
