"""A drain pass on Redis costs the same whatever other applications hold in the shared
``unacked`` hash: it never reads the hash."""

from __future__ import annotations

import json
from typing import Any

import redis

from asanoha.platform.model import Feature
from tests.integration.workers.conftest import job_runs

#: Entries other applications' workers hold in the shared ``unacked`` hash.
FOREIGN_ENTRIES = 20_000
#: Commands that read a whole hash (or walk it).
HASH_READS = ("hvals", "hgetall", "hkeys", "hscan", "hlen")


def _calls(client: redis.Redis, command: str) -> int:
    stats: dict[str, Any] = client.info("commandstats")
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


def test_a_drain_pass_reads_nothing_of_the_shared_unacked_hash(private_redis, asanoha_stack):
    feature = Feature("probe")
    seen: list[int] = []

    @feature.job("count", manual=True)
    def count(payload: dict[str, Any], ctx: Any) -> None:
        seen.append(payload["n"])

    # private_redis first: it is torn down after the stack, which deletes its queues there.
    stack = asanoha_stack(features=[feature], jobs=True, settings={"broker_url": private_redis.url})
    client = redis.Redis.from_url(private_redis.url)
    try:
        foreign = {
            f"foreign-{n}": json.dumps([{"body": "x" * 200}, "other", "other.worker"])
            for n in range(FOREIGN_ENTRIES)
        }
        client.hset("unacked", mapping=foreign)
        client.config_resetstat()
        for n in range(3):
            stack.dispatch_job("probe:job:count", {"n": n})
        stack.drain()
        stack.drain()
        assert sorted(seen) == [0, 1, 2]
        assert [run.status for run in job_runs(stack)] == ["succeeded"] * 3
        assert _calls(client, "llen") > 0
        assert {command: _calls(client, command) for command in HASH_READS} == dict.fromkeys(
            HASH_READS, 0
        )
        assert client.hlen("unacked") == FOREIGN_ENTRIES
    finally:
        client.close()
