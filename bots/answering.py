"""The order every adapter follows for a new question: placeholder, request, answer."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from bots.client import AskRefused, ConciergeClient
from bots.renderer import Renderer, Status
from bots.session import Session

log = logging.getLogger(__name__)


async def send_and_show(
    client: ConciergeClient,
    session: Session,
    renderer: Renderer,
    context_for: Callable[[Any | None], dict[str, str]],
    engine_down: str,
) -> Status:
    """Post the placeholder first, so the request can name it (``context_for`` turns its
    handle, None if posting failed, into the request's context); then send the request and
    follow the answer to its end. A request that cannot be sent turns the placeholder into
    the reason: the queue is full, or ``engine_down``."""
    placeholder = await renderer.start(session)
    try:
        await client.submit(session, context_for(placeholder))
    except AskRefused as refusal:
        await renderer.refuse(str(refusal))
        return renderer.status
    except Exception:
        log.exception("could not send the %s of %s", session.kind, session.user_id)
        await renderer.refuse(engine_down)
        return renderer.status
    return await renderer.follow(session)
