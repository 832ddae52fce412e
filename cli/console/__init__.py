"""``concierge web``: a live view of the queue, admin actions, and the FIFO-trap demo.

Modules by role: ``state`` (what the page shows, pure), ``observer`` (copies of the traffic on
the console's own queues), ``watch`` (queue counts and the engine's ``/healthz``), ``hub``
(server-sent events), ``actions`` (the token guard, stop, rescrape), ``demo`` (two engines of
its own, cancel in the request queue against cancel on its own queue), ``results`` (the cancel
benchmark's chart), ``server`` (HTTP), ``overhead`` (does an open console slow the engine?).
"""

from cli.console.server import Console, check_bind, web_command

__all__ = ["Console", "check_bind", "web_command"]
