"""The process's metrics are registered once, also when many threads write first at once."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_concurrent_first_writes_register_the_metrics_once() -> None:
    # A fresh interpreter: in this one the metrics may be registered already.
    script = textwrap.dedent(
        """
        import threading
        from asanoha.platform import metrics

        barrier = threading.Barrier(16)
        errors = []

        def first_write():
            barrier.wait()
            try:
                metrics.count_write("x:write:y", "ok")
            except Exception as error:
                errors.append(repr(error))

        threads = [threading.Thread(target=first_write) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == [], errors
        value = metrics.platform_metrics().writes.labels("x:write:y", "ok", "")._value.get()
        assert value == 16, value
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
