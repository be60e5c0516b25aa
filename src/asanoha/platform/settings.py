"""Settings from ``ASANOHA_*`` environment variables (pydantic-settings)."""

from __future__ import annotations

import os
import secrets
from collections.abc import MutableMapping
from pathlib import Path
from typing import Literal

from dotenv import dotenv_values
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

#: The prefix of every variable asanoha reads.
VARIABLE_PREFIX = "ASANOHA_"
#: The file in the working directory whose variables count as set (the environment wins).
ENV_FILE = ".env"
EMBEDDED_DATABASE_URL = "sqlite+pysqlite:///asanoha.sqlite3"
EMBEDDED_BROKER_URL = "memory://"
#: The placeholder secret: public, so the HTTP app refuses it outside development.
PLACEHOLDER_JWT_SECRET = "change-me-in-production"
#: Example secrets published with the deploy manifests: as public as the placeholder.
PUBLISHED_EXAMPLE_SECRETS = frozenset({"change-me-to-a-long-random-string"})
#: The algorithms tokens may be signed with: HMAC over the shared secret.
SIGNING_ALGORITHMS = ("HS256", "HS384", "HS512")
#: The shortest secret accepted (RFC 7518 asks for a key at least as long as the hash).
MIN_SECRET_BYTES = 32
#: How to make a secret, quoted by every refusal that asks for one.
SECRET_RECIPE = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"


class InsecureSettingsError(ValueError):
    """The settings would let anyone in (the public placeholder JWT secret), or sign tokens
    that could not be checked (a short secret, an unsupported algorithm)."""


