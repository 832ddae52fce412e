"""The prompt's label, echoed: dropped from the start of the answer.

The prompt names the quoted sentence ("The sentence that answers it: …",
``engine/answering/prompt.py``), which makes the default model restate that sentence and stop;
about one answer in eight on the real sites' evals (19 of 151, 2026-12-04) begins by copying
the label too: "The sentence that answers it: os.homedir() returns the string path…". The
asker should read the answer, not the engine's instructions. Only the answer's first pieces
are held back, while they may still be the label; after that every piece passes as it comes.
"""

from __future__ import annotations


class EchoedLabel:
    """Reads an answer's pieces; gives back what to pass on, less a copy of ``label`` it
    begins with."""

    def __init__(self, label: str) -> None:
        label = label.strip().lower()
        # as written, or made a sentence of: "The sentence that answers it is: …"
        self.labels = [label, f"{label[:-1]} is:"] if label.endswith(":") else [label]
        self.held: list[str] = []  # the answer's first pieces, held while they may be the label
        self.skipped = 0  # characters the answer began with that were the label, and spaces
        self.deciding = bool(label)  # the beginning may still be the label (none: no)
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
