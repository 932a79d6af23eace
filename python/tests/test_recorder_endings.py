"""How a process ends, and what the ring holds afterwards: each ending runs a real interpreter.

The child records five steps with a writer slowed down to 0.1 s per file, so most of them are still
queued when the ending comes. Exception, exit, SIGTERM and SIGINT must leave the last ``keep`` steps
committed (the step the job died in included); SIGKILL and a segfault lose only the queued steps,
and whatever is committed is valid.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from assertwatch_replay import manifest as mf
from conftest import child_env

pytestmark = pytest.mark.torch

CHILD = textwrap.dedent(
    """
    import os, signal, sys, time
    import torch
    from assertwatch_replay import Recorder, recorder

    root, ending = sys.argv[1], sys.argv[2]
    if ending == "sigterm-chained":
        def previous(signum, frame):
            open(os.path.join(root, "previous-handler-ran"), "w").close()
            sys.exit(3)
        signal.signal(signal.SIGTERM, previous)
    rec = Recorder(root, job="end", keep=3, entrypoint="m:f", cwd=root)
    real_save = recorder.Recorder._save
    def slow_save(self, *args, **kwargs):
        time.sleep(0.1)
        return real_save(self, *args, **kwargs)
    recorder.Recorder._save = slow_save
    first = 0
    if ending in ("sigkill", "segfault"):
        for step in range(3):
            rec.record(step=step, batch={"x": torch.full((4,), step)})
        rec.flush()  # 0, 1, 2 committed; 3 and 4 only queued when the process is killed
        first = 3
    for step in range(first, 5):
        rec.record(step=step, batch={"x": torch.full((4,), step)})
    print("recorded up to step 4", flush=True)
    if ending == "exception":
        raise RuntimeError("CUDA error: device-side assert triggered (simulated at a later sync)")
    if ending == "exit":
        sys.exit(0)
    if ending == "return":
        pass
    if ending in ("sigterm", "sigterm-chained"):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(60)
    if ending == "sigint":
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(60)
    if ending == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if ending == "segfault":
        import ctypes
        ctypes.string_at(0)
    """
)


def _run(tmp_path, ending):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    root = tmp_path / "state"
    root.mkdir()
    proc = subprocess.run([sys.executable, str(script), str(root), ending], env=child_env(),
                          capture_output=True, text=True, timeout=120)
    assert "recorded up to step 4" in proc.stdout, proc.stderr
    return proc, root


def _committed_valid(root):
    """Steps of the committed entries, after checking every file against its manifest."""
    from assertwatch_replay.fsutil import hash_file
    from assertwatch_replay.recorder import committed_entries

    ring = root / "end" / "rank-00000" / "ring"
    steps = []
    for entry in committed_entries(str(ring)):
        doc = mf.load(os.path.join(entry, "manifest.json"))
        for f in doc["files"]:
            assert hash_file(os.path.join(entry, f["path"])) == (f["bytes"], f["sha256"])
        steps.append(doc["step"]["global_step"])
    return steps


@pytest.mark.parametrize(
    "ending,expected_rc",
    [
        ("exception", 1),
        ("exit", 0),
        ("return", 0),
        ("sigterm", -signal.SIGTERM),
        ("sigterm-chained", 3),
        ("sigint", -signal.SIGINT),
    ],
)
def test_orderly_endings_commit_the_last_steps(tmp_path, ending, expected_rc):
    proc, root = _run(tmp_path, ending)
    assert proc.returncode == expected_rc, proc.stderr
    assert _committed_valid(root) == [2, 3, 4]  # keep=3: the step it died in and the two before
    if ending == "exception":
        assert "device-side assert triggered" in proc.stderr  # the previous excepthook still ran
    if ending == "sigterm-chained":
        assert (root / "previous-handler-ran").exists()


@pytest.mark.parametrize("ending,expected_rc", [("sigkill", -signal.SIGKILL), ("segfault", -signal.SIGSEGV)])
def test_abrupt_endings_lose_only_the_queued_steps(tmp_path, ending, expected_rc):
    proc, root = _run(tmp_path, ending)
    assert proc.returncode == expected_rc, proc.stderr
    assert _committed_valid(root) == [0, 1, 2]