class Settings(BaseSettings):
    """Runtime configuration. With nothing set: SQLite file and the in-process broker."""

    # A ``.env`` file in the working directory is read too (the environment wins over it),
    # as Django, FastAPI and Celery projects commonly keep their development settings.
    model_config = SettingsConfigDict(
        env_prefix=VARIABLE_PREFIX, extra="ignore", env_file=ENV_FILE, env_file_encoding="utf-8"
    )

    #: The application's database: Postgres (``postgresql://user:password@host/db``) in
    #: production; unset: a SQLite file in the working directory (the embedded default).
    database_url: str = EMBEDDED_DATABASE_URL
    #: Connections each process keeps to the database (as many again may overflow).
    database_pool_size: int = 10
    #: Test each pooled connection before use, so a database restart costs no failed call per
    #: stale connection (a round trip only for a connection that may be dead: see
    #: ``store/liveness``).
    database_pre_ping: bool = True
    #: A streaming hot standby of the database: queries declared ``replica=True`` read from
    #: it when called over HTTP (read-your-writes by the caller's commit position). Unset:
    #: every read goes to ``database_url``.
    read_database_url: str | None = None
    #: Seconds a read replica may lag behind the primary and still serve; past it (or when
    #: it does not answer) the primary serves.
    replica_max_lag: float = Field(default=1.0, gt=0)
    #: The Celery broker: ``redis://host:6379/0`` or ``amqp://...`` in production; unset: the
    #: in-process broker ``memory://``, which only works inside one process.
    broker_url: str = EMBEDDED_BROKER_URL
    #: Prefix of every queue name, so several stacks can share one broker without seeing
    #: each other's messages.
    queue_prefix: str = "asanoha"
    #: Redis visibility timeout in seconds: no countdown or job timeout may exceed it.
    visibility_timeout: float = 3600.0
    #: Seconds a job attempt may run when the job declares no ``timeout=``.
    job_timeout: float = 300.0
    #: Longest retry countdown held by the broker; longer ones wait in the database and the
    #: relay publishes them when due (also capped so countdown + timeout + grace stays below
    #: the visibility timeout).
    broker_countdown_max: float = 60.0
    #: Seconds between two relay passes of each ``asanoha worker``.
    relay_interval: float = 1.0
    #: Seconds a published job may wait unclaimed before ``/health/jobs`` and
    #: ``asanoha_outbox_unclaimed_rows`` count it: its message was lost, or the workers are
    #: that far behind.
    unclaimed_alert_seconds: float = Field(default=300.0, gt=0)
    #: Days a finished job row and its run rows are kept before the bundled prune job
    #: deletes them (a boot job's row is kept: it records that its release ran the job).
    job_retention_days: float = 7.0
    #: A folder the daily prune of events past their type's ``keep_for=`` writes them to
    #: first (compressed JSON lines, still sealed; ``asanoha events restore`` reads them
    #: back). None: the pruned events are not kept.
    event_archive_dir: str | None = None
    #: Signs and checks bearer tokens. Several, separated by commas, while a secret is
    #: rotated: the first signs, every one is accepted.
    jwt_secret: str = PLACEHOLDER_JWT_SECRET
    #: The algorithm tokens are signed with: ``HS256``, ``HS384`` or ``HS512``.
    jwt_algorithm: str = "HS256"
    #: Seconds the tokens the platform issues are valid (``asanoha token`` without
    #: ``--expires-in``); at most ``jwt_max_ttl_seconds``.
    jwt_ttl_seconds: int = 3600
    #: The longest lifetime a token may claim (``exp`` minus ``iat``, or minus now without
    #: ``iat``): a leaked token is good for a day at most.
    jwt_max_ttl_seconds: int = 86400
    #: Own secrets by key id, ``kid=secret`` pairs separated by commas: the first signs
    #: (its ``kid`` in the token's header), each checks the tokens that name its ``kid``.
    #: ``ASANOHA_JWT_SECRET`` still checks the tokens without a ``kid``.
    jwt_keys: str | None = None
    #: The identity provider's key set (JSON Web Key Set) its tokens are checked with.
    jwt_jwks_url: str | None = None
    #: The identity provider (OpenID Connect issuer URL): its key set is found through
    #: ``<issuer>/.well-known/openid-configuration``; ``jwt_issuer`` defaults to it.
    oidc_issuer: str | None = None
    #: The console's client at the identity provider: with ``oidc_issuer``, the console
    #: signs in through the provider (authorization code flow with PKCE).
    oidc_client_id: str | None = None
    #: Its secret, for a provider that treats the console as a confidential client.
    oidc_client_secret: str | None = None
    #: The ``iss`` every token must carry (unset: ``oidc_issuer``, else not checked).
    jwt_issuer: str | None = None
    #: The ``aud`` every token must carry (unset: not checked).
    jwt_audience: str | None = None
    #: The claim a provider's token names its tenant with; a dotted path reaches into an
    #: object.
    jwt_tenant_claim: str = Field(default="tenant_id", min_length=1)
    #: The claim holding a provider token's roles (a list); a dotted path
    #: (``realm_access.roles``) reaches into an object.
    jwt_roles_claim: str = Field(default="roles", min_length=1)
    #: The claim a provider's token names its user with.
    jwt_subject_claim: str = Field(default="sub", min_length=1)
    #: Seconds the provider's key set is kept before it is fetched again (a token naming an
    #: unknown ``kid`` fetches it at most once per 30 seconds besides).
    jwt_jwks_refresh: float = Field(default=300.0, gt=0)
    #: Signs approval tokens; unset: a key derived from ``jwt_secret``.
    approval_secret: str | None = None
    #: Request bodies larger than this many bytes are refused with 413.
    max_body_bytes: int = 1024 * 1024
    #: JSON bodies nested deeper than this are refused with 400 ``json_too_deep``.
    max_json_depth: int = 32
    #: Messages a live-feed client (``/api/stream``) may have waiting; past it the client is
    #: dropped with ``event: overflow`` and resumes from its last id.
    stream_buffer: int = Field(default=1000, ge=1)
    #: Seconds between two reads of the event log by an API process's feed when no commit of
    #: its own woke it (commits of other processes: workers, other API processes).
    stream_poll_interval: float = Field(default=0.05, gt=0)
    #: Seconds between heartbeat comments (``: ping``) on an idle stream.
    stream_heartbeat: float = Field(default=15.0, gt=0)
    #: Items a ``POST /api/batch`` may hold: one transaction runs them all, and a batch that
    #: outlasts its client's timeout is committed while the client thinks it failed.
    max_batch_items: int = Field(default=100, ge=1)
    #: Seconds the first outcome of an idempotent write is kept under its key.
    idempotency_ttl: int = Field(default=86400, ge=1)
    #: Seconds a repeat waits for a running write with the same idempotency key.
    idempotency_wait: float = Field(default=10.0, gt=0)
    #: The Redis that counts rate limits; ``None``: ``broker_url`` when it is a Redis.
    rate_limit_url: str | None = None
    #: A rate (``100/minute``, counted per user) for every handler that declares none; a
    #: handler with ``rate_limit=None, reason=...`` stays unlimited. ``None``: no default.
    rate_limit_default: str | None = None
    #: A development machine: stack traces in 500 responses, the placeholder JWT secret
    #: allowed (``asanoha serve`` then prints a development token), personal values without
    #: a master key.
    development: bool = False
    #: The tenant of anonymous callers (at most 64 characters, like every tenant id).
    default_tenant: str = Field(default="default", min_length=1, max_length=64)
    #: The tenant that operates the whole application (its SystemAdmins restart, skip,
    #: disable and enable consumers, which every tenant shares); unset: none, only the CLI.
    operator_tenant: str | None = Field(default=None, min_length=1, max_length=64)
    #: The deployed release: jobs declared ``run_on_boot=True`` run once per release when
    #: workers start. Unset: the asanoha version and a digest of the application's
    #: definitions (a deploy that changes them is a new release).
    release: str | None = Field(default=None, min_length=1, max_length=100)
    #: Seconds between the consumer passes every worker runs as a safety net (0: none).
    consumer_tick_interval: float = 1.0
    #: After a commit that appended events a consumer follows, publish a (coalesced) task
    #: that advances the consumers.
    consumer_wake: bool = True
    #: Threads of each worker's main process that run consumer wake-ups (never its job
    #: pool): how many consumer partitions one worker advances at once on wake-ups.
    consumer_wake_threads: int = Field(default=2, ge=1, le=64)
    #: Partitions a new job-trigger consumer gets (``asanoha consumers repartition`` changes
    #: an existing one): jobs triggered by events of different streams are enqueued in
    #: parallel.
    job_trigger_partitions: int = Field(default=1, ge=1, le=1024)
    #: How serve, worker and beat write log lines: ``json`` (one object per line), ``text``,
    #: or ``auto`` (text on a terminal, json otherwise).
    log_format: Literal["auto", "text", "json"] = "auto"
    #: With tracing on (``OTEL_*``), a span for every SQL statement of the application's
    #: database (the statement, never its parameters).
    trace_sql: bool = False
    #: Master keys that wrap the data keys of personal values: base64 keys of 32 bytes,
    #: comma-separated while rotating (the first wraps, all unwrap). Unset: personal values
    #: are stored as they are, which ``serve`` and ``worker`` refuse outside development.
    master_key: str | None = None
    #: ``plaintext``: run without a master key outside development (with a warning).
    personal_data: Literal["encrypted", "plaintext"] = "encrypted"
    #: Where the content of uploaded files (``fields.file``, ``fields.image``) is kept:
    #: ``local``, a folder (``file_dir``), or ``s3``, a bucket of an S3-compatible store
    #: (``file_s3_bucket``; credentials from the usual ``AWS_*`` variables or the
    #: instance's role; needs ``pip install 'asanoha[s3]'``).
    file_storage: Literal["local", "s3"] = "local"
    #: The folder of ``local`` file storage. Unset: ``asanoha-files`` in the working
    #: directory, beside the embedded default's database file.
    file_dir: str | None = None
    #: The bucket of ``s3`` file storage.
    file_s3_bucket: str | None = None
    #: What the keys of ``s3`` file storage start with (``uploads/``), so that one bucket can
    #: hold several applications' files.
    file_s3_prefix: str = ""
    #: The endpoint of an S3-compatible store other than AWS (MinIO, Ceph, R2, ...).
    file_s3_endpoint_url: str | None = None
    #: The region of the ``s3`` bucket (unset: the ``AWS_*`` configuration's).
    file_s3_region: str | None = None
    #: The largest file ``POST /api/files`` takes, in bytes (413 ``file_too_large``,
    #: counted while the upload streams in); a field's ``max_size=`` may lower it.
    file_max_bytes: int = Field(default=10 * 1024 * 1024, ge=1)
    #: The content types ``POST /api/files`` takes: patterns separated by commas
    #: (``image/*,application/pdf``); others are refused with 415 ``file_type_not_allowed``.
    file_types: str = "*/*"
    #: How many uploads (``POST /api/files``) one user may make (``30/minute``, a moving
    #: window counted in Redis where rate limits are); the next answers 429 ``rate_limited``
    #: before its body is read. ``None``: ``rate_limit_default``, else no limit.
    file_upload_rate: str | None = None
    #: Seconds a file's signed download link (its ``url``) stays valid.
    file_url_ttl: int = Field(default=300, ge=1)
    #: Hours an upload may wait for a write to take it; the hourly prune deletes it after.
    file_unattached_hours: float = Field(default=24, gt=0)

    @property
    def jwt_secrets(self) -> tuple[str, ...]:
        """The secrets tokens are checked with: the one that signs first."""
        found = tuple(part.strip() for part in self.jwt_secret.split(",") if part.strip())
        return found or (self.jwt_secret,)

    @property
    def jwt_key_ring(self) -> tuple[tuple[str, str], ...]:
        """The ``(kid, secret)`` pairs of ``jwt_keys``, the one that signs first."""
        pairs: list[tuple[str, str]] = []
        for part in (self.jwt_keys or "").split(","):
            if part.strip():
                kid, _, secret = part.strip().partition("=")
                pairs.append((kid.strip(), secret.strip()))
        return tuple(pairs)

    @property
    def has_identity_provider(self) -> bool:
        """Whether tokens of an identity provider are accepted (its key set is configured)."""
        return bool(self.jwt_jwks_url or self.oidc_issuer)

    @property
    def own_secret_disabled(self) -> bool:
        """Whether the placeholder secret is left unused: outside development, with an
        identity provider, the platform then accepts and signs no HS token of its own
        (unless ``jwt_keys`` names some)."""
        return self.uses_placeholder_secret and self.has_identity_provider and not self.development

    @property
    def jwt_expected_issuer(self) -> str | None:
        """The ``iss`` tokens must carry: ``jwt_issuer``, else ``oidc_issuer``."""
        return self.jwt_issuer or self.oidc_issuer

    @property
    def jwt_signing_secret(self) -> str:
        """The secret new tokens are signed with (the first of ``jwt_secrets``)."""
        return self.jwt_secrets[0]

    @property
    def uses_placeholder_secret(self) -> bool:
        """Whether tokens would be signed with the public placeholder secret."""
        return self.jwt_secret == PLACEHOLDER_JWT_SECRET

    @property
    def uses_embedded_default(self) -> bool:
        """Whether the application runs on SQLite and the in-process broker: one process,
        ``asanoha serve`` or ``asanoha demo`` on a developer's machine."""
        return self.database_url.startswith("sqlite") and self.broker_url.startswith(
            EMBEDDED_BROKER_URL
        )

    @property
    def rate_limit_redis_url(self) -> str | None:
        """Where rate limits are counted: ``rate_limit_url``, else a Redis broker, else none."""
        if self.rate_limit_url:
            return self.rate_limit_url
        if self.broker_url.startswith(("redis://", "rediss://")):
            return self.broker_url
        return None

    @property
    def approval_signing_secret(self) -> str | None:
        """The secret approval keys derive from; ``None``: a random key of this process.

        Never the placeholder outside development: an approval key derived from a public
        secret would let anyone approve an agent's high-risk call. ``asanoha serve`` on the
        embedded default signs bearer tokens with a secret of its process, so a key of its
        process serves its approvals too.
        """
        if self.approval_secret is not None:
            return self.approval_secret
        if self.uses_placeholder_secret and not self.development:
            return None
        return self.jwt_signing_secret

    @property
    def file_url_signing_secret(self) -> str | None:
        """The secret download links of files are signed with (a key derived from it per
        purpose); ``None``: a random key of this process. Never the public placeholder
        outside development, as for approvals."""
        if self.uses_placeholder_secret and not self.development:
            return None
        return self.jwt_signing_secret

    @property
    def file_upload_types(self) -> tuple[str, ...]:
        """The patterns of ``file_types``."""
        found = tuple(part.strip() for part in self.file_types.split(",") if part.strip())
        return found or ("*/*",)


