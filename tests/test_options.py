"""A command-line option the model's words give that nothing it read gives leaves its words out
of the answer (engine/answering/options.py), as a wrong number does: the quote stands alone."""

from __future__ import annotations

from broker.amqp import Broker
from broker.answer_text import without_sources
from broker.protocol import TokenEvent
from config.settings import Settings
from engine.answering.history import model_words
from engine.answering.options import unread_options
from engine.answering.wording import WORDING
from engine.backends.base import Backend
from tests.test_numbers import ferry_answer

READ = "Use --save-exact to save an exact version. Run python -m pip install -r requirements.txt."


def test_an_option_nothing_read_gives_is_found() -> None:
    """The options SmolLM2 wrote on npm's documentation, none of which npm has."""
    answer = "It uses the -Ddprun option, or `--uninstall-library`; then `npm -f no-deps`."
    assert unread_options(answer, [READ]) == ["-Ddprun", "--uninstall-library", "-f"]


def test_options_it_read_and_hyphenated_words_are_not_claims() -> None:
    answer = (
        "Pass --save-exact=true: a non-greedy, well-known way. In a shell:\n"
        "```\npython -m pip install -r requirements.txt\n```\nSee /usr/lib/x-y and e-mail."
    )
    assert unread_options(answer, [READ]) == []
    assert unread_options("Add -v.", [READ]) == ["-v"]
    assert unread_options("Add -V.", ["add -v"]) == ["-V"]  # -V is not -v
    # npm documents its settings without dashes: "save-exact" backs "--save-exact" (review)
    setting = "save-exact\nDefault: false\nDependencies saved will have an exact version."
    assert unread_options("Run npm install --save-exact.", [setting]) == []
    assert unread_options("Run npm install --exact --force.", ["exact force"]) == [
        "--exact",
        "--force",
    ]


def test_an_option_may_hold_underscores() -> None:
    """A compile-time define (SQLite's FAQ: "-DSQLITE_DEFAULT_FOREIGN_KEYS=1") or a
    snake-case flag is an option too: SmolLM2 wrote "--DSQLITE_DEFAULT_FORERKNS=0" from it,
    which passed as prose."""
    read = ["compile with -DSQLITE_DEFAULT_FOREIGN_KEYS=1 to turn them on"]
    answer = (
        "Use -DSQLITE_DEFAULT_FOREIGN_KEYS=1, or set --DSQLITE_DEFAULT_FORERKNS=0 or --dry_run."
    )
    assert unread_options(answer, read) == ["--DSQLITE_DEFAULT_FORERKNS", "--dry_run"]
    assert unread_options("in my_module-name and __init__-x", read) == []
    # a name the texts give is no option; an italic's underscore ends none (review)
    assert unread_options("Then x = -max_size.", ["max_size: the limit"]) == []
    assert unread_options("Install it _globally with -g_.", ["npm install -g"]) == []
    assert unread_options("npmの-g_オプション", ["npm install -g"]) == []


async def test_the_models_words_with_an_invented_option_are_left_out_for_the_quote(
    settings: Settings, backend: Backend, broker: Broker
) -> None:
    pieces = ["The last ferry leaves at 16:50. ", "Run `ferry --tonight` to check."]
    done, events = await ferry_answer(settings, backend, pieces)

    streamed = "".join(e.text for e in events if isinstance(e, TokenEvent))
    assert "--tonight" in streamed  # the asker saw it stream; the final text replaces it
    assert done.text.startswith(WORDING["en"].withdrawn_option + "\n\n")
    assert "--tonight" not in done.text and "16:50" in done.text  # the quote's
    assert "ferry-timetable.html" in done.text
    read_again = model_words(without_sources(done.text))  # as a follow-up's history
    assert "16:50" in read_again and WORDING["en"].withdrawn_option not in read_again
