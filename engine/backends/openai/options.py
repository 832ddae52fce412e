"""Where the model server is (``CONCIERGE_OPENAI_*``): known without loading the HTTP client."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import SecretStr


@dataclass(frozen=True)
class OpenAIOptions:
    base_url: str  # ends in /v1
    model: str | None = None  # None: the first model the server lists
    api_key: SecretStr | None = None
    seed: int = -1  # sent when >= 0
