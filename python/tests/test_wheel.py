"""The package as users install it: a wheel built with ``python -m build``, in fresh virtual environments.

- without torch: the supervisor imports and validates a manifest;
- with torch (a venv that sees the system's site-packages): the example job records through the
  installed package and the installed supervisor replays its failing step to the planted line.

Needs the ``build`` package (skipped without it, except under CI=true). The build runs without
isolation, so no network is needed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import venv

import pytest

from conftest import EXAMPLE, FIXTURES, PY_DIR

pytestmark = pytest.mark.torch


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    if importlib.util.find_spec("build") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("the build package is missing; pip install -r python/requirements-test.txt")
        pytest.skip("the build package is not installed")
    out = tmp_path_factory.mktemp("dist")
    src = tmp_path_factory.mktemp("src") / "python"
    shutil.copytree(PY_DIR, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", ".pytest_cache"))
    proc = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (whl,) = list(out.glob("assertwatch_replay-*.whl"))
    return whl


def _venv(path, wheel, system_site_packages):
    venv.EnvBuilder(with_pip=True, system_site_packages=system_site_packages).create(path)
    py = os.path.join(path, "bin", "python")
    proc = subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return py


def _clean_env():
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def test_wheel_supervisor_without_torch(wheel, tmp_path):
    py = _venv(tmp_path / "venv", wheel, system_site_packages=False)
    env = _clean_env()
    probe = subprocess.run([py, "-c", "import importlib.util, assertwatch_replay.supervisor as s; "
                            "print(importlib.util.find_spec('torch') is None, s.__file__)"],
                           capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=60)
    assert probe.returncode == 0, probe.stderr
    no_torch, where = probe.stdout.split()
    assert no_torch == "True" and str(tmp_path / "venv") in where
    proc = subprocess.run([py, "-m", "assertwatch_replay", "validate", str(FIXTURES / "manifest-example.json")],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_wheel_records_and_replays(wheel, tmp_path):
    py = _venv(tmp_path / "venv", wheel, system_site_packages=True)
    env = _clean_env()
    project = tmp_path / "project"
    (project / "examples").mkdir(parents=True)
    job = project / "examples" / "tiny_train.py"
    shutil.copy(EXAMPLE, job)
    state = tmp_path / "state"
    run = subprocess.run([py, str(job), "--state-dir", str(state), "--log-file", str(tmp_path / "train.log"),
                          "--bug", "label", "--bad-step", "3", "--steps", "5", "--device", "cpu"],
                         capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=300)
    assert run.returncode != 0 and "IndexError" in run.stderr, run.stderr[-3000:]
    manifest = state / "tiny-train" / "rank-00000" / "ring" / "step-000000000003" / "manifest.json"
    out = tmp_path / "out"
    proc = subprocess.run([py, "-m", "assertwatch_replay", "run", "--manifest", str(manifest), "--mode", "cpu",
                           "--result", str(out / "result.json"), "--out-dir", str(out)],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "result.json").read_text())
    assert result["outcome"] == "reproduced_cpu_only", result
    marker = "# PLANTED-BUG: label"
    line = next(i for i, text in enumerate(job.read_text().splitlines(), 1) if text.rstrip().endswith(marker))
    assert result["failing_frame"]["file"] == str(job) and result["failing_frame"]["line"] == line
    where = subprocess.run([py, "-c", "import assertwatch_replay; print(assertwatch_replay.__file__)"],
                           capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=60).stdout
    assert str(tmp_path / "venv") in where  # the installed wheel, not this source tree
