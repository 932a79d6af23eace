"""Manifest validation: the shared contract file (docs/manifest.md), checked without torch."""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from assertwatch_replay import manifest as mf
from conftest import FIXTURES, child_env

EXAMPLE = FIXTURES / "manifest-example.json"


@pytest.fixture
def doc():
    return json.loads(EXAMPLE.read_text())


def test_example_fixture_is_valid():
    doc = mf.load(str(EXAMPLE))
    assert doc["schema"] == mf.SCHEMA
    assert len(EXAMPLE.read_bytes()) <= mf.MAX_MANIFEST_BYTES


def test_minimal_manifest_is_valid(doc):
    doc["job"] = {k: doc["job"][k] for k in ("name", "uid", "gid", "hostname")}
    doc["step"] = {"epoch": 0, "global_step": 0}
    doc["cuda_device"] = None
    doc["log_file"] = None
    doc["files"] = doc["files"][:2]
    doc["model_state"] = {"kind": "none", "exact": False}
    doc["determinism"] = {"rng_restored": [], "deterministic_algorithms": False, "compiled": False}
    doc["replay"] = {k: doc["replay"][k] for k in ("argv", "entrypoint", "env", "cwd")}
    del doc["extra"]
    mf.validate(doc)


def _set(doc, path, value):
    target = doc
    keys = path.split(".")
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    last = keys[-1]
    if value is _DELETE:
        del target[last]
    elif isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value


_DELETE = object()

BAD = [
    ("schema", "assertwatch.debug-state/v2", "schema"),
    ("surprise", 1, "surprise"),
    ("job.surprise", 1, "job.surprise"),
    ("replay.estimates.surprise", 1, "replay.estimates.surprise"),
    ("job.name", "../etc", "job.name"),
    ("job.uid", -1, "job.uid"),
    ("job.uid", True, "job.uid"),
    ("job.uid", 1001.0, "job.uid"),
    ("pid", 0, "pid"),
    ("pid", 10**9, "pid"),
    ("step.global_step", 2**53, "step.global_step"),
    ("created_at", "2026-03-01 12:00:00", "created_at"),
    ("created_at", "2026-13-01T12:00:00Z", "created_at"),
    ("log_file", "relative/train.log", "log_file"),
    ("files", [], "files"),
    ("files.0.path", "../batch.pt", "files[0].path"),
    ("files.0.path", "sub/batch.pt", "files[0].path"),
    ("files.0.path", ".hidden", "files[0].path"),
    ("files.0.path", "manifest.json", "files[0].path"),
    ("files.0.sha256", "ABC", "files[0].sha256"),
    ("files.0.role", "weights", "files[0].role"),
    ("files.1.role", "batch", "files[1].role"),
    ("files.0.format", "pickle", "files[0].format"),
    ("model_state.kind", "full", "model_state.kind"),
    ("model_state.exact", True, "model_state.exact"),
    ("model_state.ref", None, "model_state.ref"),
    ("determinism.rng_restored", ["cpu", "gpu"], "determinism.rng_restored[1]"),
    ("replay.argv", "python -m assertwatch_replay run", "replay.argv"),
    ("replay.argv", [], "replay.argv"),
    ("replay.argv.0", "python", "replay.argv[0]"),
    ("replay.argv.5", "--manifest={manifest}", "replay.argv[5]"),
    ("replay.argv.5", "{manifest_path}", "replay.argv[5]"),
    ("replay.argv.9", "/tmp/result.json", "replay.argv"),
    ("replay.entrypoint", "proj.train", "replay.entrypoint"),
    ("replay.entrypoint", "proj.train:replay step", "replay.entrypoint"),
    ("replay.env", {"LD_PRELOAD": "/tmp/x.so"}, "replay.env.LD_PRELOAD"),
    ("replay.env", {"CUDA_LAUNCH_BLOCKING": "0"}, "replay.env.CUDA_LAUNCH_BLOCKING"),
    ("replay.env", {"PYTHONPATH": 3}, "replay.env.PYTHONPATH"),
    ("replay.cwd", "proj", "replay.cwd"),
    ("replay.modes", ["gpu"], "replay.modes[0]"),
    ("replay.requires_world_size", 0, "replay.requires_world_size"),
    ("replay.estimates.step_seconds", -1, "replay.estimates.step_seconds"),
    ("extra", [], "extra"),
    ("extra", {"blob": "x" * (mf.MAX_EXTRA_BYTES + 1)}, "extra"),
    ("job", _DELETE, "job"),
    ("cuda_device.index", "3", "cuda_device.index"),
    # Where the two sides once disagreed: whole-string ASCII patterns, seconds 60/61, year 0.
    ("job.name", "train-42\n", "job.name"),
    ("replay.entrypoint", "proj.train:replay_step\n", "replay.entrypoint"),
    ("created_at", "2026-03-01T12:00:00Z\n", "created_at"),
    ("created_at", "2026-03-01T12:00:60Z", "created_at"),
    ("created_at", "2026-03-01T12:00:61Z", "created_at"),
    ("created_at", "0000-01-01T00:00:00Z", "created_at"),
    ("created_at", "\u0662\u0660\u0662\u0666-03-01T12:00:00Z", "created_at"),
    ("replay.estimates.step_seconds", 10**400, "replay.estimates.step_seconds"),
]