def signing_problems(settings: Settings, *, checks_tokens: bool = True) -> list[str]:
    """What is wrong with the settings that sign and check tokens, each naming the variable
    and the fix; empty when nothing is.

    The placeholder secret is one outside development, for a process that ``checks_tokens``;
    a secret shorter than ``MIN_SECRET_BYTES``, an algorithm outside ``SIGNING_ALGORITHMS``
    and a token lifetime above the longest accepted one are others, in development too.
    """
    problems: list[str] = []
    if settings.uses_placeholder_secret:
        # With an identity provider the placeholder is simply not used (own_secret_disabled).
        if checks_tokens and not settings.development and not settings.has_identity_provider:
            problems.append(
                "ASANOHA_JWT_SECRET is not set: bearer tokens would be signed with the public "
                "placeholder secret, so anyone could mint an Admin token. Set "
                f"ASANOHA_JWT_SECRET to a long random value ({SECRET_RECIPE}), or set "
                "ASANOHA_DEVELOPMENT=true on a development machine."
            )
    else:
        problems += _secret_problems(settings)
    if (
        settings.approval_secret is not None
        and len(settings.approval_secret.encode()) < MIN_SECRET_BYTES
    ):
        problems.append(
            f"ASANOHA_APPROVAL_SECRET is {len(settings.approval_secret.encode())} bytes long: "
            f"it needs at least {MIN_SECRET_BYTES} bytes. Set it to a long random value "
            f"({SECRET_RECIPE}), or unset it to derive approval keys from ASANOHA_JWT_SECRET."
        )
    problems += _key_ring_problems(settings)
    if settings.jwt_algorithm not in SIGNING_ALGORITHMS:
        problems.append(
            f"ASANOHA_JWT_ALGORITHM is {settings.jwt_algorithm!r}: tokens are signed with a "
            f"shared secret, so it must be one of {', '.join(SIGNING_ALGORITHMS)} (unset: "
            "HS256)."
        )
    if settings.jwt_max_ttl_seconds < 1:
        problems.append(
            f"ASANOHA_JWT_MAX_TTL_SECONDS is {settings.jwt_max_ttl_seconds}: it must be a "
            "positive number of seconds (unset: 86400)."
        )
    elif not 0 < settings.jwt_ttl_seconds <= settings.jwt_max_ttl_seconds:
        problems.append(
            f"ASANOHA_JWT_TTL_SECONDS is {settings.jwt_ttl_seconds}: the platform would issue "
            "tokens it refuses. Set it between 1 and ASANOHA_JWT_MAX_TTL_SECONDS "
            f"({settings.jwt_max_ttl_seconds})."
        )
    return problems


