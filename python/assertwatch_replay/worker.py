"""Replay worker: loads one recorded step and runs it once, in the environment the supervisor set.

Run as ``python -m assertwatch_replay.worker --manifest M --mode MODE --out-dir D``. Only the
supervisor starts it. It writes ``D/worker.json`` (schema ``assertwatch.replay-worker/v1``) before
any teardown and leaves through ``os._exit``: after a device-side assert, the CUDA caching allocator
can abort the process while it shuts down, so nothing after the report may be relied on.

Exit status: 0 the step ran (raised or not; see worker.json), 1 internal error of the harness,
2 manifest rejected, 3 state files missing, altered or unloadable, 4 environment unusable (no
torch, no usable CUDA device for a GPU mode), 5 the entrypoint could not be imported.
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib
import json
import os
import random
import socket
import sys
import sysconfig
import time
import traceback
from typing import Any, Dict, List, Optional

from . import __version__
from . import manifest as mf
from .context import ReplayContext
from .fsutil import atomic_write_bytes, hash_file

WORKER_SCHEMA = "assertwatch.replay-worker/v1"
WORKER_NAME = "worker.json"
MAX_FRAMES = 64
MAX_MESSAGE_CHARS = 8192
MAX_MESSAGE_LINES = 50
MAX_CODE_CHARS = 512

EXIT_OK = 0
EXIT_MANIFEST = 2
EXIT_STATE = 3
EXIT_ENVIRONMENT = 4
EXIT_ENTRYPOINT = 5
EXIT_INTERNAL = 1

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


class _Stop(Exception):
    """Internal: end the replay early with a harness error."""

    def __init__(self, phase: str, code: int, reason: str, detail: str):
        super().__init__(detail)
        self.phase, self.code, self.reason, self.detail = phase, code, reason, detail


# ------------------------------------------------------------------ frames and exceptions


def _non_user_roots() -> List[str]:
    roots = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.add(os.path.realpath(path))
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        roots.add(os.path.realpath(os.path.join(prefix, "lib")))
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "__file__", None):
        roots.add(os.path.realpath(os.path.dirname(torch.__file__)))
    roots.add(os.path.realpath(_PKG_DIR))
    return sorted(roots)


def is_user_file(filename: str, roots: Optional[List[str]] = None) -> bool:
    """True for a frame of the job's own code: not stdlib, site-packages, torch or this harness."""
    if not filename or filename.startswith("<"):
        return False
    real = os.path.realpath(filename)
    if "/site-packages/" in real or "/dist-packages/" in real:
        return False
    for root in roots if roots is not None else _non_user_roots():
        if real == root or real.startswith(root.rstrip("/") + "/"):
            return False
    return True


def _cap(text: Optional[str], limit: int) -> Optional[str]:
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def describe_exception(exc: BaseException) -> Dict[str, Any]:
    kind = type(exc)
    def qual(cls) -> str:
        return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"

    message = str(exc)
    lines = message.splitlines()
    code = getattr(exc, "error_code", None)
    frames = traceback.extract_tb(exc.__traceback__)
    roots = _non_user_roots()
    frame_list = [
        {
            "file": os.path.abspath(f.filename) if not f.filename.startswith("<") else f.filename,
            "line": f.lineno,
            "function": f.name,
            "code": _cap((f.line or "").strip(), MAX_CODE_CHARS),
            "user": is_user_file(f.filename, roots),
        }
        for f in frames
    ]
    truncated = len(frame_list) > MAX_FRAMES
    frame_list = frame_list[-MAX_FRAMES:]
    failing = next((f for f in reversed(frame_list) if f["user"]), None)
    return {
        "type": qual(kind),
        "bases": [qual(c) for c in kind.__mro__[1:] if c is not object],
        "message": _cap(message, MAX_MESSAGE_CHARS),
        "message_lines": [_cap(line, 1024) for line in lines[:MAX_MESSAGE_LINES]],
        "cuda_error_code": code if isinstance(code, int) and not isinstance(code, bool) else None,
        "frames": frame_list,
        "frames_truncated": truncated,
        "failing_frame": None if failing is None else {k: failing[k] for k in ("file", "line", "function", "code")},
    }


# ------------------------------------------------------------------ replay steps


def _verify_files(doc: Dict[str, Any], state_dir: str) -> None:
    for entry in doc["files"]:
        path = os.path.join(state_dir, entry["path"])
        try:
            size, digest = hash_file(path)
        except OSError as exc:
            detail = exc.strerror or str(exc)
            raise _Stop("state", EXIT_STATE, "state_missing", f"{entry['role']} file {path}: {detail}") from None
        if size != entry["bytes"]:
            raise _Stop(
                "state", EXIT_STATE, "state_size_mismatch",
                f"{entry['role']} file {path}: {size} bytes, manifest says {entry['bytes']}",
            )
        if digest != entry["sha256"]:
            raise _Stop(
                "state", EXIT_STATE, "state_hash_mismatch",
                f"{entry['role']} file {path}: sha256 {digest}, manifest says {entry['sha256']}",
            )


