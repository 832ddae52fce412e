"""The history's pure pieces: fitting the newest turns, the follow-up's search text, and the
message order that lets llama.cpp reuse a conversation's earlier prompt."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from broker.protocol import HistoryTurn
from config.settings import Settings
from engine.answering.history import as_messages, fit_history, search_text
from engine.answering.prompt import PromptBuilder, chat_messages
from engine.backends.base import ChatMessage
from engine.knowledge.models import Passage


def turns(count: int) -> list[ChatMessage]:
    """user 0, assistant 1, user 2...: each turn's text says its place."""
    roles = ("user", "assistant")
    return [ChatMessage(roles[i % 2], f"turn {i} " + "x" * i) for i in range(count)]


def within(limit: int) -> tuple[list[int], Callable[[Sequence[ChatMessage]], bool]]:
    """A ``fits`` that allows ``limit`` characters of turns, and the sizes it was asked about."""
    asked: list[int] = []

    def fits(kept: Sequence[ChatMessage]) -> bool:
        asked.append(len(kept))
        return sum(len(turn.content) for turn in kept) <= limit

    return asked, fits


def test_every_turn_is_kept_when_all_fit() -> None:
    history = turns(6)
    _, fits = within(10_000)

    fitted = fit_history(history, fits)

    assert fitted.turns == tuple(history) and (fitted.used, fitted.dropped) == (6, 0)


@pytest.mark.parametrize("limit", [0, 7, 8, 50, 95, 96, 120])
def test_the_oldest_turns_go_first_and_what_is_kept_is_the_most_that_fits(limit: int) -> None:
    history = turns(10)  # turn i is len(f"turn {i} ") + i characters long
    _, fits = within(limit)

    fitted = fit_history(history, fits)

    kept = list(fitted.turns)
    assert kept == history[len(history) - len(kept) :]  # the newest, oldest first
    assert fitted.used + fitted.dropped == len(history)
    assert sum(len(turn.content) for turn in kept) <= limit
    if fitted.dropped:  # one more (older) turn would not fit
        one_more = history[fitted.dropped - 1 :]
        assert sum(len(turn.content) for turn in one_more) > limit


def test_fitting_counts_a_handful_of_prompts_not_one_per_turn() -> None:
    asked, fits = within(400)

    fit_history(turns(50), fits)

    assert len(asked) <= 6  # log2(50) rounded up


def test_no_turns_fit_when_the_prompt_alone_fills_the_room() -> None:
    fitted = fit_history(turns(4), lambda kept: not kept)

    assert fitted.turns == () and fitted.dropped == 4


def test_the_wire_turns_become_chat_messages_in_order() -> None:
    wire = (HistoryTurn(role="user", text="Hi"), HistoryTurn(role="assistant", text="Hello!"))

    assert as_messages(wire) == [ChatMessage("user", "Hi"), ChatMessage("assistant", "Hello!")]


def test_a_follow_up_is_searched_with_the_askers_last_turns_question_first() -> None:
    history = [
        ChatMessage("user", "Where is the museum?"),
        ChatMessage("assistant", "On the hill."),
        ChatMessage("user", "When does the ferry to Nishi island leave?"),
        ChatMessage("assistant", "At nine."),
    ]

    text = search_text("And how much is the ticket?", history)

    assert text.splitlines() == [
        "And how much is the ticket?",
        "When does the ferry to Nishi island leave?",
        "Where is the museum?",
    ]
    assert "nine" not in text  # the bot's answers are not searched
    assert search_text("Hello?", []) == "Hello?"


def test_a_follow_ups_search_leaves_out_turns_older_than_the_last_two_questions() -> None:
    history = [ChatMessage("user", f"question {i}") for i in range(5)]

    assert search_text("now?", history).splitlines() == ["now?", "question 4", "question 3"]


def test_each_turns_prompt_begins_with_the_last_turns_prompt_but_its_last_message() -> None:
    """What llama.cpp can reuse: everything before the last message stays the same from one
    turn to the next, the articles included in the question they came with."""
    system = "Be brief."
    first = chat_messages(system, "When does the ferry leave?", articles="[1] Ferry (u)\n9:00")
    answer = ChatMessage("assistant", "At nine.")
    history = [ChatMessage("user", "When does the ferry leave?"), answer]
    second = chat_messages(
        system, "How much is it?", articles="[1] Tickets (t)\n¥1200", history=history
    )
    third = chat_messages(
        system,
        "Is there a discount?",
        articles="[1] Tickets (t)\n¥600 for children",
        history=[
            *history,
            ChatMessage("user", "How much is it?"),
            ChatMessage("assistant", "¥1200"),
        ],
    )

    assert second[: len(first) - 1] == first[:-1] == [ChatMessage("system", system)]
    assert third[: len(second) - 1] == second[:-1]
    assert all("[1]" not in message.content for message in third[:-1])  # only the last has them


