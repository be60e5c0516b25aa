"""``deploy/``: the manifests validate offline, and every process runs a real asanoha command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from typer.testing import CliRunner

from asanoha.cli import cli
from asanoha.platform.settings import Settings
from asanoha.workers.lanes import lane_queues

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
IMAGE = "asanoha-shop:latest"
#: The asanoha processes of a deployment, by the command they run.
ROLES = {"migrate", "serve", "worker", "beat", "flower"}
#: Commands an operator runs by hand (or a test runs once), not processes a deployment keeps.
ONE_OFF_COMMANDS = {"token", "celery", "jobs", "consumers", "keys"}


def kubernetes_documents() -> list[dict[str, Any]]:
    return [
        document
        for path in sorted(KUBERNETES.glob("*.yaml"))
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8"))
        if document
    ]


def kubernetes_commands() -> dict[str, list[str]]:
    """The asanoha command of every container of the image, by its first word."""
    commands = {}
    for document in kubernetes_documents():
        spec = document.get("spec", {})
        pod = spec.get("template", {}).get("spec", {})
        for container in pod.get("containers", []):
            if container["image"] == IMAGE:
                commands[container["args"][0]] = container["args"]
    return commands


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text("utf-8"))
    return loaded


def compose_commands() -> dict[str, list[str]]:
    return {
        service["command"][0]: service["command"]
        for service in compose()["services"].values()
        if service.get("image") == IMAGE
    }


@pytest.mark.parametrize(
    "document", kubernetes_documents(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}"
)
def test_kubernetes_manifest_is_valid(document: dict[str, Any]) -> None:
    if document["apiVersion"].startswith("keda.sh/"):
        pytest.skip("a KEDA resource: checked by test_keda_scales_workers_on_every_lane_queue")
    kubernetes_validate.validate(document, "1.30.0", strict=True)


def test_compose_file_matches_the_compose_specification() -> None:
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "check-jsonschema"),
            "--builtin-schema",
            "vendor.compose-spec",
            str(DEPLOY / "compose.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_compose_and_kubernetes_run_the_same_commands_for_every_process() -> None:
    assert set(compose_commands()) == ROLES
    assert compose_commands() == kubernetes_commands()


@pytest.mark.parametrize("role", sorted(ROLES))
def test_every_deployed_command_is_accepted_by_the_asanoha_command(role: str) -> None:
    # --help after the arguments: the parser checks every option name, then stops.
    arguments = compose_commands()[role]
    result = CliRunner().invoke(cli, [*arguments, "--help"])
    assert result.exit_code == 0, result.output
    assert arguments[1:3] == ["--app", "shop:app"]


def test_the_example_application_loads_from_its_folder() -> None:
    done = subprocess.run(
        [str(Path(sys.executable).parent / "asanoha"), "tools", "--app", "shop:app", "--json"],
        cwd=DEPLOY / "example",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"tools": []}  # CRUD handlers are not agent tools


def test_keda_scales_workers_on_every_lane_queue() -> None:
    (scaled,) = [d for d in kubernetes_documents() if d["kind"] == "ScaledObject"]
    (settings,) = [d for d in kubernetes_documents() if d["kind"] == "ConfigMap"]
    prefix = settings["data"]["ASANOHA_QUEUE_PREFIX"]
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    assert scaled["spec"]["scaleTargetRef"]["name"] == "asanoha-worker"
    triggers = scaled["spec"]["triggers"]
    assert {trigger["type"] for trigger in triggers} == {"redis"}
    watched = {trigger["metadata"]["listName"] for trigger in triggers}
    assert watched == set(lane_queues(Settings(queue_prefix=prefix)))
    broker = settings["data"]["ASANOHA_BROKER_URL"]
    for trigger in triggers:
        assert (
            broker
            == f"redis://{trigger['metadata']['address']}/" + (trigger["metadata"]["databaseIndex"])
        )


def test_compose_settings_match_kubernetes_settings() -> None:
    environment = compose()["x-app"]["environment"]
    (settings,) = [d for d in kubernetes_documents() if d["kind"] == "ConfigMap"]
    for name in ("ASANOHA_QUEUE_PREFIX", "ASANOHA_VISIBILITY_TIMEOUT"):
        assert environment[name] == settings["data"][name]


def test_redis_keeps_an_append_only_file() -> None:
    command = compose()["services"]["redis"]["command"]
    assert command[command.index("--appendonly") + 1] == "yes"


def test_api_probes_health_and_readiness() -> None:
    (api,) = [
        d
        for d in kubernetes_documents()
        if d["kind"] == "Deployment" and d["metadata"]["name"] == "asanoha-api"
    ]
    (container,) = api["spec"]["template"]["spec"]["containers"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    assert container["readinessProbe"]["httpGet"]["path"] == "/health/ready"


def test_the_image_runs_as_a_user_and_installs_the_repository() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    assert "-slim" in dockerfile
    assert "pip install ." in dockerfile
    users = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("USER ")]
    assert users and not users[-1].startswith(("0", "root"))
    assert 'ENTRYPOINT ["asanoha"]' in dockerfile


E2E = Path(__file__).resolve().parents[2] / "e2e"


def e2e_commands() -> dict[str, set[str]]:
    """The asanoha commands the end-to-end tests start, as subcommand -> option names: every
    list literal holding ``"asanoha.cli"`` (``python -m asanoha.cli ...``) followed by words."""
    import ast

    found: dict[str, set[str]] = {}
    for path in sorted(E2E.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.List):
                continue
            words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            if "asanoha.cli" not in words:
                continue
            rest = words[words.index("asanoha.cli") + 1 :]
            # What follows "--" goes to Celery or Flower as it is: not asanoha's options.
            rest = rest[: rest.index("--")] if "--" in rest else rest
            if rest and isinstance(rest[0], str):
                options = {w for w in rest if isinstance(w, str) and w.startswith("--")}
                found.setdefault(rest[0], set()).update(options)
    return found


def test_deployed_processes_run_the_commands_the_end_to_end_tests_run() -> None:
    deployed = compose_commands()
    for command, options in e2e_commands().items():
        if command in ONE_OFF_COMMANDS:
            continue
        assert command in deployed, f"the e2e tests run asanoha {command}; deploy/ does not"
        used = {word.split("=")[0] for word in deployed[command] if word.startswith("--")}
        assert options <= used, f"asanoha {command}: e2e passes {options - used}, deploy/ not"


def test_flower_runs_the_asanoha_command_with_basic_auth_from_the_secret() -> None:
    flower = compose()["services"]["flower"]
    assert flower["image"] == IMAGE
    assert "ASANOHA_FLOWER_BASIC_AUTH" in flower["environment"]
    (deployment,) = [
        d
        for d in kubernetes_documents()
        if d["kind"] == "Deployment" and d["metadata"]["name"] == "asanoha-flower"
    ]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert [variable["name"] for variable in container["env"]] == ["ASANOHA_FLOWER_BASIC_AUTH"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthcheck"
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/path"] == "/metrics"
