"""The root of every error of ours, carrying what ``concierge`` needs to end on one.

Each class says on itself how the command exits (the sysexits codes an init system or a script
can tell apart) and the one line a person sees, so ``cli/main.py`` reads both from the class
instead of listing the classes. Internal errors (a stopped generation, a skipped page) derive
from it too and say so: they are caught where they are raised and never reach a person.
"""

from __future__ import annotations

EXIT_FAILURE = 1  # anything else
EXIT_USAGE = 2  # as argparse exits for a bad command line (or a bad eval file)
EXIT_UNAVAILABLE = 69  # EX_UNAVAILABLE: the broker, a platform or the model server is unreachable
EXIT_CONFIG = 78  # EX_CONFIG: a setting to change


class ConciergeError(Exception):
    """An error of Concierge's own; subclasses set ``exit_code`` on the class."""

    exit_code: int = EXIT_FAILURE

    @property
    def user_message(self) -> str:
        """The one line shown to a person. Every raise keeps its message free of secrets (a URL
        is shown with its password masked, ``config/urls.py``; a token never enters it), so the
        message itself is that line."""
        return str(self)
