"""``bots.access``: the allow-lists and admin lists, one reading for every platform, and who
may ``/rescrape`` which space."""

from __future__ import annotations

import pytest

from bots.access import Access
from config.settings import Settings
from config.spaces import DEFAULT_SPACE, Space, Spaces


def test_empty_lists_allow_everywhere_and_make_nobody_an_admin() -> None:
    anyone = Access()
    assert anyone.allows_guild(None) and anyone.allows_guild("G1")
    assert anyone.allows_channel("C1") and anyone.allows_channel()
    assert not anyone.is_admin("U1", ["R1"])


def test_a_listed_guild_and_channel_or_a_thread_of_it_are_allowed() -> None:
    listed = Access(allowed_guild_ids=frozenset({"G1"}), allowed_channel_ids=frozenset({"C1"}))
    assert listed.allows_guild("G1") and not listed.allows_guild("G2")
    assert not listed.allows_guild(None)  # a DM is in no guild
    assert listed.allows_channel("T9", "C1")  # a thread, by its parent
    assert not listed.allows_channel("C2") and not listed.allows_channel()


def test_an_admin_is_listed_by_user_or_role_or_made_one_by_the_platform() -> None:
    lists = Access(admin_user_ids=frozenset({"U1"}), admin_role_ids=frozenset({"R1"}))
    assert lists.is_admin("U1")
    assert lists.is_admin("U2", ["R0", "R1"])
    assert lists.is_admin("U3", platform_admin=True)
    assert not lists.is_admin("U2", ["R0"])


# --- who may /rescrape which space (docs/spaces.md) ------------------------------------------

DEPLOYMENT_ADMIN, DEPLOYMENT_ROLE = "U0DEPLOYA", "R0DEPLOYA"  # the settings' admin lists
SHOP_ADMIN, SHOP_ROLE, DOCS_ADMIN = "U0SHOPADM", "R0SHOPADM", "U0DOCSADM"  # the spaces' own
STRANGER = "U0STRANGE"


def shop_and_docs() -> Access:
    """Access with the deployment's admins and two spaces, each with admins of its own (a
    Discord role among the shop's, as one ``admins`` list holds users and roles)."""
    settings = Settings(_env_file=None)
    spaces = Spaces(
        settings,
        [
            Space("shop", settings, admins=frozenset({SHOP_ADMIN, SHOP_ROLE})),
            Space("docs", settings, admins=frozenset({DOCS_ADMIN})),
        ],
    )
    return Access(
        admin_user_ids=frozenset({DEPLOYMENT_ADMIN}),
        admin_role_ids=frozenset({DEPLOYMENT_ROLE}),
        spaces=spaces,
    )


@pytest.mark.parametrize("space", [DEFAULT_SPACE, "shop", "docs"])
def test_the_deployment_admins_may_rescrape_every_space(space: str) -> None:
    """A space's admins add to the deployment's, never replace them."""
    access = shop_and_docs()
    assert access.may_rescrape(space, DEPLOYMENT_ADMIN)
    assert access.may_rescrape(space, STRANGER, [DEPLOYMENT_ROLE])
    assert access.may_rescrape(space, STRANGER, platform_admin=True)  # Manage Server, Slack's


def test_a_space_admin_may_rescrape_that_space_and_no_other() -> None:
    access = shop_and_docs()
    assert access.may_rescrape("shop", SHOP_ADMIN)
    assert access.may_rescrape("docs", DOCS_ADMIN)
    for space in (DEFAULT_SPACE, "docs", "gamma"):  # gamma: a name no file has
        assert not access.may_rescrape(space, SHOP_ADMIN), space
    assert not access.may_rescrape("shop", DOCS_ADMIN)
    assert not access.is_admin(SHOP_ADMIN)  # nor may they stop anyone's answer


def test_a_space_admin_role_counts_in_that_space_even_given_as_an_iterator() -> None:
    """The roles are read twice (the deployment's roles, then the space's): an iterator
    Discord hands over must not be used up by the first reading."""
    access = shop_and_docs()
    assert access.may_rescrape("shop", STRANGER, iter(["R0OTHER", SHOP_ROLE]))
    assert not access.may_rescrape("docs", STRANGER, iter([SHOP_ROLE]))


def test_nobody_else_may_rescrape_anywhere() -> None:
    access = shop_and_docs()
    for space in (DEFAULT_SPACE, "shop", "docs"):
        assert not access.may_rescrape(space, STRANGER, ["R0OTHER"]), space


def test_without_spaces_only_the_deployment_admins_may_rescrape() -> None:
    access = Access(admin_user_ids=frozenset({DEPLOYMENT_ADMIN}))
    assert access.may_rescrape(DEFAULT_SPACE, DEPLOYMENT_ADMIN)
    assert access.may_rescrape(DEFAULT_SPACE, STRANGER, platform_admin=True)
    assert not access.may_rescrape(DEFAULT_SPACE, STRANGER)
    assert not access.may_rescrape("shop", SHOP_ADMIN)  # a space no file names has no admins