def _secret_problems(settings: Settings) -> list[str]:
    """What is wrong with each of the secrets in ``ASANOHA_JWT_SECRET``."""
    problems: list[str] = []
    several = len(settings.jwt_secrets) > 1
    for number, secret in enumerate(settings.jwt_secrets, start=1):
        which = f"secret {number} of ASANOHA_JWT_SECRET" if several else "ASANOHA_JWT_SECRET"
        if secret in PUBLISHED_EXAMPLE_SECRETS and not settings.development:
            problems.append(
                f"{which} is {secret!r}, the example value of the deploy manifests: anyone "
                f"could mint an Admin token with it. Set it to a long random value "
                f"({SECRET_RECIPE})."
            )
        elif secret == PLACEHOLDER_JWT_SECRET and not settings.development:
            problems.append(
                f"{which} is the public placeholder: anyone could mint an Admin token with "
                f"it. Set it to a long random value ({SECRET_RECIPE})."
            )
        elif len(secret.encode()) < MIN_SECRET_BYTES:
            problems.append(
                f"{which} is {len(secret.encode())} bytes long: an HMAC secret needs at least "
                f"{MIN_SECRET_BYTES} bytes, or it can be guessed. Set it to a long random "
                f"value ({SECRET_RECIPE})."
            )
    return problems


