"""The background writer: newest-wins queue, in-place changes after record(), deferred errors."""

from __future__ import annotations

import logging
import os
import threading
import time

import pytest

from assertwatch_replay import manifest as mf

pytestmark = pytest.mark.torch


def _gated(tmp_path, **kw):
    """A background recorder whose writer waits for ``gate`` before each step."""
    from assertwatch_replay import Recorder

    kw.setdefault("keep", 3)
    rec = Recorder(tmp_path / "state", job="bg", entrypoint="m:f", cwd=tmp_path, **kw)
    gate = threading.Event()
    handler = rec._writer._handler

    def wait_then_write(item):
        gate.wait(30)
        return handler(item)

    rec._writer._handler = wait_then_write
    return rec, gate


def _load_batch(rec, step):
    import torch

    path = os.path.join(rec.ring_dir, f"step-{step:012d}", "batch.pt")
    return torch.load(path, weights_only=True)


def test_slow_writer_drops_oldest_and_keeps_newest(tmp_path, caplog):
    import torch

    rec, gate = _gated(tmp_path, queue_size=2)
    with caplog.at_level(logging.WARNING, logger="assertwatch_replay"):
        rec.record(step=0, batch={"x": torch.zeros(2)})
        deadline = time.monotonic() + 10
        while not rec._writer._busy and time.monotonic() < deadline:  # the writer holds step 0
            time.sleep(0.001)
        for step in range(1, 10):
            rec.record(step=step, batch={"x": torch.full((2,), step)})
        gate.set()
        assert rec.flush(30)
    stats = rec.stats()
    # step 0 was taken by the writer at once; 1..7 were pushed out by newer ones; 8 and 9 were queued.
    assert [os.path.basename(p) for p in rec.entries()] == ["step-000000000000", "step-000000000008",
                                                           "step-000000000009"]
    assert stats["steps_dropped"] == 7 and stats["steps_written"] == 3 and stats["max_queued"] == 2
    assert caplog.text.count("writer fell behind") == 1  # logged once, counted always


def test_in_place_change_after_record_drops_the_step_then_copies(tmp_path, caplog):
    import torch

    rec, gate = _gated(tmp_path)
    x = torch.zeros(4)
    with caplog.at_level(logging.WARNING, logger="assertwatch_replay"):
        rec.record(step=0, batch={"x": x})
        x.add_(1)  # the loop normalises the batch in place after record()
        gate.set()
        rec.flush()
    assert rec.entries() == []
    assert rec.stats()["steps_mutated"] == 1 and rec.copy == "always"
    assert "batch['x'] was modified in place after record(step=0)" in caplog.text
    # From now on the recorder copies: the in-place change no longer reaches the recorded batch.
    gate.clear()
    rec.record(step=1, batch={"x": x})
    x.mul_(10)
    gate.set()
    rec.flush()
    assert torch.equal(_load_batch(rec, 1)["x"], torch.ones(4))


def test_in_place_change_through_a_grad_tensor_is_seen(tmp_path):
    import torch

    rec, gate = _gated(tmp_path)
    w = torch.zeros(3, requires_grad=True)
    rec.record(step=0, batch={"w": w})
    with torch.no_grad():
        w.add_(1)  # bumps the version counter that the recorder's detached view shares
    gate.set()
    rec.flush()
    assert rec.stats()["steps_mutated"] == 1 and rec.entries() == []


def test_copy_always_records_the_value_at_record_time(tmp_path):
    import torch

    rec, gate = _gated(tmp_path, copy="always")
    x = torch.arange(4)
    rec.record(step=0, batch={"x": x})
    x.zero_()
    gate.set()
    rec.flush()
    assert torch.equal(_load_batch(rec, 0)["x"], torch.arange(4))
    assert rec.stats()["steps_mutated"] == 0


