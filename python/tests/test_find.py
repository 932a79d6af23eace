"""``run --find-under``: the harness finds the step itself, as a replay pod does when the debug
state sits on a volume the daemon cannot see."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys

import pytest

from conftest import EXAMPLE, child_env, manifest_for, planted_line

from assertwatch_replay import find as find_mod

pytestmark = pytest.mark.torch


def run_find(state, out_dir, *extra):
    result_path = out_dir / "result.json"
    argv = [sys.executable, "-m", "assertwatch_replay", "run", "--find-under", str(state),
            "--mode", "cpu", "--result", str(result_path), "--out-dir", str(out_dir), *extra]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=child_env(),
                          cwd=str(out_dir.parent))
    result = json.loads(result_path.read_text()) if result_path.exists() else None
    return proc, result


def created_at(state, step):
    return json.loads(manifest_for(state, step).read_text())["created_at"]


def copy_state(run, tmp_path):
    state = tmp_path / "state"
    shutil.copytree(run["state"], state, symlinks=True)
    return state


def test_finds_the_newest_step_of_the_pod_and_reproduces(job_runs, tmp_path):
    run = job_runs("label")
    proc, result = run_find(run["state"], tmp_path / "out", "--pod", socket.gethostname(), "--rank", "0")
    assert proc.returncode == 0, proc.stderr
    assert result["outcome"] == "reproduced_cpu_only", result
    assert result["step"]["global_step"] == 5
    assert result["manifest"] == str(manifest_for(run["state"], 5))
    frame = result["failing_frame"]
    assert (frame["file"], frame["line"]) == (str(EXAMPLE), planted_line("label"))


def test_before_selects_the_step_at_the_incident(job_runs, tmp_path):
    run = job_runs("label")
    proc, result = run_find(run["state"], tmp_path / "out", "--before", created_at(run["state"], 4))
    assert proc.returncode == 0, proc.stderr
    assert result["step"]["global_step"] == 4
    assert result["outcome"] == "not_reproduced"


def test_another_pod_finds_nothing_and_says_why(job_runs, tmp_path):
    run = job_runs("label")
    proc, result = run_find(run["state"], tmp_path / "out", "--pod", "someone-else-0")
    assert proc.returncode == 0, proc.stderr
    assert result["outcome"] == "skipped" and result["reason"] == "no_debug_state"
    assert "of another pod or rank" in result["detail"]
    assert result["manifest"] is None


def test_torn_newest_entry_falls_back_to_the_one_before(job_runs, tmp_path):
    state = copy_state(job_runs("label"), tmp_path)
    (manifest_for(state, 5).parent / "batch.pt").unlink()
    path, doc = find_mod.find(str(state))
    assert doc["step"]["global_step"] == 4 and path == str(manifest_for(state, 4))
    s = find_mod.search(str(state))
    assert s.incomplete == 1 and s.examined >= 2


def test_broken_manifest_is_passed_over_and_counted(job_runs, tmp_path):
    state = copy_state(job_runs("label"), tmp_path)
    manifest_for(state, 5).write_text('{"schema": ')
    s = find_mod.search(str(state))
    assert s.doc["step"]["global_step"] == 4
    assert len(s.rejected) == 1 and "not valid JSON" in s.rejected[0]


def test_symlinked_job_directory_is_not_followed(job_runs, tmp_path):
    outside = copy_state(job_runs("label"), tmp_path)
    root = tmp_path / "root"
    root.mkdir()
    (root / "tiny-train").symlink_to(outside / "tiny-train")
    with pytest.raises(find_mod.NotFound) as err:
        find_mod.find(str(root))
    assert "0 manifest(s)" in str(err.value)


def test_not_a_directory_and_usage_errors(tmp_path):
    with pytest.raises(find_mod.NotFound):
        find_mod.find(str(tmp_path / "absent"))
    base = [sys.executable, "-m", "assertwatch_replay", "run", "--mode", "cpu",
            "--result", str(tmp_path / "r.json"), "--out-dir", str(tmp_path / "o")]
    for extra in (["--manifest", "m.json", "--find-under", str(tmp_path)],
                  ["--manifest", "m.json", "--pod", "p"],
                  ["--find-under", str(tmp_path), "--before", "yesterday"]):
        proc = subprocess.run(base + extra, capture_output=True, text=True, env=child_env())
        assert proc.returncode == 2, (extra, proc.stderr)
        assert "Traceback" not in proc.stderr


def test_parse_time_keeps_microseconds_and_refuses_offsets():
    t = find_mod.parse_time("2026-12-03T05:20:57.123456789Z")
    assert t.microsecond == 123456
    for bad in ("2026-12-03T05:20:57+00:00", "2026-12-03 05:20:57Z", ""):
        with pytest.raises(ValueError):
            find_mod.parse_time(bad)
