"""Importing hand-made ``torch.save`` debug files as ring entries, then replaying one."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import EXAMPLE, PY_DIR, child_env, planted_line, run_replay

pytestmark = pytest.mark.torch


def test_imported_debug_file_replays_to_the_planted_line(tmp_path):
    import torch

    sys.path.insert(0, str(PY_DIR))
    try:
        from examples import tiny_train as tt
    finally:
        sys.path.remove(str(PY_DIR))
    cfg = dict(tt.CONFIG)
    torch.manual_seed(3)
    model = tt.build_model(cfg)
    gen = torch.Generator().manual_seed(9)
    files = []
    for batch_idx in (4, 5):  # the user's own files: debug_<epoch>_<batch>.pt
        batch = tt.make_batch(gen, batch_idx, "label", 5, cfg)
        path = tmp_path / f"debug_0_{batch_idx}.pt"
        torch.save({"model": model.state_dict(), "data": batch, "rng": torch.get_rng_state()}, path)
        files.append(str(path))
    root = tmp_path / "state"
    proc = subprocess.run(
        [sys.executable, "-m", "assertwatch_replay.importer", "--root", str(root), "--job", "imported",
         "--entrypoint", "examples.tiny_train:replay_step", "--cwd", str(PY_DIR),
         "--extra-json", json.dumps(cfg), *files],
        env=child_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    manifests = proc.stdout.split()
    assert [os.path.basename(os.path.dirname(m)) for m in manifests] == ["step-000000000000", "step-000000000001"]
    from assertwatch_replay import manifest as mf

    doc = mf.load(manifests[1])
    assert doc["step"] == {"epoch": 0, "global_step": 1, "batch_index": 5}
    assert doc["determinism"]["rng_restored"] == ["cpu"]
    assert doc["model_state"]["kind"] == "full"
    _, result = run_replay(manifests[1], "cpu", tmp_path / "out")
    assert result["outcome"] == "reproduced_cpu_only", result
    assert result["failing_frame"]["file"] == str(EXAMPLE) and result["failing_frame"]["line"] == planted_line("label")
    _, clean = run_replay(manifests[0], "cpu", tmp_path / "out0")
    assert clean["outcome"] == "not_reproduced", clean


def test_import_rejects_a_file_without_data(tmp_path):
    import torch

    path = tmp_path / "debug_0_1.pt"
    torch.save({"rng": torch.get_rng_state()}, path)
    proc = subprocess.run([sys.executable, "-m", "assertwatch_replay.importer", "--root", str(tmp_path / "s"),
                           "--job", "j", "--entrypoint", "m:f", str(path)],
                          env=child_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "expected a dict with a 'data' entry" in proc.stderr
