"""The operator console: server-rendered pages at ``/console`` for a tenant's system
administrators (jobs, consumers, writes), served by ``asanoha serve`` and, alone, by
``asanoha console``.

It reads and acts only through the bundled admin handlers (``job_admin.feature``,
``consumer_admin.feature``), dispatched through the service layer as the signed-in
principal: its access, gates and audit events are the API's, and it shows the signed-in
tenant's data only.
"""

from __future__ import annotations

from asanoha.console.routes import CONSOLE_PATH, build_console_app, console_routes, mount_console

__all__ = ["CONSOLE_PATH", "build_console_app", "console_routes", "mount_console"]
