from asanoha.workers.pending import PendingWork


def test_pending_work_adds_up_everything_that_waits():
    pending = PendingWork(queued={"p.worker": 2, "p.api": 1}, reserved=3, unfinished=1)
    assert pending.total == 7
    assert PendingWork({"p.worker": 0}, 0, 0).total == 0
    assert "p.worker=2" in pending.describe()
    assert "reserved by workers 3" in pending.describe()
    assert "job rows pending or running 1" in pending.describe()