def test_new_tensor_per_step_is_not_a_mutation(tmp_path):
    import torch

    rec, gate = _gated(tmp_path)
    batch = {"x": torch.zeros(2)}
    rec.record(step=0, batch=batch)
    batch["x"] = torch.ones(2)  # rebinding the dict entry leaves the recorded tensor alone
    gate.set()
    rec.flush()
    assert rec.stats()["steps_mutated"] == 0
    assert torch.equal(_load_batch(rec, 0)["x"], torch.zeros(2))


def test_weights_are_copied_on_record(tmp_path):
    import torch

    rec, gate = _gated(tmp_path)
    model = torch.nn.Linear(2, 1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rec.record(step=0, batch={"x": torch.zeros(1)}, model=model)
    with torch.no_grad():
        model.weight.add_(5)  # the optimizer step that follows record()
    gate.set()
    rec.flush()
    saved = torch.load(os.path.join(rec.ring_dir, "step-000000000000", "model.pt"), weights_only=True)
    assert all(torch.equal(saved[k], before[k]) for k in before)
    assert rec.stats()["steps_mutated"] == 0


def test_unsupported_batch_raises_on_the_training_thread(tmp_path):
    from assertwatch_replay import RecorderError

    rec, gate = _gated(tmp_path)
    gate.set()
    with pytest.raises(RecorderError, match=r"batch\['obj'\]"):
        rec.record(step=0, batch={"obj": object()})
    with pytest.raises(RecorderError, match="step must be a non-negative integer"):
        rec.record(step=-1, batch={})


def test_manifest_of_background_entry_validates(tmp_path):
    import torch

    rec, gate = _gated(tmp_path)
    gate.set()
    path = rec.record(step=7, epoch=2, batch={"x": torch.zeros(1)}, batch_index=3)
    rec.flush()
    doc = mf.load(path)
    assert doc["step"] == {"epoch": 2, "global_step": 7, "batch_index": 3}
    assert doc["pid"] == os.getpid()


def test_writer_flush_and_close():
    from assertwatch_replay.writer import BackgroundWriter

    seen = []
    w = BackgroundWriter(seen.append, maxsize=4)
    for i in range(3):
        w.put(i)
    assert w.flush(10) and seen == [0, 1, 2] and w.pending() == 0
    assert w.close(10)
    w.put(3)  # starts a new thread
    assert w.flush(10) and seen == [0, 1, 2, 3]
    w.close(10)


def test_writer_lock_free_put_loses_no_wakeup_and_counts_every_item():
    """Many puts racing the writer: every item is written or counted as dropped, none hangs."""
    from assertwatch_replay.writer import BackgroundWriter

    seen = []

    def handler(item):
        if item % 7 == 0:
            time.sleep(0.0005)  # let the queue fill now and then, so drops happen too
        seen.append(item)

    w = BackgroundWriter(handler, maxsize=2)
    n = 5000
    for i in range(n):
        w.put(i)
        if i % 97 == 0:
            time.sleep(0.001)  # the writer goes idle and must be woken by the next put
    assert w.flush(30)
    assert w.written + w.dropped == n and len(seen) == w.written
    assert seen == sorted(seen) and seen[-1] == n - 1  # oldest dropped first; the newest survives
    assert w.max_queued <= 2
    assert w.close(10)


def test_writer_in_forked_child_starts_empty(tmp_path):
    from assertwatch_replay.writer import BackgroundWriter

    gate = threading.Event()
    w = BackgroundWriter(lambda item: gate.wait(30), maxsize=4)
    w.put(1)
    w.put(2)  # queued behind the blocked item
    pid = os.fork()
    if pid == 0:  # child: an empty writer with no thread; a put starts a fresh one
        ok = not w._queue and w._thread is None and w.flush(1)
        done = []
        w._handler = done.append
        w.put(3)
        ok = ok and w.flush(10) and done == [3]
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    gate.set()
    assert w.flush(10)
    assert os.WEXITSTATUS(status) == 0
