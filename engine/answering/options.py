"""Command-line options the model's words give that nothing it read gives: the default model
invents them.

Tried on npm's documentation, "What does npm dedupe do?" was answered "It uses the -Ddprun
option…", "How do I take a library out of my project again?" "use the `--uninstall-library`
command", and an answer on private packages listed "--no-preinstall", "--no-precreate" and
five more; none of them exists. Over the day's eval runs on the three real sites, every option
the model wrote that its passages did not hold was invented. A reader copies an option into a
terminal, so such words are left out as a wrong number is (numbers.py): the answer is the
site's quote and sources alone.

An option is a dash or two and a letter, at the start of a word ("--save-exact", "-g", a
compile-time define's "-DSQLITE_DEFAULT_FOREIGN_KEYS"; not the hyphens of "non-greedy" or a
path's "/usr/-x"), in prose and in code alike: an example's
options are claims about the tool. Its value ("=true") is not part of it. A setting the
reference names without its dashes ("save-exact") backs its long option ("--save-exact").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from engine.answering.needs import hyphenated_names

# Latin letters and digits only around it: Japanese may touch an option ("npmの-gオプション").
OPTION_RE = re.compile(
    r"(?<![A-Za-z0-9_./\\-])(--?[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*)(?![A-Za-z0-9_])"
)
NAME_RE = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+")


def unread_options(answer: str, read: Iterable[str], *, cut: bool = False) -> list[str]:
    """The options of ``answer`` that none of the texts in ``read`` holds, in order; ``cut``:
    the answer stopped at the token cap, maybe inside its last option ("--save-de")."""
    if cut:
        answer = re.sub(r"-[\w-]*\Z", "", answer.rstrip())
    texts = list(read)
    given = {option for text in texts for option in OPTION_RE.findall(text)}
    # A setting as a reference names it, without its dashes ("save-exact": npm documents its
    # settings so); a plain word ("force") is no setting.
    settings = {setting for text in texts for setting in hyphenated_names(text)}
    # An underscore option's name the texts give without its dashes is a name, not an option
    # claimed: "x = -max_size" after "max_size: the cache's limit".
    names = {name for text in texts for name in NAME_RE.findall(text)}
    said = dict.fromkeys(OPTION_RE.findall(answer))
    return [
        o
        for o in said
        if o not in given
        and o.removeprefix("--") not in settings
        and not ("_" in o and o.lstrip("-") in names)
    ]
