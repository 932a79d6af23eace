"""Shared fixtures and functions for the assertwatch-replay tests.

Tests that need torch are marked ``torch``; they are skipped when torch is missing, except under
CI=true, where a missing torch is a failure rather than a silent skip.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PY_DIR = Path(__file__).resolve().parent.parent
EXAMPLE = PY_DIR / "examples" / "tiny_train.py"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

try:
    import torch  # noqa: F401

    HAVE_TORCH = True
except ImportError:  # pragma: no cover - depends on the environment
    HAVE_TORCH = False


def pytest_collection_modifyitems(config, items):
    if HAVE_TORCH:
        return
    if os.environ.get("CI") == "true":
        return  # let them fail loudly
    skip = pytest.mark.skip(reason="torch is not installed")
    for item in items:
        if "torch" in item.keywords:
            item.add_marker(skip)


def child_env(**extra):
    """Environment for subprocesses: this source tree first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PY_DIR)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.pop("CUDA_LAUNCH_BLOCKING", None)
    env.update(extra)
    return env


def planted_line(bug: str) -> int:
    marker = f"# PLANTED-BUG: {bug}"
    for number, line in enumerate(EXAMPLE.read_text().splitlines(), start=1):
        if line.rstrip().endswith(marker):
            return number
    raise AssertionError(f"no line marked {marker!r} in {EXAMPLE}")


def run_replay(manifest, mode, out_dir, *extra_args, timeout=120, prefix=None, env=None):
    """Run the supervisor; return (CompletedProcess, result dict or None)."""
    out_dir = Path(out_dir)
    result_path = out_dir / "result.json"
    argv = list(prefix or [sys.executable]) + [
        "-m", "assertwatch_replay", "run",
        "--manifest", str(manifest), "--mode", mode,
        "--result", str(result_path), "--out-dir", str(out_dir),
        *extra_args,
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env or child_env(), cwd=str(out_dir.parent))
    result = json.loads(result_path.read_text()) if result_path.exists() else None
    return proc, result


def run_job(state_dir, log_file, bug, bad_step=5, steps=8, extra=()):
    argv = [sys.executable, str(EXAMPLE), "--state-dir", str(state_dir), "--log-file", str(log_file),
            "--bug", bug, "--bad-step", str(bad_step), "--steps", str(steps), "--device", "cpu", *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=child_env(CUDA_VISIBLE_DEVICES=""))


def manifest_for(state_dir, step, job="tiny-train", rank=0):
    return Path(state_dir) / job / f"rank-{rank:05d}" / "ring" / f"step-{step:012d}" / "manifest.json"


@pytest.fixture(scope="session")
def job_runs(tmp_path_factory):
    """Runs of the example job, one per planted bug, made on first use and shared."""
    cache = {}

    def get(bug):
        if bug not in cache:
            base = tmp_path_factory.mktemp(f"job-{bug}")
            proc = run_job(base / "state", base / "train.log", bug)
            cache[bug] = {"proc": proc, "state": base / "state", "log": base / "train.log", "base": base}
        return cache[bug]

    return get


@pytest.fixture
def synthetic_state(tmp_path):
    """Record one step whose entrypoint is the given source code, in a fresh module."""

    def make(source: str, module="replay_probe", batch=None, modes=None):
        import torch

        from assertwatch_replay import Recorder

        code_dir = tmp_path / "code"
        code_dir.mkdir(exist_ok=True)
        (code_dir / f"{module}.py").write_text(textwrap.dedent(source))
        rec = Recorder(tmp_path / "state", job="probe", keep=2, entrypoint=f"{module}:replay",
                       cwd=code_dir, modes=modes)
        path = rec.record(step=1, batch=batch if batch is not None else {"x": torch.arange(4)})
        rec.close()  # the background writer commits the entry
        return Path(path)

    return make


def load_script(path: Path, name: str):
    """A script that is not a package module (`scripts/gen-*.py`), imported under `name`."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
