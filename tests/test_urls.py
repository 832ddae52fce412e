"""``masked_url``: the one rule for a URL in a message or in status; no secret gets through."""

from __future__ import annotations

from urllib.parse import quote

from hypothesis import given
from hypothesis import strategies as st

from config.urls import masked_url

SCHEMES = st.sampled_from(["amqp", "amqps", "http", "https"])
# Lower case only, so a secret written in upper case can never be found in them by chance.
LOWER = "abcdefghijklmnopqrstuvwxyz0123456789"
HOSTS = st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,20}[a-z0-9])?(:[0-9]{1,5})?", fullmatch=True)
PATHS = st.from_regex(r"(/[a-z0-9._-]{0,12}){0,3}", fullmatch=True)
USERS = st.text(LOWER, max_size=12)
SECRETS = st.text(min_size=1).map(lambda text: "SECRET" + text)


@given(SCHEMES, USERS, SECRETS, HOSTS, PATHS)
def test_a_password_never_appears_escaped_or_not(
    scheme: str, user: str, secret: str, host: str, path: str
) -> None:
    """As the URL standard wants it (escaped) or pasted raw, with its ``/``, ``?`` or ``@``."""
    for password in (quote(secret, safe=""), secret):
        shown = masked_url(f"{scheme}://{user}:{password}@{host}{path}")
        assert shown == f"{scheme}://***@{host}{path}"
        assert "SECRET" not in shown


@given(SCHEMES, SECRETS, HOSTS, PATHS)
def test_a_user_alone_is_masked_too(scheme: str, token: str, host: str, path: str) -> None:
    """``https://TOKEN@host``: the user may be the secret."""
    shown = masked_url(f"{scheme}://{quote(token, safe='')}@{host}{path}")
    assert shown == f"{scheme}://***@{host}{path}"


@given(SCHEMES, HOSTS, PATHS, SECRETS, st.text(LOWER, max_size=8))
def test_a_query_or_fragment_is_dropped(
    scheme: str, host: str, path: str, key: str, fragment: str
) -> None:
    shown = masked_url(f"{scheme}://{host}{path}?api_key={quote(key, safe='')}#{fragment}")
    assert shown == f"{scheme}://{host}{path}"


@given(SCHEMES, HOSTS, PATHS)
def test_a_url_without_secrets_is_shown_as_it_is(scheme: str, host: str, path: str) -> None:
    assert masked_url(f"{scheme}://{host}{path}") == f"{scheme}://{host}{path}"


@given(st.text())
def test_any_text_is_masked_without_raising(text: str) -> None:
    assert isinstance(masked_url(text), str)


def test_the_rule_by_example() -> None:
    assert masked_url("amqp://guest:s3cret@127.0.0.1:5672/") == "amqp://***@127.0.0.1:5672/"
    assert masked_url("https://user:pw@models.example/v1") == "https://***@models.example/v1"
    assert masked_url("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080/v1"
    assert masked_url("https://models.example/v1?api_key=sk-1#x") == "https://models.example/v1"
    assert masked_url("amqp://u:a/b?c@mq/vhost") == "amqp://***@mq/vhost"
