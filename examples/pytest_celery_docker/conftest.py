"""pytest-celery's ``celery_setup`` runs the application's worker in a Docker container, beside
a broker container (Redis, then RabbitMQ) and a Postgres container; ``asanoha_drain`` waits for
its work. The drain reads the broker and the job rows, never the worker, so a worker in a
container is waited for like one in this process.

Needs a Docker engine: without one every test here is skipped, and says why.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_celery import CeleryTestBroker, CeleryWorkerContainer
from pytest_docker_tools import build, container, fetch, fxtr
from shop import feature
from sqlalchemy.exc import OperationalError

from asanoha import App
from asanoha.platform.settings import Settings

HERE = Path(__file__).resolve().parent
#: asanoha's source, installed in the worker image: the repository this example lives in.
SOURCE = Path(os.environ.get("ASANOHA_SOURCE") or HERE.parents[1])
#: Seconds Postgres may take to accept connections once its container listens.
DATABASE_START = 60


def docker_engine_problem() -> str | None:
    """Why no Docker engine answers here (``None`` when one does)."""
    try:
        import docker

        client = docker.from_env(timeout=5)
    except Exception as exc:  # no socket, no DOCKER_HOST: the SDK says which
        return f"{type(exc).__name__}: {exc}"
    try:
        client.ping()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        client.close()
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    problem = docker_engine_problem()
    if problem is None:
        return
    skip = pytest.mark.skip(
        reason=f"no Docker engine answers ({problem}): pytest-celery's celery_setup runs the "
        "worker, the broker and the database in containers"
    )
    for item in items:
        item.add_marker(skip)


class ShopWorkerContainer(CeleryWorkerContainer):
    """The application's worker as an operator starts it (Celery logs "ready." once it
    consumes its lane queues)."""

    @classmethod
    def command(cls, *args: str, **kwargs: Any) -> list[str]:
        return ["asanoha", "worker", "--app", "shop:app", "--concurrency", "1", *args]


@pytest.fixture(scope="session")
def shop_worker_context(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The worker image's build context: the Dockerfile, asanoha's package source and the
    application module (not the whole repository: the Docker SDK sends all of a context)."""
    context = tmp_path_factory.mktemp("shop-worker-image")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(SOURCE / name, context / name)
    shutil.copytree(SOURCE / "src", context / "src", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("Dockerfile", "shop.py"):
        shutil.copy(HERE / name, context / name)
    return str(context)


shop_worker_image = build(path=fxtr("shop_worker_context"), tag="asanoha-example/shop-worker:test")
postgres_image = fetch(repository="postgres:16-alpine")
shop_database = container(
    image="{postgres_image.id}",
    environment={"POSTGRES_HOST_AUTH_METHOD": "trust"},
    network="{default_pytest_celery_network.name}",
    ports={"5432/tcp": None},
    timeout=DATABASE_START,
)
# pytest-celery's worker, replaced by the application's: its image, its command, its settings.
default_worker_container = container(
    image="{shop_worker_image.id}",
    environment=fxtr("shop_worker_env"),
    network="{default_pytest_celery_network.name}",
    wrapper_class=ShopWorkerContainer,
    timeout=120,
    command=ShopWorkerContainer.command(),
)


@pytest.fixture
def default_worker_container_cls() -> type[CeleryWorkerContainer]:
    return ShopWorkerContainer


@pytest.fixture(scope="session")
def default_worker_container_session_cls() -> type[CeleryWorkerContainer]:
    return ShopWorkerContainer


@pytest.fixture
def celery_backend_cluster() -> None:
    """No result backend container: asanoha jobs keep no results (the job rows are the
    record)."""
    return None


@pytest.fixture
def asanoha_app(celery_broker: CeleryTestBroker, shop_database: Any) -> Iterator[App]:
    """The application as the test process sees it: the database and the broker through
    their published ports, its own queue names. Its schema exists before the worker starts
    (``asanoha worker`` refuses a schema that is behind)."""
    host, port = shop_database.get_addr("5432/tcp")
    settings = Settings(
        database_url=f"postgresql+psycopg://postgres@{host}:{port}/postgres",
        broker_url=celery_broker.config()["host_url"],
        queue_prefix=f"example-{uuid.uuid4().hex[:8]}",
    )
    app = App([feature], settings)
    deadline = time.monotonic() + DATABASE_START
    while True:
        try:
            app.create_schema()
            break
        except OperationalError:
            # The container listens before Postgres accepts connections.
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    yield app
    app.close()


@pytest.fixture
def shop_worker_env(
    asanoha_app: App, celery_broker: CeleryTestBroker, shop_database: Any
) -> dict[str, str]:
    """The worker container's settings: the same database, broker and queue names, reached
    inside pytest-celery's Docker network."""
    return {
        "ASANOHA_DATABASE_URL": f"postgresql+psycopg://postgres@{shop_database.name}:5432/postgres",
        "ASANOHA_BROKER_URL": celery_broker.config()["url"],
        "ASANOHA_QUEUE_PREFIX": asanoha_app.settings.queue_prefix,
    }
