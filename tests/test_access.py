"""``bots.access``: the allow-lists and admin lists, one reading for every platform."""

from __future__ import annotations

from bots.access import Access


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
