"""The prompt's label, echoed: dropped from the start of the answer.

The prompt names the quoted sentence ("The sentence that answers it: …",
``engine/answering/prompt.py``), which makes the default model restate that sentence and stop;
about one answer in eight on the real sites' evals (19 of 151, 2026-12-04) begins by copying
the label too: "The sentence that answers it: os.homedir() returns the string path…". The
asker should read the answer, not the engine's instructions. Only the answer's first pieces
are held back, while they may still be the label; after that every piece passes as it comes.

It also copies, about one answer in a hundred (6 of 698, 2026-12-05), a passage's header as
its first line ("1. Deploying your docs > GitHub Pages (http://…#404-pages)"): that line is
left out of the answer's final text, which replaces what streamed (it is not held back, so
every answer's first line still streams as it comes). And, more rarely (2 of 349 answers,
2026-12-05), it says its answer, then copies the label on a line of its own, with the quote
after it: the final text ends before that line (the engine adds the quote after the answer).
"""

from __future__ import annotations

import re

# A passage's header in the prompt ("[1] Title > Section (address)", ``passages.py``),
# copied as a line of its own, with its number, as a list's "1.", or bare.
COPIED_HEADER_RE = re.compile(
    r"[ \t]*(?:\[\d+\][ \t]*|\d+\.?[ \t]+)?[^\n]*\u203a[^\n]*\(https?://[^\s()]+\)[ \t]*(?:\n+|$)"
)


def without_copied_header(answer: str) -> str:
    """``answer`` less a first line that copies one of the prompt's passage headers."""
    found = COPIED_HEADER_RE.match(answer)
    return answer[found.end() :] if found else answer


def label_forms(label: str) -> list[str]:
    """How the model copies the prompt's ``label``, lowercase: as written, or made a sentence
    of ("The sentence that answers it is: …"); none for no label."""
    label = label.strip().lower()
    if not label:
        return []
    return [label, f"{label[:-1]} is:"] if label.endswith(":") else [label]


def label_line_at(answer: str, label: str) -> int | None:
    """Where a line of ``answer`` after its first begins with the prompt's ``label`` ("The
    sentence that answers it: npm prune removes…"); None when none does."""
    forms = label_forms(label)
    if not forms:
        return None
    found = re.search(rf"\n[ \t]*(?:{'|'.join(map(re.escape, forms))})", answer, re.I)
    return found.start() if found else None


class EchoedLabel:
    """Reads an answer's pieces; gives back what to pass on, less a copy of ``label`` it
    begins with."""

    def __init__(self, label: str) -> None:
        self.labels = label_forms(label)
        self.held: list[str] = []  # the answer's first pieces, held while they may be the label
        self.skipped = 0  # characters the answer began with that were the label, and spaces
        self.deciding = bool(self.labels)  # the beginning may still be the label (none: no)
        self.trimming = False  # the label was there: spaces after it are dropped too

    def feed(self, piece: str) -> list[str]:
        """The pieces to pass on now: none while the beginning may still be the label."""
        if not self.deciding:
            kept = self._after_label(piece) if self.trimming else piece
            return [kept] if kept else []
        self.held.append(piece)
        text = "".join(self.held)
        begun = text.lstrip()
        lowered = begun.lower()
        if copied := next((label for label in self.labels if lowered.startswith(label)), None):
            self.deciding, self.trimming, self.held = False, True, []
            self.skipped = len(text) - len(begun) + len(copied)
            kept = self._after_label(begun[len(copied) :])
            return [kept] if kept else []
        if any(label.startswith(lowered) for label in self.labels):
            return []  # "The sentence that" may still become the label
        return self.close()

    def close(self) -> list[str]:
        """The pieces still held, each as it came ("The sentence" alone was not the label);
        nothing is held after."""
        held, self.held, self.deciding = self.held, [], False
        return held

    def _after_label(self, piece: str) -> str:
        kept = piece.lstrip()
        self.skipped += len(piece) - len(kept)
        self.trimming = not kept
        return kept
