"""The replay harness end to end: the example job's planted bugs, and the ways a replay can fail."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

from conftest import EXAMPLE, child_env, manifest_for, planted_line, run_replay

pytestmark = pytest.mark.torch

PLANTED = {
    "label": ("IndexError", "Target 5 is out of bounds."),
    "token": ("IndexError", "index out of range in self"),
    "index": ("RuntimeError", "index 17 is out of bounds for dimension 1 with size 16"),
    "bce": ("RuntimeError", "all elements of input should be between 0 and 1"),
}


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_planted_bug_reproduced_on_cpu(bug, job_runs, tmp_path):
    run = job_runs(bug)
    exc_type, text = PLANTED[bug]
    assert run["proc"].returncode != 0, "the job should have died at the bad step"
    assert text in run["log"].read_text()
    proc, result = run_replay(manifest_for(run["state"], 5), "cpu", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert result["outcome"] == "reproduced_cpu_only", result
    assert result["exception"]["type"] == exc_type
    assert text in result["exception"]["message"]
    frame = result["failing_frame"]
    assert (frame["file"], frame["line"]) == (str(EXAMPLE), planted_line(bug))
    assert f"PLANTED-BUG: {bug}" in frame["code"]
    assert result["user_frames"][-1]["line"] == planted_line(bug)
    assert result["step"]["global_step"] == 5
    assert result["determinism"]["rng_restored"] == ["cpu", "python", "numpy"]
    assert result["mode_env"] == {"CUDA_VISIBLE_DEVICES": "", "TORCH_COMPILE_DISABLE": "1"}
    assert result["dsa"] == {"requested": False, "effective": False, "evidence": "not requested in this mode"}
    assert set(result["phases_s"]) >= {"validate", "import", "load", "step", "worker"}
    assert len((tmp_path / "out" / "result.json").read_bytes()) <= 256 * 1024


def test_step_before_the_bad_one_is_clean(job_runs, tmp_path):
    run = job_runs("label")
    _, result = run_replay(manifest_for(run["state"], 4), "cpu", tmp_path / "out")
    assert result["outcome"] == "not_reproduced"
    assert result["exception"] is None and result["failing_frame"] is None


def test_clean_job_not_reproduced_and_same_loss(job_runs, tmp_path):
    """No bug: nothing to reproduce, and the replayed step computes the job's loss exactly
    (weights, optimizer state and dropout RNG all restored)."""
    run = job_runs("none")
    assert run["proc"].returncode == 0, run["proc"].stderr
    proc, result = run_replay(manifest_for(run["state"], 7), "cpu", tmp_path / "out")
    assert result["outcome"] == "not_reproduced", result
    job_loss = re.search(r"step 7 loss (\S+)", run["log"].read_text()).group(1)
    replay_out = (tmp_path / "out" / "stdout.log").read_text()
    assert f"replay step 7 loss {job_loss}" in replay_out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


HANG = """
import os, signal, subprocess, sys, time
def replay(batch, state, device, ctx):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)   # make the harness escalate to SIGKILL
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    with open(os.path.join(ctx.out_dir, "pids.txt"), "w") as fh:
        fh.write(f"{os.getpid()} {child.pid}\\n")
    time.sleep(300)
