"""The job row's one owner: every state, clock and transition of a row of ``asanoha_outbox``.

A job is a row; its Celery message is a pointer to it. The row moves
``pending -> running -> succeeded | failed | cancelled`` (``states``); waiting is ``pending``
with a clock and a claim condition, never a state of its own. Nothing outside this package
writes the table (``tests/unit/test_rule_homes.py`` checks it); callers decide which
transition to call.

- ``states``: the states, and the token of a row waiting for its key.
- ``clocks``: ``not_before``, ``relay_after``, ``published_at``, the rule relating them
  (``relay_time``), the claim's margin (``due_by``), and ``now`` (the one clock every
  transition reads).
- ``key_locks``: the transaction locks of a row's keys (``sequential``, ``max_per_tenant``),
  taken by enqueues, limited claims and wakes; in Python per key, or as one statement.
- ``guards``: the conditions statements compose: ``due``, ``held_by`` (this claim),
  ``running_under``, ``claimed_by``, ``pending_at``, ``unpublished``, ``waiting``,
  ``not_waiting``, ``not_paused``, ``key_free``, ``first_due_of_key``, ``slot_free``.

The transitions, one function each:

=====================  ==================================================================
enqueue / place        ``enqueue.place`` (the key rules: skip, replace, debounce,
                       unique_for, a sequential row written waiting), ``enqueue.write_outbox``
claim                  ``attempts.JobRows.claim`` (Postgres: ``PostgresJobRows``, the same
                       statement compiled once; a limited claim's locks and claim sent
                       as one transaction in one round trip)
end                    ``attempts.JobRows.end`` (succeeded, failed, retry, snooze, cancelled,
                       crashed; ``AttemptEnd.again_after`` for a pending end)
park / wake            ``attempts.JobRows.park``, ``attempts.JobRows.wake`` and
                       ``control.wake_next_of_keys`` (both ``control.wake_of_key``)
refuse                 ``attempts.JobRows.refuse`` (a delivery with no row or no tenant)
cancel                 ``control.cancel_job_row``, ``control.cancel_key`` (replace)
retry (operator)       ``control.retry_failed_row`` (the key rules: ``enqueue.answering_row``)
resume                 ``control.resume_rows``
recover lost attempts  ``attempts.recover_lost_attempts``
mark published         ``publishing.mark_published``, ``publishing.relay_outbox``,
                       ``publishing.resend_lost_messages``, ``publishing.requeue_unclaimed``,
                       ``publishing.published_by_waker`` (a woken row, in its wake)
prune                  ``retention.prune_finished`` (keeps the boot jobs' records)
=====================  ==================================================================
"""
