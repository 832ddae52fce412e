"""What the end-to-end engine tests share."""

from __future__ import annotations


def shelves_question(items: int) -> str:
    """A prompt of about ten tokens per item: 150 take the model seconds to read on two cores."""
    shelves = " ".join(f"Item {n} is on shelf {n % 7}." for n in range(items))
    return shelves + " Which shelf holds item 42?"
