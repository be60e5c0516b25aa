"""Boot jobs: ``run_on_boot=True`` jobs run once per deployed release when workers start.

Every worker's main process enqueues them when it is ready; the row's idempotency key is
(job, release), so however many workers start at once, and however often they restart,
each release runs each boot job once. The prune keeps those rows (see
``outbox.prune_finished``): they are the record that the release ran its boot jobs.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import uuid

from asanoha.platform.model import Registry, SessionUser
from asanoha.platform.service import Service
from asanoha.platform.service.outbox import boot_key
from asanoha.platform.settings import Settings
from asanoha.workers.cron_tasks import enqueue_once

log = logging.getLogger("asanoha.boot")


def release_of(registry: Registry, settings: Settings) -> str:
    """``ASANOHA_RELEASE``, or the asanoha version and a digest of the application's
    definitions: handlers, jobs, consumers, events and entity fields."""
    if settings.release:
        return settings.release
    parts = sorted(
        [f"handler {handler.qn}" for handler in registry.handlers]
        + [f"job {job.qn}" for job in registry.jobs]
        + [f"consumer {consumer.qn}" for consumer in registry.consumers]
        + [f"event {event.qn}" for event in registry.events]
        + [f"entity {entity.key} {sorted(entity.entity.fields)}" for entity in registry.entities]
    )
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]
    try:
        version = importlib.metadata.version("asanoha")
    except importlib.metadata.PackageNotFoundError:
        version = "0"
    return f"{version}+{digest}"


def enqueue_boot_jobs(service: Service, settings: Settings) -> list[uuid.UUID]:
    """Enqueue every ``run_on_boot`` job of this release that is not enqueued yet, as the
    default tenant's system user; return their rows' ids."""
    jobs = [job for job in service.registry.jobs if job.run_on_boot]
    if not jobs:
        return []
    release = release_of(service.registry, settings)
    user = SessionUser.system(settings.default_tenant)
    ids = [
        enqueue_once(service, job.qn, user, boot_key(job.qn, release), trigger_name="boot")
        for job in jobs
    ]
    log.info("boot jobs of release %s: %s", release, ", ".join(job.qn for job in jobs))
    return ids
