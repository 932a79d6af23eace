"""Recorder: ring depth, atomic commit, hashes, weights-only loadable state, overhead.

Most tests run twice: with the background writer (flushed after each step, so what they check is
the entry a step leaves) and with the synchronous writer (``background=False``).
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import random
import subprocess
import sys
import textwrap
import time

import pytest

from assertwatch_replay import manifest as mf
from conftest import child_env

pytestmark = pytest.mark.torch


@pytest.fixture(params=["background", "sync"], autouse=True)
def mode(request):
    _MODE[0] = request.param
    return request.param


_MODE = ["background"]


class _Flushing:
    """A recorder whose record() waits for the commit, so tests can look at the entry at once."""

    def __init__(self, rec):
        self._rec = rec

    def record(self, *args, **kwargs):
        path = self._rec.record(*args, **kwargs)
        self._rec.flush()
        return path if path is None or os.path.exists(path) else None

    def __getattr__(self, name):
        return getattr(self._rec, name)


def _recorder(tmp_path, **kw):
    from assertwatch_replay import Recorder

    kw.setdefault("keep", 3)
    kw.setdefault("background", _MODE[0] == "background")
    return _Flushing(Recorder(tmp_path / "state", job="ring-test", entrypoint="mod:fn", cwd=tmp_path, **kw))


def _batch(step=0):
    import torch

    return {"tokens": torch.full((8, 16), step, dtype=torch.int64), "labels": torch.arange(8)}


def test_ring_keeps_last_k(tmp_path):
    rec = _recorder(tmp_path, keep=3)
    for step in range(7):
        rec.record(step=step, batch=_batch(step))
    names = sorted(os.listdir(rec.ring_dir))
    assert names == [f"step-{s:012d}" for s in (4, 5, 6)]
    assert [os.path.basename(p) for p in rec.entries()] == names
    latest = json.loads((tmp_path / "state/ring-test/rank-00000/latest.json").read_text())
    assert latest == {"step_dir": "ring/step-000000000006"}
    assert not [n for n in os.listdir(rec.job_dir) if ".tmp-" in n]


def test_manifest_hashes_and_sizes_match(tmp_path):
    import torch

    rec = _recorder(tmp_path)
    path = rec.record(step=3, epoch=1, batch=_batch(3), model=torch.nn.Linear(4, 2),
                      optimizer=None, extra_state={"scale": torch.tensor(2.0)})
    doc = mf.load(path)
    entry = os.path.dirname(path)
    roles = {f["role"] for f in doc["files"]}
    assert roles == {"batch", "rng", "model", "extra_state"}
    for f in doc["files"]:
        data = open(os.path.join(entry, f["path"]), "rb").read()
        assert len(data) == f["bytes"]
        assert hashlib.sha256(data).hexdigest() == f["sha256"]
    assert doc["model_state"] == {"kind": "full", "exact": True, "ref": None, "step": 3}
    assert doc["step"] == {"epoch": 1, "global_step": 3, "batch_index": None}
    assert doc["pid"] == os.getpid()
    assert set(os.listdir(entry)) == {f["path"] for f in doc["files"]} | {"manifest.json"}


def test_checkpoint_reference(tmp_path):
    rec = _recorder(tmp_path)
    doc = mf.load(rec.record(step=1, batch=_batch(), checkpoint_ref={"ref": "/ckpt/step-1000", "step": 1000}))
    assert doc["model_state"] == {"kind": "checkpoint_ref", "exact": False, "ref": "/ckpt/step-1000", "step": 1000}
    doc = mf.load(rec.record(step=2, batch=_batch()))
    assert doc["model_state"]["kind"] == "none"


def test_state_loads_weights_only_and_round_trips(tmp_path):
    import numpy as np
    import torch

    Pair = collections.namedtuple("Pair", "a b")
    batch = {
        "x": torch.randn(3, 4, requires_grad=True),
        "nested": [torch.arange(3), (torch.ones(2), "tag", 7, None)],
        "np": np.arange(5, dtype=np.int32),
        "pair": Pair(torch.zeros(1), 2.5),
    }
    rec = _recorder(tmp_path)
    path = rec.record(step=0, batch=batch)
    entry = os.path.dirname(path)
    loaded = torch.load(os.path.join(entry, "batch.pt"), weights_only=True)
    assert torch.equal(loaded["x"], batch["x"].detach())
    assert not loaded["x"].requires_grad
    assert torch.equal(loaded["nested"][0], torch.arange(3))
    assert loaded["nested"][1][1:] == ("tag", 7, None)
    assert torch.equal(loaded["np"], torch.arange(5, dtype=torch.int32))
    assert loaded["pair"]["b"] == 2.5
    rng = torch.load(os.path.join(entry, "rng.pt"), weights_only=True)
    assert rng["cpu"].dtype == torch.uint8
    assert {"cpu", "python", "numpy"} <= set(rng)


def test_rng_restore_reproduces_draws(tmp_path):
    """What the worker restores gives the same random draws the job would have made."""
    import numpy as np
    import torch

    from assertwatch_replay import worker

    torch.manual_seed(7)
    random.seed(7)
    np.random.seed(7)
    rec = _recorder(tmp_path)
    path = rec.record(step=0, batch=_batch())
    expected = (torch.rand(3), random.random(), np.random.rand())
    torch.rand(100), random.random(), np.random.rand(10)  # move every stream on
    rng = torch.load(os.path.join(os.path.dirname(path), "rng.pt"), weights_only=True)
    restored = worker._restore_rng(torch, rng, mf.load(path), use_cuda=False)
    assert set(restored) == {"cpu", "python", "numpy"}
    assert torch.equal(torch.rand(3), expected[0])
    assert random.random() == expected[1]
    assert np.random.rand() == expected[2]


def test_numpy_state_is_reread_only_when_it_moved():
    """The cheap path hands back the last full read only while numpy's global state is unchanged;
    every way of moving it (a draw, a legacy Gaussian, seeding, set_state) gives a fresh, exact
    state."""
    import numpy as np

    from assertwatch_replay import recorder

    watch = recorder._NumpyRngWatch()
    np.random.seed(11)
    first = watch.take(np)
    assert watch.take(np) is first, "unchanged state: no second full read"
    assert watch._addr is not None, "the struct layout check failed on this numpy"

    def same(a, b):
        return a[0] == b[0] and np.array_equal(a[1], b[1]) and a[2:] == b[2:]

    moves = [
        lambda: np.random.rand(),
        lambda: np.random.randint(0, 10, size=700),  # a full turn of the key
        lambda: np.random.standard_normal(),  # leaves a cached Gaussian behind (has_gauss)
        lambda: np.random.standard_normal(),  # and uses it
        lambda: np.random.seed(11),
        lambda: np.random.set_state(first),
        lambda: np.random.shuffle(list(range(5))),
    ]
    previous = first
    for move in moves:
        move()
        got = watch.take(np)
        assert same(got, np.random.get_state()), move
        if not same(previous, got):
            assert got is not previous
        previous = got
    # A Gaussian pair: the cached half must be captured so that a replay draws it again.
    np.random.seed(3)
    np.random.standard_normal()
    state = watch.take(np)
    assert state[3] == 1
    expected = np.random.standard_normal()
    np.random.set_state(state)
    assert np.random.standard_normal() == expected


def test_numpy_fast_path_turns_off_when_the_layout_is_not_as_expected(monkeypatch):
    import numpy as np

    from assertwatch_replay import recorder

    watch = recorder._NumpyRngWatch()
    monkeypatch.setattr(recorder._NumpyRngWatch, "KEY_WORDS", 623)  # a layout that does not match
    monkeypatch.setattr(recorder._NumpyRngWatch, "STRUCT_BYTES", 623 * 4 + 4)
    state = watch.take(np)
    assert watch._addr is None
    np.random.rand()
    assert watch.take(np)[2] == np.random.get_state()[2] != state[2]


def test_rejects_unsupported_batch(tmp_path):
    from assertwatch_replay import RecorderError

    rec = _recorder(tmp_path)
    with pytest.raises(RecorderError, match=r"batch\['obj'\]: cannot record"):
        rec.record(step=0, batch={"obj": object()})


@pytest.mark.parametrize(
    "kw,needle",
    [
        ({"keep": 0}, "keep"),
        ({"env": {"LD_PRELOAD": "x"}}, "replay.env.LD_PRELOAD"),
        ({"argv": ["python", "x.py"]}, "replay.argv"),
        ({"modes": ["gpu"]}, "replay.modes"),
    ],
)
def test_constructor_validates(tmp_path, kw, needle):
    from assertwatch_replay import RecorderError

    with pytest.raises((RecorderError, mf.ManifestError), match=needle):
        _recorder(tmp_path, **kw)


def test_bad_job_and_entrypoint(tmp_path):
    from assertwatch_replay import Recorder, RecorderError

    with pytest.raises(RecorderError, match="job name"):
        Recorder(tmp_path, job="../x", entrypoint="m:f")
    with pytest.raises(RecorderError, match="entrypoint"):
        Recorder(tmp_path, job="x", entrypoint="m.f")


CRASH_SCRIPT = textwrap.dedent(
    """
    import os, sys, torch
    from assertwatch_replay import Recorder, recorder
    root, crash_step = sys.argv[1], int(sys.argv[2])
    rec = Recorder(root, job="crash", keep=2, entrypoint="m:f", cwd=root, background=sys.argv[3] == "1")
    real = recorder.atomic_write_bytes
    def dying(path, data, *args, **kwargs):
        if path.endswith("manifest.json") and f"step-{crash_step:012d}" in path:
            os._exit(17)   # the process dies after the state files, before the commit
        return real(path, data, *args, **kwargs)
    recorder.atomic_write_bytes = dying
    for step in range(crash_step + 1):
        rec.record(step=step, batch={"x": torch.full((4,), step)})
        rec.flush()
    """
)


def test_crash_between_state_and_manifest_leaves_no_commit(tmp_path, mode):
    from assertwatch_replay import Recorder
    from assertwatch_replay.recorder import committed_entries

    script = tmp_path / "crash.py"
    script.write_text(CRASH_SCRIPT)
    root = tmp_path / "state"
    proc = subprocess.run([sys.executable, str(script), str(root), "3", "1" if mode == "background" else "0"], env=child_env(), capture_output=True)
    assert proc.returncode == 17, proc.stderr.decode()
    ring = root / "crash" / "rank-00000" / "ring"
    torn = ring / "step-000000000003"
    assert (torn / "batch.pt").exists() and (torn / "rng.pt").exists()
    assert not (torn / "manifest.json").exists()
    # The two previous commits are intact and are what a reader sees.
    assert [os.path.basename(p) for p in committed_entries(str(ring))] == ["step-000000000001", "step-000000000002"]
    latest = json.loads((root / "crash" / "rank-00000" / "latest.json").read_text())
    assert latest["step_dir"] == "ring/step-000000000002"
    # The next run of the job cleans the torn entry up once it commits its own.
    import torch

    rec = Recorder(root, job="crash", keep=2, entrypoint="m:f", cwd=root)
    rec.record(step=4, batch={"x": torch.zeros(1)})
    rec.flush()
    assert sorted(os.listdir(ring)) == ["step-000000000002", "step-000000000004"]


def test_restarted_job_prunes_by_commit_order(tmp_path):
    rec = _recorder(tmp_path, keep=2)
    for step in (10, 11, 12):
        rec.record(step=step, batch=_batch())
    time.sleep(0.01)
    rec.record(step=5, batch=_batch())  # restarted from an earlier checkpoint
    rec.record(step=6, batch=_batch())
    assert sorted(os.listdir(rec.ring_dir)) == ["step-000000000005", "step-000000000006"]


def test_same_step_recorded_twice_replaces_entry(tmp_path):
    import torch

    rec = _recorder(tmp_path)
    rec.record(step=1, batch={"x": torch.zeros(2)})
    path = rec.record(step=1, batch={"x": torch.ones(2)})
    loaded = torch.load(os.path.join(os.path.dirname(path), "batch.pt"), weights_only=True)
    assert torch.equal(loaded["x"], torch.ones(2))
    assert len(rec.entries()) == 1


def test_disabled_recorder_writes_nothing(tmp_path):
    rec = _recorder(tmp_path, enabled=False)
    assert rec.record(step=0, batch=_batch()) is None
    assert not (tmp_path / "state").exists()


def test_overhead_small_batch(tmp_path, record_property):
    """Overhead per step for a small batch (8x128 int64 tokens + labels), keep=3."""
    import torch

    rec = _recorder(tmp_path, keep=3)
    batch = {"tokens": torch.randint(0, 1000, (8, 128)), "labels": torch.randint(0, 10, (8,))}
    for step in range(5):  # warm up
        rec.record(step=step, batch=batch)
    times = []
    for step in range(5, 45):
        t = time.perf_counter()
        rec.record(step=step, batch=batch)
        times.append(time.perf_counter() - t)
    times.sort()
    median = times[len(times) // 2]
    record_property("record_median_s", median)
    print(f"recorder overhead: median {median * 1e3:.2f} ms, p90 {times[int(len(times) * 0.9)] * 1e3:.2f} ms")
    assert median < 0.5


def test_write_failure_does_not_stop_training(tmp_path, caplog):
    import shutil

    rec = _recorder(tmp_path)
    strict = _recorder(tmp_path, on_error="raise")
    shutil.rmtree(rec.ring_dir)
    open(rec.ring_dir, "w").close()  # the ring directory is now a file: every write fails
    assert rec.record(step=1, batch=_batch()) is None
    assert rec.write_errors == 1
    assert "could not record step 1" in caplog.text
    with pytest.raises(OSError):
        strict.record(step=2, batch=_batch())  # sync: raised here; background: by the flush