@pytest.mark.parametrize(
    ("shown", "read"),
    [
        (
            "Ferries leave at 9.\n\nFrom the site: \u201cThe ferry leaves at 9:00.\u201d",
            "Ferries leave at 9.\n\nThe ferry leaves at 9:00.",  # the quote, without its label
        ),
        ("サイトの記事より\uff1a「npm cache clean [<key>]」", "npm cache clean [<key>]"),
        (
            "The site does not cover this: none of its articles answers that question.\n\n"
            "The nearest sections I found, in case they help:\n- Ferry <https://x/ferry>",
            "The site does not cover this: none of its articles answers that question.",
        ),
        (
            "(My own answer is left out: it gave a number that is not on the site.)\n\n"
            "From the site: \u201cA session lasts 60 minutes.\u201d",
            "A session lasts 60 minutes.",
        ),
        ("Cows.\n\n(Cut here: the answer reached its limit of 256 tokens.)", "Cows."),
        # the model copied the label: the engine's quote is the last one
        ("From the site: \u201cX.\u201d It opens.\n\nFrom the site: \u201cY.\u201d", "Y."),
        (
            "I read From the site: \u201cx\u201d inline.",
            "I read From the site: \u201cx\u201d inline.",
        ),
        (
            "Hello! Ask me anything about the site's articles.",
            "Hello! Ask me anything about the site's articles.",
        ),
    ],
)
def test_the_model_reads_an_earlier_answer_without_the_engines_labels(
    shown: str, read: str
) -> None:
    """SmolLM2 copies the form of the turns it reads: after two Japanese quote-only answers an
    English one began with the Japanese label. The quote's text stays: given its own words
    alone, it repeated them as the next answer. The asker's turns are read as sent."""
    turns = [HistoryTurn(role="user", text=shown), HistoryTurn(role="assistant", text=shown)]
    assert as_messages(turns) == [ChatMessage("user", shown), ChatMessage("assistant", read)]


REFUSAL = (
    "The site does not cover this: none of its articles answers that question.\n\n"
    "The nearest sections I found, in case they help:\n- Helgrind <https://x.test/hg>"
)
REFUSED_AND_ANSWERED = [
    HistoryTurn(role="user", text="この質問は"),
    HistoryTurn(role="assistant", text="この質問の答えは、サイトの記事には載っていません。"),
    HistoryTurn(role="user", text="Is Memcheck the default tool?"),
    HistoryTurn(role="assistant", text="Yes."),
    HistoryTurn(role="user", text="Which tool finds two threads touching one variable?"),
    HistoryTurn(role="assistant", text=REFUSAL),
]


def characters(messages: Sequence[ChatMessage]) -> int:
    return sum(len(message.content) for message in messages)


def test_the_model_reads_no_exchange_the_site_did_not_cover() -> None:
    """SmolLM2 gave the engine's refusal of the question before as its own next answer, above
    the quote that answered the new one. The search still reads that question."""
    question, history = (
        "How do I see where leaks were allocated?",
        as_messages(REFUSED_AND_ANSWERED),
    )
    settings = Settings(_env_file=None)
    answered = chat_messages(settings.system_prompt, question, history=history[2:4])
    # room for the answered exchange, not for the refused ones as well
    tight = settings.model_copy(
        update={"context_size": settings.max_tokens + characters(answered) + 20}
    )

    messages, fitted = PromptBuilder(tight, characters).build(question, history)

    read = [(m.role, m.content) for m in messages[1:-1]]
    assert read == [("user", "Is Memcheck the default tool?"), ("assistant", "Yes.")]
    assert fitted.dropped == 0  # the refusals took no room
    assert "two threads" in search_text("And the other one?", history)


def test_a_history_of_refusals_leaves_the_articles_all_their_room() -> None:
    settings = Settings(_env_file=None)
    builder = PromptBuilder(settings, characters)
    refused = as_messages(REFUSED_AND_ANSWERED[4:])
    long = Passage("T", "https://x.test/t", "word " * 2000, 1.0)

    alone, _ = builder.build("Which tool?", [], [long])
    after_refusals, _ = builder.build("Which tool?", refused, [long])

    assert after_refusals == alone