def _load_files(torch, doc: Dict[str, Any], state_dir: str) -> Dict[str, Any]:
    loaded = {}
    for entry in doc["files"]:
        path = os.path.join(state_dir, entry["path"])
        try:
            # weights_only=True: the file is untrusted input; only tensors and plain containers load.
            loaded[entry["role"]] = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:
            raise _Stop(
                "state", EXIT_STATE, "state_unloadable",
                f"{entry['role']} file {path}: {type(exc).__name__}: {_cap(str(exc), 2000)}",
            ) from None
    return loaded


def _restore_rng(torch, rng: Any, doc: Dict[str, Any], use_cuda: bool) -> List[str]:
    if not isinstance(rng, dict):
        raise _Stop("state", EXIT_STATE, "state_unloadable", "rng file does not hold a dict")
    restored = []
    try:
        if "cpu" in rng:
            torch.set_rng_state(rng["cpu"])
            restored.append("cpu")
        if "python" in rng:
            py = rng["python"]
            random.setstate((py["version"], tuple(int(v) for v in py["state"].tolist()), py["gauss_next"]))
            restored.append("python")
        if "numpy" in rng:
            try:
                import numpy as np
            except ImportError:
                np = None
            if np is not None:
                st = rng["numpy"]
                keys = st["keys"].numpy().astype(np.uint32)
                np.random.set_state((st["name"], keys, st["pos"], st["has_gauss"], st["cached_gaussian"]))
                restored.append("numpy")
        if use_cuda and rng.get("cuda"):
            index = (doc.get("cuda_device") or {}).get("index", 0)
            states = rng["cuda"]
            if index < len(states):
                torch.cuda.set_rng_state(states[index], device=0)
                restored.append("cuda")
    except (KeyError, TypeError, ValueError, AttributeError, RuntimeError) as exc:
        raise _Stop("state", EXIT_STATE, "rng_unusable", f"cannot restore RNG state: {exc}") from None
    return restored


def _apply_determinism(torch, det: Dict[str, Any]) -> None:
    """Copy the job's settings; the replay must not change behaviour by forcing determinism."""
    if det.get("deterministic_algorithms"):
        torch.use_deterministic_algorithms(True, warn_only=True)
    if "cudnn_deterministic" in det:
        torch.backends.cudnn.deterministic = det["cudnn_deterministic"]
    if "cudnn_benchmark" in det:
        torch.backends.cudnn.benchmark = det["cudnn_benchmark"]


def _import_entrypoint(spec: str, cwd: str):
    module_name, _, attr_path = spec.partition(":")
    if not os.path.isdir(cwd):
        raise _Stop("entrypoint", EXIT_ENTRYPOINT, "cwd_missing", f"replay.cwd {cwd} is not a directory")
    os.chdir(cwd)
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        obj = importlib.import_module(module_name)
        for part in attr_path.split("."):
            obj = getattr(obj, part)
    except BaseException as exc:  # an import can raise anything, including SystemExit
        report = describe_exception(exc)
        stop = _Stop("entrypoint", EXIT_ENTRYPOINT, "entrypoint_import_failed",
                     f"cannot import {spec}: {report['type']}: {report['message']}")
        stop.exception = report  # type: ignore[attr-defined]
        raise stop from None
    if not callable(obj):
        raise _Stop("entrypoint", EXIT_ENTRYPOINT, "entrypoint_not_callable", f"{spec} is not callable")
    return obj


def _environment(torch, use_cuda: bool) -> Dict[str, Any]:
    env: Dict[str, Any] = {
        "python": ".".join(str(v) for v in sys.version_info[:3]),
        "hostname": socket.gethostname(),
        "torch": getattr(torch, "__version__", None) if torch else None,
        "cuda": getattr(getattr(torch, "version", None), "cuda", None) if torch else None,
        "device": "cpu",
        "gpu_uuid": None,
        "assertwatch_replay": __version__,
    }
    if use_cuda:
        try:
            props = torch.cuda.get_device_properties(0)
            env["device"] = props.name
            uuid = getattr(props, "uuid", None)
            if uuid is not None:
                env["gpu_uuid"] = str(uuid) if str(uuid).startswith("GPU-") else f"GPU-{uuid}"
        except Exception:
            pass
    return env


