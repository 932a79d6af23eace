"""result.json stays under its 256 KiB cap however much the replay produced (no torch needed)."""

import json
from types import SimpleNamespace

from assertwatch_replay import supervisor as sv


def test_result_is_cut_to_fit():
    args = SimpleNamespace(manifest="/m/manifest.json", mode="sync-gpu", timeout=600.0)
    result = sv._base_result(args, "2026-01-01T00:00:00.000Z")
    result["user_frames"] = [{"file": "/p/" + "x" * 200, "line": i, "function": "f"} for i in range(64)]
    result["kernel_assertions"] = [
        {"file": "k.cu", "line": i, "function": "f" * 500, "assertion": "a" * 1024,
         "first_block": [0, 0, 0], "first_thread": [0, 0, 0], "threads": 1}
        for i in range(32)
    ]
    result["exception"] = {"type": "RuntimeError", "bases": [], "message": "m" * 8192,
                           "message_lines": ["l" * 1024] * 50, "cuda_error_code": 710}
    result["detail"] = "d" * 300_000
    data = sv._shrink(result)
    assert len(data) <= sv.MAX_RESULT_BYTES
    doc = json.loads(data)
    assert doc["result_truncated"] is True
    assert doc["exception"]["cuda_error_code"] == 710


def test_small_result_is_untouched(tmp_path):
    args = SimpleNamespace(manifest="/m/manifest.json", mode="cpu", timeout=10.0)
    result = sv._base_result(args, "2026-01-01T00:00:00.000Z")
    doc = json.loads(sv._shrink(result))
    assert "result_truncated" not in doc
    assert doc["schema"] == "assertwatch.repro-result/v1"
    assert sv._write_result(str(tmp_path / "r" / "result.json"), result)
    assert json.loads((tmp_path / "r" / "result.json").read_text())["mode"] == "cpu"
