"""Yes/no questions ("Can I bring my dog?", "Is the museum open on Mondays?"), told apart from
the others so the default model is not asked to answer them.

Asked a yes/no question, SmolLM2-135M answers "No" to most of them whatever the article says,
contradicting the sentence quoted under its words ("The library card is not free. From the
site: “A library card is free for everyone…”"), far more often than it errs on questions that
ask what, when or how much (docs/quality.md, "Yes/no questions"). So the engine quotes the
article's sentence alone, as it does for a language the model does not write, unless
``CONCIERGE_MODEL_ANSWERS_YES_NO`` says the model can (a larger one).

The rule is English only: the question opens with an auxiliary verb ("is", "can", "do",
"isn't", ...) and has no question word among its first five words, so "Can you tell me when
the last ferry leaves?" still goes to the model. A question it misses is answered as before;
one it takes wrongly gets the quote alone, which still holds the answer.
"""

from __future__ import annotations

import re

AUXILIARIES = frozenset(
    "am is are was were do does did can could may might must shall should will would has have "
    "had isn't aren't wasn't weren't don't doesn't didn't can't couldn't won't wouldn't "
    "shouldn't mustn't hasn't haven't hadn't".split()
)
QUESTION_WORDS = frozenset("what when where which who whom whose why how".split())
OPENING = 5  # a question word this early makes it another kind of question
LEADS = frozenset("and so but then also ok okay well oh".split())  # "And is it free?"
# A sentence ends at a full stop, "!" or "?" before a space or the end: not inside a name or a
# number ("Is it better than calling process.exit()?", "Is Python 3.12 out?").
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[a-z]+(?:['\u2019][a-z]+)?")  # "isn't", "isn\u2019t"


def is_yes_no_question(text: str) -> bool:
    """Whether ``text`` (its last sentence that asks, if several) is an English question one
    answers with yes or no."""
    sentences = [sentence for sentence in _SENTENCE_END.split(text.strip()) if sentence]
    asking = [sentence for sentence in sentences if "?" in sentence] or sentences[-1:]
    if not asking:
        return False
    words = [word.replace("\u2019", "'") for word in _WORD.findall(asking[-1].lower())]
    while words and words[0] in LEADS:
        words.pop(0)
    # "Can you tell me when…" asks when; "Do I pay for a helmet when I rent…" asks yes or no.
    return bool(words) and words[0] in AUXILIARIES and not QUESTION_WORDS & set(words[:OPENING])
