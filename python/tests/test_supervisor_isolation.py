"""The supervisor must never import torch: it has to start fast and outlive a dying worker."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

from conftest import child_env, manifest_for, run_replay

# Runs the supervisor with an import hook that makes any import of torch fail, and checks at exit
# that torch never reached sys.modules. The worker is a separate process without the hook.
BLOCKER = textwrap.dedent(
    """
    import sys, runpy
    class NoTorch:
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ImportError("the supervisor tried to import " + name)
            return None
    sys.meta_path.insert(0, NoTorch())
    if sys.argv[1:3] == ["-m", "assertwatch_replay"]:  # run_replay's argv, after "-c CODE"
        del sys.argv[1:3]
    try:
        runpy.run_module("assertwatch_replay", run_name="__main__", alter_sys=True)
    finally:
        leaked = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
        if leaked:
            print("TORCH-LEAKED", leaked, file=sys.stderr)
            sys.stderr.flush()
    """
)


@pytest.mark.torch
def test_supervisor_runs_a_replay_without_importing_torch(job_runs, tmp_path):
    run = job_runs("label")
    proc, result = run_replay(manifest_for(run["state"], 5), "cpu", tmp_path / "out",
                              prefix=[sys.executable, "-c", BLOCKER])
    assert "TORCH-LEAKED" not in proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert result["outcome"] == "reproduced_cpu_only"  # the worker, in its own process, had torch


@pytest.mark.torch
def test_importtime_of_supervisor_lists_no_torch(job_runs, tmp_path):
    run = job_runs("label")
    proc, result = run_replay(manifest_for(run["state"], 5), "cpu", tmp_path / "out",
                              prefix=[sys.executable, "-X", "importtime"])
    assert result["outcome"] == "reproduced_cpu_only"
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
    assert "assertwatch_replay.supervisor" in imported
    assert not [m for m in imported if m == "torch" or m.startswith("torch.")]


def test_package_import_and_validate_do_not_import_torch():
    code = (
        "import sys, assertwatch_replay, assertwatch_replay.supervisor, assertwatch_replay.worker;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy')))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_supervisor_starts_quickly():
    best = None
    for _ in range(3):
        t = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "assertwatch_replay", "--version"],
                              capture_output=True, text=True, env=child_env())
        elapsed = time.monotonic() - t
        best = elapsed if best is None else min(best, elapsed)
        assert proc.returncode == 0 and "assertwatch-replay" in proc.stdout
    print(f"supervisor start: {best * 1000:.0f} ms")
    assert best < 2.0
