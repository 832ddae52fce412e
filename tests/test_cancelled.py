"""``cancelled_sessions``: bounded in size, forgetful in time."""

from __future__ import annotations

from engine.cancelled import CancelledSessions


def test_membership_and_arrival_time() -> None:
    cancelled = CancelledSessions(max_size=10, ttl_s=60)
    cancelled.add("session-a")
    assert "session-a" in cancelled
    assert "session-b" not in cancelled
    assert cancelled.received_at("session-a") is not None


def test_the_size_stays_bounded_under_any_number_of_cancels() -> None:
    cancelled = CancelledSessions(max_size=1000, ttl_s=3600)
    for number in range(1_000_000):
        cancelled.add(f"session-{number}")
    assert len(cancelled) == 1000
    assert "session-999999" in cancelled
    assert "session-0" not in cancelled  # the oldest went first


def test_entries_expire() -> None:
    cancelled = CancelledSessions(max_size=10, ttl_s=0.0)
    cancelled.add("session-a")
    assert "session-a" not in cancelled
    assert len(cancelled) == 0


def test_a_repeated_cancel_keeps_its_first_arrival_time() -> None:
    cancelled = CancelledSessions(max_size=10, ttl_s=60)
    cancelled.add("session-a")
    first = cancelled.received_at("session-a")
    cancelled.add("session-a")
    assert cancelled.received_at("session-a") == first
