"""Ready-made callers for tests: two tenants, an admin, a plain user and a system admin.

None holds the ``system`` role: that is the platform's identity for jobs and consumers, which
no bearer token may carry (use ``SessionUser.system`` to call the service as a job does).
"""

from __future__ import annotations

from typing import ClassVar

from asanoha.platform.model import SessionUser

TENANT_A = "tenant-a"
TENANT_B = "tenant-b"


class TestUsers:
    """Plain ``SessionUser`` values; the stack's HTTP helper mints tokens for them."""

    # Not a test class, although pytest would collect it by its name.
    __test__ = False

    admin: ClassVar[SessionUser] = SessionUser.of("admin-a", TENANT_A, ["Admin"])
    user: ClassVar[SessionUser] = SessionUser.of("user-a", TENANT_A, ["User"])
    other_tenant: ClassVar[SessionUser] = SessionUser.of("admin-b", TENANT_B, ["Admin"])
    system_admin: ClassVar[SessionUser] = SessionUser.of(
        "system-admin-a", TENANT_A, ["Admin", "SystemAdmin"]
    )
    anonymous: ClassVar[SessionUser] = SessionUser.anonymous(TENANT_A)
