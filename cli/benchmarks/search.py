"""How long the knowledge base's search takes, question by question: ``python -m
cli.benchmarks.search KB.sqlite3 QUESTIONS.jsonl`` prints the passages searched and the
median and 95th percentile of a search (the question's vector included), after one
search that loads the encoder and the vectors."""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from engine.knowledge.store import KnowledgeBase

SEARCHED = 8  # as the answering pipeline asks


def main(kb_path: str, questions_path: str, rounds: int = 3) -> None:
    kb = KnowledgeBase(Path(kb_path))
    questions = [json.loads(line)["question"] for line in Path(questions_path).open()]
    kb.search(questions[0], SEARCHED)  # loads the encoder and the vectors
    times_ms: list[float] = []
    for _ in range(rounds):
        for question in questions:
            started = time.perf_counter()
            kb.search(question, SEARCHED)
            times_ms.append((time.perf_counter() - started) * 1000)
    times_ms.sort()
    p95 = times_ms[int(0.95 * (len(times_ms) - 1))]
    print(
        f"{kb.stats().passages} passages, {len(times_ms)} searches: "
        f"median {statistics.median(times_ms):.1f} ms, p95 {p95:.1f} ms"
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