@pytest.mark.parametrize("path,value,field", BAD, ids=[f"{p}={str(v)[:20]}" for p, v, _ in BAD])
def test_rejects(doc, path, value, field):
    bad = copy.deepcopy(doc)
    _set(bad, path, value)
    with pytest.raises(mf.ManifestError) as info:
        mf.validate(bad)
    assert info.value.field == field, str(info.value)


def test_files_need_batch_and_rng(doc):
    doc["files"] = [f for f in doc["files"] if f["role"] != "rng"]
    with pytest.raises(mf.ManifestError, match="role 'rng'"):
        mf.validate(doc)


def test_size_limit(doc):
    data = json.dumps(doc).encode()
    padded = data[:-1] + b" " * (mf.MAX_MANIFEST_BYTES - len(data) + 1) + b"}"
    assert len(padded) == mf.MAX_MANIFEST_BYTES + 1
    with pytest.raises(mf.ManifestError, match="limit is 65536"):
        mf.parse(padded)
    exact = data[:-1] + b" " * (mf.MAX_MANIFEST_BYTES - len(data)) + b"}"
    assert len(exact) == mf.MAX_MANIFEST_BYTES
    mf.parse(exact)


@pytest.mark.parametrize(
    "data,needle",
    [
        (b'{"schema": "a", "schema": "b"}', "duplicate key"),
        (b'{"pid": NaN}', "NaN is not valid JSON"),
        (b"\xff\xfe{}", "not valid UTF-8"),
        (b"{", "not valid JSON"),
        (b"[]", "must be a JSON object"),
    ],
)
def test_rejects_bad_bytes(data, needle):
    with pytest.raises(mf.ManifestError, match=needle):
        mf.parse(data)


def test_rejects_what_serde_json_rejects():
    text = EXAMPLE.read_text()
    assert '"epoch": 3' in text
    with pytest.raises(mf.ManifestError) as info:
        mf.parse(text.replace('"epoch": 3', '"epoch": -0').encode())
    assert info.value.field == "step.epoch"
    with pytest.raises(mf.ManifestError, match="lone surrogate"):
        mf.parse(text.replace('"train-42-w3"', '"train-\\ud800"', 1).encode())
    with pytest.raises(mf.ManifestError, match="nested too deeply"):
        mf.parse(b"[" * 30000 + b"]" * 30000)


def test_extra_is_measured_compact(doc):
    # {"a":1,"b":2,"blob":"..."} is 23 bytes plus the blob, whatever spaces json.dumps would add.
    doc["extra"] = {"a": 1, "b": 2, "blob": "x" * (mf.MAX_EXTRA_BYTES - 23)}
    mf.validate(doc)
    doc["extra"]["blob"] += "x"
    with pytest.raises(mf.ManifestError, match="the limit is 16384"):
        mf.validate(doc)


def test_contract_is_the_package_file():
    raw = (Path(mf.__file__).parent / mf.CONTRACT_FILE).read_bytes()
    assert hashlib.sha256(raw).hexdigest() == mf.CONTRACT_SHA256
    assert mf.CONTRACT_VERSION == json.loads(raw)["version"] == 1
    assert mf.SCHEMA == "assertwatch.debug-state/v1"
    assert mf.MODES == ("sync-gpu", "cpu", "sanitizer")
    assert set(mf.RULES) == set(mf.CONTRACT["rules"])


def test_contract_nodes_are_complete():
    """Every node has what its type needs and names only known patterns and rules."""
    needs = {
        "list": {"items"},
        "map": {"values", "max_entries", "allowed_keys"},
        "free_object": {"max_bytes", "max_depth"},
    }

    def walk(node, at):
        assert node["type"] in ("object", "list", "map", "free_object", "string", "int", "number", "bool"), at
        assert needs.get(node["type"], set()) <= set(node), at
        assert node.get("pattern", "job_name") in mf.PATTERNS, at
        assert node.get("rule", "files") in mf.RULES, at
        for key, child in node.get("keys", {}).items():
            walk(child, f"{at}.{key}")
        for key in ("items", "values"):
            if key in node:
                walk(node[key], f"{at}.{key}")

    walk(mf.CONTRACT["document"], "document")


def test_patterns_match_whole_ascii_strings():
    assert mf.JOB_NAME_RE.match("train-42")
    assert not mf.JOB_NAME_RE.match("train-42\n")
    assert not mf.ENTRYPOINT_RE.match("a:b:c")
    assert mf.ENTRYPOINT_RE.match("examples.tiny_train:replay_step")
    assert not mf.PATTERNS["created_at"].match("\u0662\u0660\u0662\u0666-03-01T12:00:00Z")


def test_load_refuses_symlink(tmp_path):
    target = tmp_path / "real.json"
    target.write_bytes(EXAMPLE.read_bytes())
    link = tmp_path / "manifest.json"
    link.symlink_to(target)
    with pytest.raises(mf.ManifestError, match="cannot open"):
        mf.load(str(link))


def test_validate_cli(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "assertwatch_replay", "validate", str(EXAMPLE)],
                        capture_output=True, text=True, env=child_env())
    assert ok.returncode == 0, ok.stderr
    broken = tmp_path / "manifest.json"
    broken.write_text('{"schema": "assertwatch.debug-state/v1", "job": {}}')
    bad = subprocess.run([sys.executable, "-m", "assertwatch_replay", "validate", str(broken)],
                         capture_output=True, text=True, env=child_env())
    assert bad.returncode == 2
    assert "step: missing" in bad.stderr
    assert "Traceback" not in bad.stderr
