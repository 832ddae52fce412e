"""The quote on real documentation (eval/realdocs): an API entry's sentence names what it
describes, a sentence announcing an example brings the example, one pointing back ("this
function") brings the one before it, and a glossary term is quoted by its definition."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from engine.answering.evidence import entries_named, find_evidence
from engine.answering.on_site import on_site_passages
from engine.knowledge.embedding import shared_embedder
from engine.knowledge.models import Passage
from engine.knowledge.scrape.sections import page_sections

SITE = Path(__file__).resolve().parent.parent / "eval" / "realdocs" / "site"
NPM_PAGE = Path(__file__).resolve().parent.parent / "eval/npmdocs/site/commands/npm-install.html"
NPM_CACHE_PAGE = (
    Path(__file__).resolve().parent.parent / "eval/npmdocs/site/commands/npm-cache.html"
)
NODE_TIMERS_PAGE = Path(__file__).resolve().parent.parent / "eval/nodedocs/site/timers.html"
NODE_OS_PAGE = Path(__file__).resolve().parent.parent / "eval/nodedocs/site/os.html"
VALGRIND_PAGE = Path(__file__).resolve().parent.parent / "eval/valgrinddocs/site/manual-core.html"


def section_passage(path: str, heading_ends: str) -> Passage:
    """The section of a real page whose heading path ends with ``heading_ends``."""
    return section_passage_of(SITE / path, heading_ends)


def section_passage_of(file: Path, heading_ends: str) -> Passage:
    page = page_sections(file.read_bytes())
    assert page is not None
    section = next(s for s in page.sections if s.heading.endswith(heading_ends))
    url = f"http://docs.example/{file.name}"
    return Passage(page.title, url, section.text, heading=section.heading, anchor=section.anchor)


def entry_passages(file: Path, *anchors: str) -> list[Passage]:
    """The sections of a real page with these anchors, in this order, as search results."""
    page = page_sections(file.read_bytes())
    assert page is not None
    by_anchor = {s.anchor: s for s in page.sections}
    url = f"http://docs.example/{file.name}"
    return [
        Passage(page.title, url, s.text, heading=s.heading, anchor=s.anchor)
        for s in (by_anchor[anchor] for anchor in anchors)
    ]


def test_a_quote_from_an_api_entry_starts_with_its_signature() -> None:
    entry = section_passage("library/shutil.html", "shutil.rmtree()")

    evidence = find_evidence("Which shutil function deletes an entire directory tree?", [entry])

    assert evidence is not None
    assert evidence.quote.startswith("shutil.rmtree(path, ignore_errors=False")
    assert "Delete an entire directory tree" in evidence.quote


def test_a_quote_from_an_ordinary_section_is_its_sentence_alone() -> None:
    section = section_passage("howto/regex.html", "Greedy versus Non-Greedy")

    evidence = find_evidence("What are the non-greedy quantifiers of regular expressions?",
                             [section])  # fmt: skip

    assert evidence is not None
    assert evidence.quote.startswith("In this case, the solution is to use the non-greedy")


def test_a_sentence_announcing_an_example_brings_the_example() -> None:
    section = section_passage("tutorial/inputoutput.html", "Formatted String Literals")
    question = "In an f-string, how do I print pi rounded to three places after the decimal point?"

    evidence = find_evidence(question, [section])

    assert evidence is not None
    assert evidence.quote.startswith("The following example rounds pi to three places")
    assert "{math.pi:.3f}" in evidence.quote


def test_a_line_typed_at_a_prompt_yields_to_the_sentence_that_says_what_it_is_for() -> None:
    """ "(tutorial-env) $ python -m pip install -r requirements.txt" meets "installed" and
    "requirements.txt" as a command; the sentence announcing the freeze example says how to
    save the list."""
    found = [
        section_passage("tutorial/venv.html", "Managing Packages with pip"),
        section_passage("tutorial/venv.html", "Creating Virtual Environments"),
    ]
    question = (
        "How do I save the list of packages installed in my virtual environment to "
        "requirements.txt?"
    )

    evidence = find_evidence(question, found)

    assert evidence is not None
    assert "pip freeze > requirements.txt" in evidence.quote
    assert "install -r" not in evidence.quote


def test_a_glossary_entry_is_quoted_by_what_it_says_not_by_its_name_alone() -> None:
    entry = section_passage("glossary.html", "EAFP")  # "EAFP" on its own line, then its text

    evidence = find_evidence("What does EAFP stand for?", [entry])

    assert evidence is not None
    assert evidence.quote.startswith("EAFP — Easier to ask for forgiveness than permission.")


def test_a_sentence_pointing_back_to_this_function_brings_the_one_naming_it() -> None:
    section = section_passage("howto/annotations.html", "In Python 3.10 And Newer")
    question = "What is the best practice for accessing the annotations dict in Python 3.10?"

    evidence = find_evidence(question, [section])

    assert evidence is not None
    assert evidence.quote.startswith("Python 3.10 adds a new function to the standard library: ")
    assert "inspect.get_annotations()" in evidence.quote
    assert "calling this function is the best practice" in evidence.quote


def test_a_sentence_pointing_back_to_the_quote_carries_it_on() -> None:
    """Seen in `concierge chat`: "How do I get the number of CPUs?" was quoted the warning
    alone, and the model wrote that os.cpus() is "only available on Windows"."""
    found = entry_passages(NODE_OS_PAGE, "oscpus")

    evidence = find_evidence("How do I get the number of CPUs?", found)

    assert evidence is not None
    assert evidence.quote.startswith("os.cpus().length should not be used to calculate")
    assert evidence.quote.endswith("Use os.availableParallelism() for this purpose.")


def test_a_function_called_by_name_is_quoted_from_its_own_entry() -> None:
    """The note on ``tempfile.tempdir`` meets every word of the question too ("the global
    default return type of mkstemp() and mkdtemp() changes"): the entry of mkdtemp answers."""
    note = section_passage("library/tempfile.html", "tempfile.tempdir")
    entry = section_passage("library/tempfile.html", "tempfile.mkdtemp()")

    evidence = find_evidence("What does tempfile.mkdtemp() return?", [note, entry])

    assert evidence is not None
    assert evidence.quote.startswith("tempfile.mkdtemp(suffix=None, prefix=None, dir=None)")
    assert "returns the absolute pathname of the new directory" in evidence.quote


def test_a_name_given_alone_is_the_entry_of_that_name_not_a_method_ending_with_it() -> None:
    """Node.js's timers page has the global setTimeout() and timersPromises.setTimeout():
    "setTimeout()" names the first (seen in `concierge chat`: a question on its delay was
    quoted the promises example's "setTimeout(100, 'result')")."""
    found = entry_passages(
        NODE_TIMERS_PAGE,
        "timerspromisessettimeoutdelay-value-options",
        "settimeoutcallback-delay-args",
    )

    assert entries_named("What does setTimeout() return?", found) == {1}
    assert entries_named("What does timersPromises.setTimeout() return?", found) == {0}


def test_a_figure_is_quoted_from_a_sentence_not_from_an_examples_argument() -> None:
    """ "setTimeout の遅延の最大値はいくつですか" (setTimeout's longest delay): the promises
    example's "setTimeout(100, 'result').then((res) => {" holds a number too."""
    found = entry_passages(
        NODE_TIMERS_PAGE,
        "timerspromisessettimeoutdelay-value-options",
        "settimeoutcallback-delay-args",
    )

    evidence = find_evidence("setTimeout の遅延の最大値はいくつですか\uff1f", found)

    assert evidence is not None and "2147483647" in evidence.quote


def test_a_setting_named_with_its_hyphens_is_quoted_from_its_own_entry() -> None:
    """npm's settings: "global-style" says "Default: false" and names install-strategy too, so
    its sentences meet the question as well as the entry asked about; the name decides (seen
    on npm's config page: fetch-timeout's default was quoted from fetch-retry-maxtimeout)."""
    passages = entry_passages(NPM_PAGE, "global-style", "legacy-bundling", "install-strategy")

    evidence = find_evidence("What is the default of install-strategy?", passages)

    assert evidence is not None
    assert evidence.quote.startswith("install-strategy — ")
    assert "hoisted" in evidence.quote


def test_a_japanese_question_naming_a_setting_is_answered_from_its_entry() -> None:
    """ "fetch-timeout の既定値は" was refused on npm's config page: across languages its meaning
    is far from the entry's "Default: 300000 (5 minutes)", and none of the entry's sentences
    holds its words. Naming the entry is enough; its opening is the quote, with its name."""
    page = page_sections(NPM_PAGE.read_bytes())
    assert page is not None
    url = "http://docs.example/commands/npm-install.html"
    by_anchor = {s.anchor: s for s in page.sections}
    found = [
        Passage(page.title, url, s.text, heading=s.heading, anchor=s.anchor, similarity=cosine)
        for s, cosine in (
            (by_anchor["install-strategy"], 0.36),
            (by_anchor["bin-links"], 0.3),
        )
    ]
    question = "bin-links の既定値はいくつですか\uff1f"

    used = on_site_passages(question, found)
    evidence = find_evidence(question, used)

    assert [p.anchor for p in used] == ["bin-links", "install-strategy"]
    assert evidence is not None and evidence.quote == "bin-links — Default: true"
    assert on_site_passages("インストールの方法の既定値はいくつですか\uff1f", found) == []
    # Written against the Japanese, as Japanese usually is.
    assert on_site_passages("bin-linksの既定値は\uff1f", found)[0].anchor == "bin-links"
    # A heading of words is not a name: "check-in" asked does not make it the answer.
    heading = "Onsen \u203a Check-in"
    words = [Passage("Onsen", "http://x/o", "Check-in from 15:00.", heading=heading,
                     anchor="check-in", similarity=0.2)]  # fmt: skip
    assert on_site_passages("Can I check-in at the Hilton airport hotel?", words) == []


def test_an_option_named_in_a_question_is_quoted_from_its_entry_with_its_default() -> None:
    """Valgrind's options: "--num-callers=<number> [default: 12]" heads the entry, and the
    quote had been "by --num-callers be" (a line of another option's text)."""
    passages = entry_passages(VALGRIND_PAGE, "opt.unw-stack-scan-thresh", "opt.num-callers")

    asked = ("What is the default value of --num-callers?", "--num-callers の既定値は\uff1f")
    for question in asked:
        evidence = find_evidence(question, on_site_passages(question, passages))

        assert evidence is not None and evidence.url.endswith("/manual-core.html")
        assert evidence.quote.startswith("--num-callers=<number> [default: 12]"), question


def test_an_abbreviation_does_not_end_the_quoted_sentence() -> None:
    quick = section_passage_of(VALGRIND_PAGE.parent / "quick-start.html", "Memcheck")

    evidence = find_evidence("How much slower does my program run under Memcheck?", [quick])

    assert evidence is not None
    assert "(eg. 20 to 30 times) than normal" in evidence.quote


def test_a_japanese_question_is_quoted_the_line_nearest_in_meaning_of_those_it_meets_alike() -> (
    None
):
    """Of npm-cache's synopsis, each line meets "npm" and "キャッシュ" alike (by the Latin
    word only); the encoder tells "削除" (delete) is "clean", where the shortest line is not."""
    synopsis = section_passage_of(NPM_CACHE_PAGE, "Synopsis")
    question = "npm のキャッシュを削除するにはどうすればいいですか\uff1f"
    embedder = shared_embedder()

    def nearness(question: str, texts: Sequence[str]) -> list[float]:
        vectors = embedder.embed([question, *texts])
        return [float(vector @ vectors[0]) for vector in vectors[1:]]

    by_meaning = find_evidence(question, [synopsis], nearness=nearness)
    shortest = find_evidence(question, [synopsis])

    assert by_meaning is not None and by_meaning.quote.startswith("npm cache clean")
    assert shortest is not None and shortest.quote == "npm cache verify"


def test_a_sentence_is_read_by_meaning_after_the_one_before_it() -> None:
    """The tutorial's pip section: several sentences hold "requirements.txt", the Japanese
    question's only Latin word; "pip install -r requirements.txt" alone is nearest to
    "入れたパッケージ" (the packages installed). "A common convention is to put this list in a
    requirements.txt file:", which brings the freeze command after its colon, is nearer only
    read after the sentence before it ("python -m pip freeze will produce a similar list of
    the installed packages…")."""
    section = section_passage("tutorial/venv.html", "Managing Packages with pip")
    question = (
        "仮想環境に入れたパッケージの一覧を requirements.txt に"
        "書き出すにはどうすればいいですか\uff1f"
    )
    embedder = shared_embedder()

    def nearness(question: str, texts: Sequence[str]) -> list[float]:
        vectors = embedder.embed([question, *texts])
        return [float(vector @ vectors[0]) for vector in vectors[1:]]

    evidence = find_evidence(question, [section], nearness=nearness)

    assert evidence is not None and "pip freeze > requirements.txt" in evidence.quote


def test_a_call_with_its_arguments_is_answered_by_its_entry_over_a_page_that_meets_it_alike() -> (
    None
):
    """ "round(2.5)" names round(): its entry answers, not the floating point tutorial that
    the search put first, which meets the question's one Latin word, "round", as well."""
    tutorial = section_passage("tutorial/floatingpoint.html", "Issues and Limitations")
    entry = section_passage("library/functions.html", "round()")
    question = "round(2.5) が 3 ではなく 2 になるのはなぜですか\uff1f"

    used = on_site_passages(question, [tutorial, entry])

    assert used and used[0].url.endswith("/functions.html") and used[0].anchor == "round"
    assert "even" in used[0].text  # "rounding is done toward the even choice"


def test_a_synopsis_that_only_names_the_command_asked_about_is_not_its_quote() -> None:
    """npm-prune's synopsis "npm prune [[<@scope>/]<pkg>...]" meets every word of "What does
    npm prune do?" and says nothing of it; the page's opening line says what it does."""
    page = page_sections((NPM_CACHE_PAGE.parent / "npm-prune.html").read_bytes())
    assert page is not None
    url = "http://docs.example/npm-prune.html"
    opening, synopsis = (
        Passage(page.title, url, s.text, heading=s.heading, anchor=s.anchor)
        for s in page.sections[:2]
    )

    evidence = find_evidence("What does npm prune do?", [synopsis, opening])

    assert evidence is not None and evidence.quote == "Remove extraneous packages"
    # A sentence of the question's words alone answers it (found by review).
    museum = Passage("Museum hours", url, "The museum is closed on Mondays. It opens at 9:00.")
    said = find_evidence("Is the museum closed on Mondays?", [museum])
    assert said is not None and said.quote.startswith("The museum is closed on Mondays.")


def test_a_sentence_saying_what_the_command_before_it_did_brings_the_command() -> None:
    """The Rust book (a held-out check of the seventh session): "How do I run tests on a
    single thread?" was quoted "We set the number of test threads to 1…" without the command
    that does it, the line before."""
    text = (
        "If you don't want to run the tests in parallel or if you want more fine-grained"
        " control over the number of threads used, you can send the --test-threads flag and"
        " the number of threads you want to use to the test binary. Take a look at the"
        " following example:\n"
        "$ cargo test -- --test-threads=1\n"
        "We set the number of test threads to 1, telling the program not to use any"
        " parallelism. Running the tests using one thread will take longer than running them"
        " in parallel, but the tests won't interfere with each other if they share state."
    )
    section = Passage("Running tests", "http://book.example/tests.html", text, heading="x")

    evidence = find_evidence("How do I run tests on a single thread?", [section])

    assert evidence is not None
    assert evidence.quote.startswith("$ cargo test -- --test-threads=1 We set the number")


def test_a_japanese_question_naming_an_option_is_its_entrys_not_the_release_notes() -> None:
    """既定値 is "default value" in the dictionary: Valgrind's release notes say it ("The
    --num-callers flag now has a default value of 12"), the option's entry says "[default:
    12]"; across languages, the option the question names in the page's letters decides."""
    (entry,) = entry_passages(VALGRIND_PAGE, "opt.num-callers")
    news_url = "http://docs.example/dist.news.old.html"
    news = Passage("Valgrind Release Notes", news_url, "The --num-callers flag now has a default"
                   " value of 12.", heading="OLDER NEWS", similarity=0.18)  # fmt: skip
    found = [replace(entry, similarity=0.33), news]

    used = on_site_passages("--num-callers の既定値はいくつですか？", found)  # noqa: RUF001

    assert [passage.url for passage in used] == [entry.url]
