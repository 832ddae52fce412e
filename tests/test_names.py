"""A name the model's words give that nothing it read gives leaves its words out of the
answer (engine/answering/names.py), as an invented option or number does."""

from __future__ import annotations

from broker.amqp import Broker
from config.settings import Settings
from engine.answering.names import unread_names
from engine.answering.wording import WORDING
from engine.backends.base import Backend
from tests.test_numbers import ferry_answer

READ = ["Compile local packages and all of their dependencies. cargo build --release"]


def test_a_name_nothing_read_gives_is_found() -> None:
    """What SmolLM2 wrote on the Cargo Book and on Python's documentation."""
    answer = "It builds packages on the Kubernetes server, using Docker containers."
    assert unread_names(answer, READ) == ["Kubernetes", "Docker"]
    expansion = 'EAFP stands for "Explicit Type Preferment" and is a style of coding.'
    assert unread_names(expansion, ["EAFP: Easier to ask for forgiveness"]) == ["Preferment"]


def test_common_words_first_words_names_it_read_and_code_are_not_claims() -> None:
    answer = (
        "Cargo builds it. It works on Windows with Python, True or False; see the Packages "
        "list, the `Vec::new()` call and the COMPILE step.\n```\nlet x = Kubernetes::new();\n```"
    )
    assert unread_names(answer, READ) == []  # "Packages" is read, in another case
    assert unread_names("It runs on the Kubernetes cluster.", ["kubernetes"]) == []


def test_a_name_as_code_writes_it_among_the_words_is_a_name_too() -> None:
    """What SmolLM2 wrote on Python's documentation (an eval run) and MkDocs' (in `concierge
    chat`, a snippet outside a code block)."""
    read = ["shutil.rmtree(path) — Delete an entire directory tree.", "site_name: MkLorum"]

    assert unread_names("It uses the copy_tree() method of the shutil module.", read) == [
        "copy_tree"
    ]
    snippet = "Here's how:\nfrom lolc.utils import get_menu_items\ndef add_item(name):"
    assert unread_names(snippet, read) == ["get_menu_items", "add_item", "lolc.utils"]
    in_span = "You need to use the `add_page` method. Here's how:\n```\nmy_menu.add()\n```"
    assert unread_names(in_span, read) == ["add_page"]
    # read, a file's or a host's name, an abbreviation, a path, an address, a code block
    kept = (
        "Call `shutil.rmtree()` and set site_name in `mkdocs.yml` (see example.com, e.g. "
        "docs/my_page.md, `index.css` or http://docs.example/a_b.html?page_id=3). Save it as "
        "hello_world.py; see docs.python.org/3/library or write to first.last@example.com. "
        "Set `docs_dir: my_docs` or call `shutil.rmtree(my_dir)`.\n```\nmy_tree.walk()\n```"
    )
    assert unread_names(kept, read) == []


async def test_the_models_words_with_an_invented_name_are_left_out_for_the_quote(
    settings: Settings, backend: Backend, broker: Broker
) -> None:
    pieces = ["The last ferry leaves at 16:50 ", "from the Kubernetes pier."]
    done, _ = await ferry_answer(settings, backend, pieces)

    assert done.text.startswith(WORDING["en"].withdrawn_term + "\n\n")
    assert "Kubernetes" not in done.text and "16:50" in done.text  # the quote's
