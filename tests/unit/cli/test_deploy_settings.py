"""The settings the deploy files set are settings the processes read, and the ones every
deployment needs have a slot: a misspelt variable would be ignored without a word."""

from __future__ import annotations

import re
from typing import Any

from asanoha.platform.settings import Settings
from asanoha.platform.settings_docs import variable_of
from asanoha.platform.settings_sources import COMMAND_VARIABLES
from tests.unit.cli.test_deploy import DEPLOY, compose, kubernetes_documents

#: What a deployment on Postgres and Redis cannot do without (the master key: as soon as
#: the application has a personal field).
REQUIRED = {
    "ASANOHA_DATABASE_URL",
    "ASANOHA_BROKER_URL",
    "ASANOHA_JWT_SECRET",
    "ASANOHA_MASTER_KEY",
}
KNOWN = {variable_of(name) for name in Settings.model_fields} | set(COMMAND_VARIABLES)


def compose_variables() -> set[str]:
    """Every variable a service of compose.yaml sets."""
    loaded = compose()
    found = set(loaded["x-app"]["environment"])
    for service in loaded["services"].values():
        environment = service.get("environment") or {}
        found |= (
            set(environment)
            if isinstance(environment, dict)
            else {item.partition("=")[0] for item in environment}
        )
    return found


def kubernetes_variables() -> set[str]:
    """Every variable the manifests set: the ConfigMap, the Secret and the containers' env."""
    found: set[str] = set()
    for document in kubernetes_documents():
        found |= set(document.get("data") or {}) | set(document.get("stringData") or {})
        found |= {variable["name"] for variable in containers_env(document)}
    return found


def containers_env(document: dict[str, Any]) -> list[dict[str, Any]]:
    spec = document.get("spec") or {}
    template = (spec.get("jobTemplate") or {}).get("spec", spec).get("template") or {}
    containers = (template.get("spec") or {}).get("containers") or []
    return [variable for container in containers for variable in container.get("env") or []]


def dockerfile_variables() -> set[str]:
    text = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    return set(re.findall(r"\b(ASANOHA_[A-Z0-9_]+)=", text))


def test_every_asanoha_variable_of_the_deploy_files_is_a_setting() -> None:
    for where, found in (
        ("compose.yaml", compose_variables()),
        ("kubernetes/", kubernetes_variables()),
        ("Dockerfile", dockerfile_variables()),
    ):
        unknown = {name for name in found if name.startswith("ASANOHA_")} - KNOWN
        assert not unknown, f"{where} sets {sorted(unknown)}, which no process reads"


def test_the_required_settings_have_a_slot_in_compose_and_kubernetes() -> None:
    assert compose_variables() >= REQUIRED
    assert kubernetes_variables() >= REQUIRED


def test_a_misspelt_variable_would_be_caught() -> None:
    assert "ASANOHA_MASTERKEY" not in KNOWN and "ASANOHA_MASTER_KEY" in KNOWN
