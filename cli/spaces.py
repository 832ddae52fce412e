"""Which space a terminal command works in: ``--space NAME``, else (for the terminal client)
the space whose places name the terminal, else ``default`` (config/spaces.py)."""

from __future__ import annotations

from config.settings import Settings
from config.spaces import DEFAULT_SPACE, Space, load_spaces


def terminal_space(settings: Settings, name: str | None) -> tuple[Settings, str]:
    """The terminal client's settings in the space (its locale) and the space's name; an
    unknown name is ``UnknownSpace`` (exit 2), a bad spaces file ``ConfigError`` (exit 78)."""
    spaces = load_spaces(settings)
    space = spaces.named(name or spaces.space_for_place("terminal"))
    return settings.model_copy(update={"locale": space.settings.locale}), space.name


def named_space(settings: Settings, name: str | None) -> Space:
    """The space ``kb`` reads: ``--space NAME``, else ``default``."""
    return load_spaces(settings).named(name or DEFAULT_SPACE)