def run(manifest_path: str, mode: str, out_dir: str) -> int:
    report: Dict[str, Any] = {
        "schema": WORKER_SCHEMA,
        "status": None,
        "phase": None,
        "reason": None,
        "detail": None,
        "mode": mode,
        "pid": os.getpid(),
        "exception": None,
        "phases_s": {},
        "rng_restored": [],
        "environment": None,
    }
    phases = report["phases_s"]
    torch = None
    use_cuda = mode in ("sync-gpu", "sanitizer")
    code = EXIT_OK

    def lap(name: str, since: float) -> float:
        now = time.perf_counter()
        phases[name] = round(now - since, 6)
        return now

    t = time.perf_counter()
    try:
        try:
            doc = mf.load(manifest_path)
        except mf.ManifestError as exc:
            raise _Stop("manifest", EXIT_MANIFEST, "manifest_invalid", str(exc)) from None
        state_dir = os.path.dirname(os.path.abspath(manifest_path))
        report["step"] = doc["step"]
        _verify_files(doc, state_dir)
        t = lap("verify", t)

        try:
            import torch  # noqa: F811  (deliberately late: the supervisor never imports it)
        except Exception as exc:
            raise _Stop("environment", EXIT_ENVIRONMENT, "torch_unavailable", f"cannot import torch: {exc}") from None
        t = lap("import", t)
        if use_cuda:
            if not torch.cuda.is_available():
                raise _Stop("environment", EXIT_ENVIRONMENT, "no_cuda_device",
                            f"mode {mode} needs a CUDA device and torch sees none")
            try:
                torch.cuda.set_device(0)
            except Exception as exc:  # a GPU in a bad state (e.g. after an Xid) fails here
                raise _Stop("environment", EXIT_ENVIRONMENT, "cuda_unusable",
                            f"cannot use the CUDA device: {type(exc).__name__}: {_cap(str(exc), 2000)}") from None
            device = torch.device("cuda", 0)
        else:
            device = torch.device("cpu")
        report["environment"] = _environment(torch, use_cuda)

        files = _load_files(torch, doc, state_dir)
        t = lap("load", t)
        report["rng_restored"] = _restore_rng(torch, files.get("rng"), doc, use_cuda)
        _apply_determinism(torch, doc["determinism"])
        t = lap("restore", t)

        fn = _import_entrypoint(doc["replay"]["entrypoint"], doc["replay"]["cwd"])
        t = lap("entrypoint_import", t)

        state = {
            "model": files.get("model"),
            "optimizer": files.get("optimizer"),
            "extra_state": files.get("extra_state"),
            "model_state": doc["model_state"],
            "config": doc.get("extra", {}),
        }
        ctx = ReplayContext(
            mode=mode,
            manifest=doc,
            manifest_path=os.path.abspath(manifest_path),
            state_dir=state_dir,
            out_dir=os.path.abspath(out_dir),
            step=doc["step"],
            config=doc.get("extra", {}),
            _rng_restorer=lambda: _restore_rng(torch, files.get("rng"), doc, use_cuda),
        )
        try:
            fn(files["batch"], state, device, ctx)
            if use_cuda:
                torch.cuda.synchronize()  # surface an error of the step inside the step's phase
            report["status"] = "ok"
        except BaseException as exc:  # the point of the replay: record whatever the step raised
            report["status"] = "raised"
            report["exception"] = describe_exception(exc)
        lap("step", t)
    except _Stop as stop:
        report.update(status="harness_error", phase=stop.phase, reason=stop.reason, detail=stop.detail)
        report["exception"] = getattr(stop, "exception", None)
        code = stop.code
        if stop.reason == "no_cuda_device":
            report["status"] = "skipped"
    except Exception as exc:  # a bug of the harness itself: still leave a report behind
        report.update(status="harness_error", phase="internal", reason="worker_internal_error",
                      detail=f"{type(exc).__name__}: {_cap(str(exc), 2000)}")
        report["exception"] = describe_exception(exc)
        code = EXIT_INTERNAL
    if report["environment"] is None:
        report["environment"] = _environment(torch, False)
    return _finish(report, out_dir, code)


def _finish(report: Dict[str, Any], out_dir: str, code: int) -> int:
    data = json.dumps(report, indent=2, sort_keys=True, default=repr).encode() + b"\n"
    try:
        atomic_write_bytes(os.path.join(out_dir, WORKER_NAME), data)
    except OSError as exc:
        print(f"assertwatch-replay worker: cannot write {WORKER_NAME}: {exc}", file=sys.stderr)
    return code


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m assertwatch_replay.worker")
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--mode", required=True, choices=mf.MODES)
    parser.add_argument("--out-dir", required=True)
    args = parser.parse_args(argv)
    faulthandler.enable(all_threads=True)  # a segfault still leaves a Python stack on fd 2
    code = run(args.manifest, args.mode, args.out_dir)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)  # skip interpreter and CUDA teardown; the report is already on disk


if __name__ == "__main__":
    main()
