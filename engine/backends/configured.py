"""Opening the backend the settings name (``CONCIERGE_BACKEND``): the one place that knows both."""

from __future__ import annotations

import logging

from config.settings import Settings
from engine.backends.base import Backend
from engine.backends.llama import ModelOptions
from engine.backends.openai.options import OpenAIOptions

log = logging.getLogger(__name__)

# Memory for llama.cpp's states after recent answers, so that a follow-up reads only its new
# part even after other people's questions (docs/benchmarks.md, "Conversations"). A state
# takes 22.7 KiB a token with SmolLM2: 64 MiB holds about three of 1,000 tokens, enough for a
# conversation with two other visitors in between (turn 8's first token 1.40 s, against 1.35 s
# with 256 MiB and 2.93 s without); 256 took the engine past 600 MB (docs/quality.md, "Memory").
STATE_CACHE_MB = 64


def model_options(settings: Settings) -> ModelOptions:
    return ModelOptions(
        path=settings.resolved_model_path(),
        context_size=settings.context_size,
        threads=settings.threads,
        flash_attention=settings.flash_attention,
        state_cache_bytes=STATE_CACHE_MB * 1024 * 1024,
    )


def backend_options(settings: Settings) -> ModelOptions | OpenAIOptions:
    """The model in this process, or the model server (``CONCIERGE_BACKEND``)."""
    if settings.backend == "llama":
        return model_options(settings)
    return OpenAIOptions(
        base_url=settings.openai_base_url,
        model=settings.openai_model,
        api_key=settings.openai_api_key,
    )


def load_backend(options: ModelOptions | OpenAIOptions) -> Backend:
    """Load the model, or connect to the model server (which must answer)."""
    if isinstance(options, OpenAIOptions):
        from engine.backends.openai.backend import OpenAIBackend

        return OpenAIBackend.connect(options)
    from engine.backends.llama import LlamaBackend  # loading llama.cpp is slow: only when used

    log.info("loading model %s", options.path.name)
    return LlamaBackend(options)


def open_backend(settings: Settings) -> Backend:
    """The configured backend, ready to stream."""
    return load_backend(backend_options(settings))
