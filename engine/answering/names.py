"""Names the model's words give that nothing it read gives: the default model invents them.

Tried on the Cargo Book, "What does cargo build do?" was answered "a command that compiles
and builds packages on the Kubernetes server… built using Docker containers" above the quote
"Compile local packages and all of their dependencies."; on Python's documentation, "EAFP
stands for "Explicit Type Preferment"". A name a reader does not know sends them looking for
it, so such words are left out as a wrong number or an invented option is (numbers.py,
options.py): the answer is the site's quote and sources alone.

A name is a capitalised word inside a sentence (not its first word) that is no common English
word (``english.py``: "Python", "True", "Windows" are common, and so is a name everyone
writes; "Kubernetes", "Preferment" are not), or a name as code writes it, in snake case or
dotted, among its words or as a code span of its own: "This function uses the copy_tree()
method of the shutil module" (on Python's documentation, which has no copy_tree), "use the
`add_page` method" (MkDocs', tried in `concierge chat`). A file's name ("mkdocs.yml") is the
asker's as often as the site's, and is left alone. A code block, or a span of more than a
name ("`shutil.rmtree(my_dir)`"), is the model's illustration, not a claim: its made-up
names are not read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from engine.answering.english import is_common_word
from engine.answering.needs import FILE_EXTENSIONS
from engine.answering.numbers import ADDRESS_RE, CODE_BLOCK, CODE_RE, CODE_SPAN

FILE_TYPES = FILE_EXTENSIONS | set(
    "js mjs cjs ts jsx tsx css scss svg ico rb rs go java php cpp sql tgz".split()
    + "com org net io dev edu".split()  # hosts' names
)
CODE_BLOCK_RE = re.compile(CODE_BLOCK, re.DOTALL)

# Capitalised after a lowercase letter or a comma, colon or semicolon and a space: not a
# sentence's first word, nor a heading's.
NAME_RE = re.compile(r"(?<=[a-z,;:] )[A-Z][A-Za-z]{2,}\b")
# "copy_tree", "get_menu_items"; "lolc.utils", "os.path": not part of a path, an address
# (with its scheme or without: "docs.python.org/3/library"), an email or a file's name
# ("hello_world.py")
SNAKE_CASE_RE = re.compile(r"(?<![\w./\\-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?!\.?[\w/@-])")
DOTTED_RE = re.compile(r"(?<![\w./\\:@-])[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]+)+(?!\.?[\w/@-])")
CODE_SPAN_RE = re.compile(CODE_SPAN)


def unread_names(answer: str, read: Iterable[str]) -> list[str]:
    """The names of ``answer`` that are no common English word (or that code writes) and that
    none of the texts in ``read`` holds (in any case), in order."""
    texts = " ".join(read).lower()
    words = ADDRESS_RE.sub(" ", CODE_RE.sub(" ", answer))
    said = [name for name in NAME_RE.findall(words) if not is_common_word(name.lower())]
    said += SNAKE_CASE_RE.findall(words)
    said += DOTTED_RE.findall(words)
    said += _named_in_spans(CODE_BLOCK_RE.sub(" ", answer))  # "use the `add_page` method"
    said = [name for name in said if not _is_file(name)]
    return [name for name in dict.fromkeys(said) if name.lower() not in texts]


def _named_in_spans(text: str) -> list[str]:
    """The code spans of ``text`` that are a name alone, maybe called ("`add_page`",
    "`os.path.join()`"); not a line of code, whose names may be placeholders ("`docs_dir:
    my_docs`", "`shutil.rmtree(my_dir)`")."""
    spans = (span.strip().removesuffix("()") for span in CODE_SPAN_RE.findall(text))
    return [s for s in spans if SNAKE_CASE_RE.fullmatch(s) or DOTTED_RE.fullmatch(s)]


def _is_file(name: str) -> bool:
    """ "mkdocs.yml", "index.md", "example.com": a file's or a host's name, not code's."""
    return "." in name and name.rsplit(".", 1)[1] in FILE_TYPES
