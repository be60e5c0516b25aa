"""The HTTP clients of ``bench/fleet.py``: processes of their own, each with threads that
post creates over keep-alive connections with ``http.client`` (much less CPU per request
than httpx: on a 2-core machine the clients share the CPUs with the servers they drive)."""

from __future__ import annotations

import http.client
import json
import threading
import time
from typing import Any


def client_process(
    host: str,
    port: int,
    path: str,
    token: str,
    threads: int,
    warm_up: float,
    seconds: float,
    offset: int,
    ready: Any,
    start: Any,
    results: Any,
) -> None:
    """Warm up, say ``ready``, wait for ``start``, post for ``seconds``; put (requests,
    seconds) on ``results`` (or the error's text)."""
    try:
        _run(host, port, path, token, threads, warm_up, offset)
        ready.put(True)
        start.wait()
        results.put(_run(host, port, path, token, threads, seconds, offset))
    except Exception as error:  # the parent reports it
        ready.put(False)
        results.put(f"{type(error).__name__}: {error}")


def _run(
    host: str,
    port: int,
    path: str,
    token: str,
    threads: int,
    seconds: float,
    offset: int,
) -> tuple[int, float]:
    counts = [0] * threads
    errors: list[BaseException] = []
    stop = threading.Event()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def loop(index: int) -> None:
        conn = http.client.HTTPConnection(host, port, timeout=30)
        n = 0
        try:
            while not stop.is_set():
                number = offset + (n * threads + index)
                body = json.dumps({"title": f"note {number}", "amount": number})
                conn.request("POST", path, body=body, headers=headers)
                response = conn.getresponse()
                text = response.read()
                if response.status != 200:
                    raise RuntimeError(f"{path}: {response.status} {text[:300]!r}")
                n += 1
        except BaseException as error:
            errors.append(error)
            stop.set()
        finally:
            counts[index] = n
            conn.close()

    workers = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(threads)]
    began = time.perf_counter()
    for worker in workers:
        worker.start()
    stop.wait(seconds)
    stop.set()
    for worker in workers:
        worker.join()
    if errors:
        raise errors[0]
    return sum(counts), time.perf_counter() - began