"""


def test_hang_times_out_and_kills_the_group(synthetic_state, tmp_path):
    manifest = synthetic_state(HANG)
    out = tmp_path / "out"
    t = time.monotonic()
    # The limit leaves the worker time to import torch on a loaded machine before it hangs.
    proc, result = run_replay(manifest, "cpu", out, "--timeout", "20", "--grace", "1")
    elapsed = time.monotonic() - t
    assert proc.returncode == 0, proc.stderr
    assert result["outcome"] == "timeout" and result["reason"] == "deadline"
    assert elapsed < 45
    assert (out / "pids.txt").exists(), f"the entrypoint never started: {result['phases_s']}"
    pids = [int(p) for p in (out / "pids.txt").read_text().split()]
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if _alive(p)], "a process of the worker's group survived"


def test_corrupted_state_is_harness_error(synthetic_state, tmp_path):
    manifest = synthetic_state("def replay(batch, state, device, ctx):\n    pass\n")
    batch = manifest.parent / "batch.pt"
    data = bytearray(batch.read_bytes())
    data[len(data) // 2] ^= 0xFF
    batch.write_bytes(bytes(data))
    proc, result = run_replay(manifest, "cpu", tmp_path / "out")
    assert proc.returncode == 0
    assert result["outcome"] == "harness_error" and result["reason"] == "state_hash_mismatch"
    assert "batch file" in result["detail"] and "sha256" in result["detail"]


def test_missing_state_file_is_harness_error(synthetic_state, tmp_path):
    manifest = synthetic_state("def replay(batch, state, device, ctx):\n    pass\n")
    (manifest.parent / "rng.pt").unlink()
    _, result = run_replay(manifest, "cpu", tmp_path / "out")
    assert result["outcome"] == "harness_error" and result["reason"] == "state_missing"


def test_broken_manifest_still_writes_a_result(tmp_path):
    bad = tmp_path / "manifest.json"
    bad.write_text('{"schema": "assertwatch.debug-state/v1", ')
    proc, result = run_replay(bad, "cpu", tmp_path / "out")
    assert proc.returncode == 0
    assert result["outcome"] == "harness_error" and result["reason"] == "manifest_invalid"
    assert "not valid JSON" in result["detail"]
    assert "Traceback" not in proc.stderr


def test_print_result_puts_the_result_last_on_stdout(tmp_path):
    bad = tmp_path / "manifest.json"
    bad.write_text('{"schema": "assertwatch.debug-state/v1", ')
    proc, result = run_replay(bad, "cpu", tmp_path / "out", "--print-result")
    assert proc.returncode == 0
    last = proc.stdout.rstrip("\n").splitlines()[-1]
    assert json.loads(last) == result
    assert result["reason"] == "manifest_invalid"
    # Without the flag: no JSON line.
    proc, _ = run_replay(bad, "cpu", tmp_path / "out2")
    assert not any(line.startswith("{") for line in proc.stdout.splitlines())
    # With --quiet, the JSON line alone.
    proc, result = run_replay(bad, "cpu", tmp_path / "out3", "--print-result", "--quiet")
    assert [json.loads(line) for line in proc.stdout.splitlines()] == [result]


def test_missing_manifest(tmp_path):
    proc, result = run_replay(tmp_path / "nope" / "manifest.json", "cpu", tmp_path / "out")
    assert proc.returncode == 0
    assert result["outcome"] == "harness_error" and "cannot open" in result["detail"]


def test_bad_arguments_exit_2_without_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "assertwatch_replay", "run", "--mode", "gpu"],
                          capture_output=True, text=True, env=child_env())
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


SEGFAULT = """
import ctypes
def crash():
    ctypes.string_at(0)          # SIGSEGV inside the step
def replay(batch, state, device, ctx):
    crash()
"""


def test_segfault_without_report_still_gives_result(synthetic_state, tmp_path):
    manifest = synthetic_state(SEGFAULT)
    proc, result = run_replay(manifest, "cpu", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert result["outcome"] == "harness_error" and result["reason"] == "worker_died"
    assert result["worker"]["signal"] == 11
    assert "Segmentation fault" in result["detail"]
    # faulthandler's stack on fd 2 still names the user's frames.
    assert [f["function"] for f in result["user_frames"]][-2:] == ["replay", "crash"]
    assert result["failing_frame"]["line"] == 4


OS_EXIT_AFTER_ASSERT_LINES = """
import os
LINE = b"/src/aten/native/cuda/Loss.cu:95: operator(): block: [0,0,0], thread: [%d,0,0] Assertion `t >= 0 && t < n_classes` failed.\\n"
def replay(batch, state, device, ctx):
    for t in range(40):
        os.write(2, LINE % t)    # straight to fd 2, as CUDA's device printf does
    os._exit(3)
"""


def test_os_exit_without_report_and_fd2_capture(synthetic_state, tmp_path):
    manifest = synthetic_state(OS_EXIT_AFTER_ASSERT_LINES)
    proc, result = run_replay(manifest, "cpu", tmp_path / "out")
    assert proc.returncode == 0
    assert result["outcome"] == "harness_error" and result["reason"] == "worker_died"
    assert result["worker"]["exit_code"] == 3
    [found] = result["kernel_assertions"]
    assert (found["file"], found["line"], found["threads"]) == ("/src/aten/native/cuda/Loss.cu", 95, 40)
    assert found["assertion"] == "t >= 0 && t < n_classes"


FLOOD = """
import os
def replay(batch, state, device, ctx):
    chunk = b"x" * 1023 + b"\\n"
    for _ in range(6 * 1024):
        os.write(2, chunk)
