"""Registering the bot's slash commands: only its own, and only when their definition changed.

``CommandTree.sync`` overwrites all of an application's global commands at once, deleting any
that another tool registered on it, and Discord limits command creations (200 a day per
application). So the bot reads the commands registered, and upserts (``POST``: create, or
replace the one of that name) only each of its own that Discord does not have as defined.

Command texts are the catalogue's: a ``locale_str`` whose ``key`` names a text in
``config.texts`` gets that text's translations (Discord shows them to people whose client is
in that language).
"""

from __future__ import annotations

import logging
from typing import Any

import discord
from discord import app_commands

from config.texts import CATALOGUE, LOCALES

log = logging.getLogger(__name__)

# What Discord may answer in its own words: an absent list, a permission bit set as a string.
_DEFAULTS: dict[str, Any] = {
    "options": [],
    "nsfw": False,
    "name_localizations": {},
    "description_localizations": {},
}
_IGNORED = frozenset({"dm_permission"})  # deprecated for ``contexts``; Discord may omit it


async def register_commands(
    client: discord.Client, tree: app_commands.CommandTree[Any]
) -> list[str]:
    """Upsert each global command of ``tree`` that Discord lacks or has otherwise; returns
    their names. A refusal is logged: the bot answers mentions without its commands."""
    app_id = client.application_id
    if app_id is None:  # set by login, before setup_hook
        return []
    try:
        registered = await _registered_commands(client, app_id)
        theirs = {(command["name"], command.get("type", 1)): command for command in registered}
        changed = []
        for command in tree.get_commands():
            ours = await _definition(command, tree)
            if not same_definition(ours, theirs.get((ours["name"], ours["type"]))):
                await client.http.upsert_global_command(app_id, ours)  # type: ignore[arg-type]
                changed.append(ours["name"])
    except discord.HTTPException as error:
        log.warning("discord: could not register the slash commands: %s", error)
        return []
    if changed:
        log.info("discord: registered /%s", ", /".join(changed))
    return changed


async def _registered_commands(client: discord.Client, app_id: int) -> list[Any]:
    """The application's global commands, with their translations (left out by default)."""
    route = discord.http.Route(
        "GET", "/applications/{application_id}/commands", application_id=app_id
    )
    registered: list[Any] = await client.http.request(route, params={"with_localizations": "true"})
    return registered


async def _definition(command: Any, tree: app_commands.CommandTree[Any]) -> dict[str, Any]:
    """A command as Discord is sent it: with its translations when the tree has a translator."""
    translator = tree.translator
    if translator is None:
        return dict(command.to_dict(tree))
    return dict(await command.get_translated_payload(tree, translator))


class CatalogueTranslator(app_commands.Translator):
    """Command texts from the catalogue: a ``locale_str`` with a ``key`` extra, in each of
    our locales but English (the command's own text)."""

    async def translate(
        self,
        string: app_commands.locale_str,
        locale: discord.Locale,
        context: app_commands.TranslationContextTypes,
    ) -> str | None:
        key = string.extras.get("key")
        ours = locale.value.split("-")[0]
        if key not in CATALOGUE or ours == "en" or ours not in LOCALES:
            return None
        return CATALOGUE[key][ours]


def same_definition(ours: dict[str, Any], theirs: Any | None) -> bool:
    """Discord's ``theirs`` defines what ``ours`` does: every field we set (None: Discord's
    default) has the same value, our permissions (None: everyone) included."""
    if not isinstance(theirs, dict):
        return False
    found = _DEFAULTS | {key: value for key, value in theirs.items() if value is not None}
    for key, value in ours.items():
        if key in _IGNORED or (value is None and key != "default_member_permissions"):
            continue
        if key == "default_member_permissions":
            if (None if value is None else str(value)) != found.get(key):
                return False
        elif not _contains(found.get(key), value):
            return False
    return True


def _contains(found: object, wanted: object) -> bool:
    """``found`` says at least what ``wanted`` says (Discord adds fields of its own)."""
    if isinstance(wanted, dict):
        return isinstance(found, dict) and all(
            value is None or _contains(found.get(key), value) for key, value in wanted.items()
        )
    if isinstance(wanted, list):
        return (
            isinstance(found, list)
            and len(found) == len(wanted)
            and all(map(_contains, found, wanted))
        )
    return found == wanted