def _key_ring_problems(settings: Settings) -> list[str]:
    """What is wrong with ``ASANOHA_JWT_KEYS``: a pair without its ``=``, a repeated
    ``kid``, a short secret."""
    problems: list[str] = []
    seen: set[str] = set()
    for kid, secret in settings.jwt_key_ring:
        if not kid or not secret:
            problems.append(
                "ASANOHA_JWT_KEYS holds an entry without a kid or a secret: write "
                "'kid=secret' pairs separated by commas."
            )
        elif kid in seen:
            problems.append(f"ASANOHA_JWT_KEYS names the kid {kid!r} twice.")
        elif len(secret.encode()) < MIN_SECRET_BYTES:
            problems.append(
                f"the secret of kid {kid!r} in ASANOHA_JWT_KEYS is {len(secret.encode())} "
                f"bytes long: it needs at least {MIN_SECRET_BYTES} bytes ({SECRET_RECIPE})."
            )
        seen.add(kid)
    return problems


def require_signing_settings(settings: Settings, *, checks_tokens: bool = True) -> None:
    """Raise ``InsecureSettingsError`` naming every ``signing_problems`` of ``settings``.

    Checked by the HTTP app when it is built, and at start by ``serve``, ``mcp`` and
    ``asanoha token``; ``worker`` and ``beat`` neither sign nor check bearer tokens
    (``checks_tokens=False``: they may run on the placeholder), but refuse a setting that is
    wrong, so a deployment's shared environment fails at the first process that starts.
    """
    problems = signing_problems(settings, checks_tokens=checks_tokens)
    if problems:
        raise InsecureSettingsError("\n".join(problems))