"""


def test_stderr_is_capped_head_and_tail(synthetic_state, tmp_path):
    manifest = synthetic_state(FLOOD)
    _, result = run_replay(manifest, "cpu", tmp_path / "out", "--max-output-bytes", str(1 << 20))
    assert result["outcome"] == "not_reproduced"
    assert result["stderr"]["truncated"] is True
    assert result["stderr"]["bytes"] >= 6 * 1024 * 1024
    size = (tmp_path / "out" / "stderr.log").stat().st_size
    assert (1 << 20) <= size <= (1 << 20) + 200
    assert b"bytes omitted here" in (tmp_path / "out" / "stderr.log").read_bytes()


HARD_CODED_CUDA = """
import torch
def replay(batch, state, device, ctx):
    torch.zeros(1).cuda()
"""


def test_hard_coded_cuda_in_cpu_mode(synthetic_state, tmp_path):
    manifest = synthetic_state(HARD_CODED_CUDA)
    _, result = run_replay(manifest, "cpu", tmp_path / "out")
    assert result["outcome"] == "harness_error" and result["reason"] == "hard_coded_cuda_device", result


def test_entrypoint_import_error(synthetic_state, tmp_path):
    manifest = synthetic_state("raise ImportError('needs a package the replay lacks')\n")
    _, result = run_replay(manifest, "cpu", tmp_path / "out")
    assert result["outcome"] == "harness_error" and result["reason"] == "entrypoint_import_failed"
    assert "needs a package the replay lacks" in result["detail"]


def test_entrypoint_not_found(synthetic_state, tmp_path):
    manifest = synthetic_state("def other(batch, state, device, ctx):\n    pass\n")
    _, result = run_replay(manifest, "cpu", tmp_path / "out")
    assert result["outcome"] == "harness_error" and result["reason"] == "entrypoint_import_failed"


def test_mode_not_listed_by_job_is_skipped(synthetic_state, tmp_path):
    manifest = synthetic_state("def replay(b, s, d, c):\n    pass\n", modes=["sync-gpu"])
    _, result = run_replay(manifest, "cpu", tmp_path / "out")
    assert result["outcome"] == "skipped" and result["reason"] == "mode_not_supported"


def test_sanitizer_missing_is_skipped(synthetic_state, tmp_path):
    from assertwatch_replay.supervisor import find_sanitizer

    if find_sanitizer():
        pytest.skip("compute-sanitizer is installed here")
    manifest = synthetic_state("def replay(b, s, d, c):\n    pass\n")
    _, result = run_replay(manifest, "sanitizer", tmp_path / "out")
    assert result["outcome"] == "skipped" and result["reason"] == "tool_missing"


def test_sync_gpu_without_a_gpu_is_skipped(synthetic_state, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present; scripts/device-repro-check.sh covers this mode")
    manifest = synthetic_state("def replay(b, s, d, c):\n    pass\n")
    _, result = run_replay(manifest, "sync-gpu", tmp_path / "out", env=child_env(CUDA_VISIBLE_DEVICES=""))
    assert result["outcome"] == "skipped" and result["reason"] == "no_cuda_device"
    assert result["mode_env"]["CUDA_LAUNCH_BLOCKING"] == "1"
    assert result["mode_env"]["PYTORCH_USE_CUDA_DSA"] == "1"


ENV_PROBE = """
import json, os
def replay(batch, state, device, ctx):
    keys = ["CUDA_LAUNCH_BLOCKING", "CUDA_VISIBLE_DEVICES", "TORCH_COMPILE_DISABLE", "WORLD_SIZE",
            "PYTHONUNBUFFERED", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "OMP_NUM_THREADS"]
    with open(os.path.join(ctx.out_dir, "env.json"), "w") as fh:
        json.dump({k: os.environ.get(k) for k in keys}, fh)
    assert str(device) == "cpu" and ctx.mode == "cpu"
"""


def test_worker_environment(synthetic_state, tmp_path):
    manifest = synthetic_state(ENV_PROBE)
    env = child_env(CUDA_LAUNCH_BLOCKING="0", TORCH_NCCL_ASYNC_ERROR_HANDLING="3")
    _, result = run_replay(manifest, "cpu", tmp_path / "out", env=env)
    assert result["outcome"] == "not_reproduced", result
    seen = json.loads((tmp_path / "out" / "env.json").read_text())
    assert seen["CUDA_LAUNCH_BLOCKING"] is None  # the harness owns it; a stale value is removed
    assert seen["CUDA_VISIBLE_DEVICES"] == ""
    assert seen["TORCH_COMPILE_DISABLE"] == "1"
    assert seen["WORLD_SIZE"] == "1" and seen["PYTHONUNBUFFERED"] == "1"
    assert seen["TORCH_NCCL_ASYNC_ERROR_HANDLING"] is None