def with_process_secret(settings: Settings) -> Settings:
    """``settings`` with a random secret of this process in place of the placeholder.

    For embedded runs (the demo): tokens are valid only for the process that minted them.
    """
    if not settings.uses_placeholder_secret:
        return settings
    return settings.model_copy(update={"jwt_secret": secrets.token_urlsafe(32)})


def load_env_file(environ: MutableMapping[str, str] = os.environ) -> None:
    """Put the ``ASANOHA_*`` variables of the ``.env`` file ``Settings`` reads into
    ``environ`` where it has none of its own: the environment wins, as it does for settings.

    For what reads the environment and not ``Settings``: the command line's options
    (``--app`` from ``ASANOHA_APP``, ``--basic-auth`` from ``ASANOHA_FLOWER_BASIC_AUTH``),
    ``ASANOHA_DEVELOPMENT`` for tracebacks, and the processes a command starts.
    """
    for name, value in env_file_values().items():
        if name not in environ:
            environ[name] = value
            FILLED_FROM_ENV_FILE.add(name)


#: The variables ``load_env_file`` put into the environment: ``asanoha config`` names the
#: ``.env`` file, not the environment, as where they came from.
FILLED_FROM_ENV_FILE: set[str] = set()


def env_file_values() -> dict[str, str]:
    """The ``ASANOHA_*`` variables of the ``.env`` file in the working directory (names
    upper-cased, as settings' names are not case-sensitive); empty without the file."""
    path = Path(ENV_FILE)
    if not path.is_file():
        return {}
    encoding = Settings.model_config.get("env_file_encoding") or "utf-8"
    return {
        name.upper(): value
        for name, value in dotenv_values(path, encoding=encoding).items()
        if name.upper().startswith(VARIABLE_PREFIX) and value is not None
    }
