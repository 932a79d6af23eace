"""Replay supervisor: runs one recorded step in a worker process and writes ``result.json``.

``python -m assertwatch_replay run --manifest M --mode MODE --result R --out-dir D [--timeout S]``

The supervisor never imports torch (it starts in a fraction of a second and survives whatever the
worker does). It validates the manifest, starts the worker in its own process group with the
mode's environment, captures the worker's fd 1 and fd 2 through pipes into capped files, scans
them line by line for CUDA kernel assertion lines, merges the worker's ``worker.json`` and decides
the outcome. It exits 0 whenever it wrote ``result.json``; see docs/replay.md.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import json
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

from . import __version__
from . import find as find_mod
from . import manifest as mf
from .fsutil import atomic_write_bytes
from .stderr_parse import AssertionCollector, TextScanner, dsa_verdict
from .worker import WORKER_NAME

RESULT_SCHEMA = "assertwatch.repro-result/v1"
MAX_RESULT_BYTES = 256 * 1024
DEFAULT_STREAM_CAP = 8 * 1024 * 1024
MAX_SANITIZER_LOG = 16 * 1024 * 1024
MAX_LINE_BYTES = 64 * 1024
DEFAULT_TIMEOUT_S = {"sync-gpu": 600.0, "cpu": 1800.0, "sanitizer": 3600.0}
DRAIN_AFTER_EXIT_S = 2.0
SANITIZER_ERROR_EXITCODE = 86

OUTCOMES = (
    "reproduced",
    "reproduced_cpu_only",
    "not_reproduced",
    "harness_error",
    "timeout",
    "skipped",
)

# Variables the harness owns. They are removed from the inherited environment first, so a value
# left over in the daemon's or the job's environment cannot change what a mode means.
HARNESS_VARS = (
    "CUDA_LAUNCH_BLOCKING",
    "PYTORCH_USE_CUDA_DSA",
    "TORCH_USE_CUDA_DSA",
    "TORCH_COMPILE_DISABLE",
    "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "TORCH_SHOW_CPP_STACKTRACES",
)

# CUDA_LAUNCH_BLOCKING must be in the environment before the process starts: c10 reads it once
# (pytorch c10/cuda/CUDAMiscFunctions.cpp). PYTORCH_USE_CUDA_DSA is the runtime switch for
# device-side assertion tracking; TORCH_USE_CUDA_DSA is a build-time macro kept for parity with
# what users set by hand. TORCH_COMPILE_DISABLE keeps the replay eager (no CUDA graphs).
MODE_ENV = {
    "sync-gpu": {
        "CUDA_LAUNCH_BLOCKING": "1",
        "PYTORCH_USE_CUDA_DSA": "1",
        "TORCH_USE_CUDA_DSA": "1",
        "TORCH_COMPILE_DISABLE": "1",
    },
    # An empty CUDA_VISIBLE_DEVICES hides every GPU from the CUDA runtime.
    "cpu": {"CUDA_VISIBLE_DEVICES": "", "TORCH_COMPILE_DISABLE": "1"},
    # With the caching allocator on, many out-of-bounds accesses land inside a valid cached block
    # and the sanitizer cannot see them (pytorch/pytorch#45294).
    "sanitizer": {
        "CUDA_LAUNCH_BLOCKING": "1",
        "PYTORCH_USE_CUDA_DSA": "1",
        "TORCH_COMPILE_DISABLE": "1",
        "PYTORCH_NO_CUDA_MEMORY_CACHING": "1",
    },
}
REMOVED_IN_MODE = {"sanitizer": ("PYTORCH_CUDA_ALLOC_CONF",)}

# Messages that mean "this code cannot run without a GPU", not "the step is buggy".
HARD_CODED_CUDA_RE = re.compile(
    r"Found no NVIDIA driver|Torch not compiled with CUDA enabled|No CUDA GPUs are available|"
    r"CUDA driver initialization failed|Attempting to deserialize object on a CUDA device"
)

EXIT_RESULT_WRITTEN = 0
EXIT_NO_RESULT = 1
EXIT_USAGE = 2

_PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ------------------------------------------------------------------ capture


class CappedCapture:
    """Writes a stream to a file keeping at most ``cap`` bytes: the head as it comes, the tail in
    memory until the end. Every complete line, including those not kept, goes to ``on_line``."""

    MARKER = "\n[assertwatch-replay: {n} bytes omitted here]\n"

    def __init__(self, path: str, cap: int, on_line):
        self.path = path
        self.cap = cap
        self.head_limit = cap // 2
        self.tail_limit = cap - self.head_limit
        self.head_written = 0
        self.total = 0
        self.tail: collections.deque = collections.deque()
        self.tail_bytes = 0
        self.on_line = on_line
        self._partial = b""
        self._file = open(path, "wb")

    def write(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - self.head_written
        if room > 0:
            head = data[:room]
            self._file.write(head)
            self.head_written += len(head)
            data = data[room:]
        if data:
            self.tail.append(data)
            self.tail_bytes += len(data)
            while self.tail_bytes - len(self.tail[0]) >= self.tail_limit:
                self.tail_bytes -= len(self.tail.popleft())

    def feed_lines(self, data: bytes) -> None:
        buf = self._partial + data
        *complete, rest = buf.split(b"\n")
        for raw in complete:
            self.on_line(raw[:MAX_LINE_BYTES].decode("utf-8", "replace"))
        if len(rest) > MAX_LINE_BYTES:
            self.on_line(rest[:MAX_LINE_BYTES].decode("utf-8", "replace"))
            rest = b""
        self._partial = rest

    def close(self) -> Dict[str, Any]:
        if self._partial:
            self.on_line(self._partial.decode("utf-8", "replace"))
            self._partial = b""
        tail = b"".join(self.tail)
        if len(tail) > self.tail_limit:
            tail = tail[-self.tail_limit :]
        omitted = self.total - self.head_written - len(tail)
        if omitted > 0:
            self._file.write(self.MARKER.format(n=omitted).encode())
        self._file.write(tail)
        self._file.close()
        return {
            "path": os.path.basename(self.path),
            "bytes": self.total,
            "truncated": omitted > 0,
        }


# ------------------------------------------------------------------ process control


def _pdeathsig_preexec():
    """Return a preexec function that asks the kernel to SIGKILL the child if we die first."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    PR_SET_PDEATHSIG = 1  # linux/prctl.h

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)

    return preexec


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class _Terminated(Exception):
    pass


# ------------------------------------------------------------------ result document


def _base_result(args, started_at: str) -> Dict[str, Any]:
    return {
        "schema": RESULT_SCHEMA,
        "manifest": os.path.abspath(args.manifest) if args.manifest else None,
        "mode": args.mode,
        "outcome": None,
        "reason": None,
        "detail": None,
        "matches_original": None,
        "step": None,
        "started_at": started_at,
        "duration_s": None,
        "phases_s": {},
        "exception": None,
        "failing_frame": None,
        "user_frames": [],
        "kernel_assertions": [],
        "kernel_assertions_truncated": False,
        "dsa": {"requested": args.mode != "cpu", "effective": False, "evidence": "replay did not run"},
        "sanitizer": None,
        "determinism": None,
        "environment": {
            "hostname": socket.gethostname(),
            "python": ".".join(str(v) for v in sys.version_info[:3]),
            "assertwatch_replay": __version__,
        },
        "mode_env": {},
        "worker": None,
        "stdout": None,
        "stderr": None,
        "timeout_s": args.timeout,
    }


def _shrink(result: Dict[str, Any]) -> bytes:
    """Serialise, cutting lists and texts until the document fits MAX_RESULT_BYTES."""
    steps = [
        lambda r: r.__setitem__("user_frames", r["user_frames"][-16:]),
        lambda r: r.__setitem__("kernel_assertions", r["kernel_assertions"][:8]),
        lambda r: r["exception"] and r["exception"].__setitem__("message_lines", r["exception"]["message_lines"][:10]),
        lambda r: r["exception"] and r["exception"].__setitem__("message", (r["exception"]["message"] or "")[:2048]),
        lambda r: r["sanitizer"] and r["sanitizer"].__setitem__("findings", r["sanitizer"]["findings"][:5]),
        lambda r: r.__setitem__("user_frames", r["user_frames"][-4:]),
        lambda r: r.__setitem__("kernel_assertions", r["kernel_assertions"][:2]),
        lambda r: r["exception"] and r["exception"].__setitem__("message_lines", []),
        lambda r: r.__setitem__("detail", (r["detail"] or "")[:1024] or None),
    ]
    data = json.dumps(result, indent=2, sort_keys=True, default=repr).encode() + b"\n"
    for step in steps:
        if len(data) <= MAX_RESULT_BYTES:
            break
        step(result)
        result["result_truncated"] = True
        data = json.dumps(result, indent=2, sort_keys=True, default=repr).encode() + b"\n"
    return data


def _write_result(path: str, result: Dict[str, Any]) -> bool:
    try:
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        atomic_write_bytes(path, _shrink(result), mode=0o644)
        return True
    except OSError as exc:
        print(f"assertwatch-replay: cannot write the result {path}: {exc.strerror or exc}", file=sys.stderr)
        return False


def _finish(args, result: Dict[str, Any], t0: float) -> int:
    result["duration_s"] = round(time.monotonic() - t0, 3)
    ok = _write_result(args.result, result)
    if ok and not args.quiet:
        where = result["failing_frame"]
        place = f" at {where['file']}:{where['line']}" if where else ""
        print(f"{result['outcome']}{place} ({result['duration_s']} s) -> {args.result}")
    if getattr(args, "print_result", False):
        _print_result_line(result)
    return EXIT_RESULT_WRITTEN if ok else EXIT_NO_RESULT


def _print_result_line(result: Dict[str, Any]) -> None:
    """The result as one compact JSON line, last on stdout: a replay pod's result is read from
    its log (the same size cap as the file applies)."""
    try:
        doc = json.loads(_shrink(result))
    except ValueError:
        doc = result
    line = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=repr)
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _set(result: Dict[str, Any], outcome: str, reason: Optional[str] = None, detail: Optional[str] = None) -> None:
    result["outcome"] = outcome
    result["reason"] = reason
    result["detail"] = detail


def find_sanitizer() -> Optional[str]:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for candidate in ("/usr/local/cuda/bin/compute-sanitizer", "/opt/cuda/bin/compute-sanitizer"):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def worker_env(doc: Dict[str, Any], mode: str, base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The worker's environment: inherited, minus harness and NCCL variables, plus the manifest's
    allow-listed ``replay.env`` and then the mode's variables (which always win)."""
    env = dict(os.environ if base is None else base)
    for key in list(env):
        if key in HARNESS_VARS or key.startswith("TORCH_NCCL_"):
            del env[key]
    env.update(doc["replay"]["env"])
    for key in REMOVED_IN_MODE.get(mode, ()):
        env.pop(key, None)
    env.update(
        {
            "PYTHONUNBUFFERED": "1",
            "PYTHONFAULTHANDLER": "1",
            "WORLD_SIZE": "1",
            "RANK": "0",
            "LOCAL_RANK": "0",
            "LOCAL_WORLD_SIZE": "1",
        }
    )
    env.update(MODE_ENV[mode])
    # Let the worker import this package even when it is run from a source tree, without putting a
    # site-packages directory in front of the job's own path.
    if os.path.basename(_PKG_PARENT) not in ("site-packages", "dist-packages"):
        parts = [_PKG_PARENT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join(parts)
    return env


def _parse_sanitizer_log(path: str) -> Dict[str, Any]:
    info: Dict[str, Any] = {"log": os.path.basename(path), "error_summary": None, "findings": []}
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_SANITIZER_LOG)
    except OSError:
        info["log"] = None
        return info
    for line in data.decode("utf-8", "replace").splitlines():
        match = re.search(r"ERROR SUMMARY: (\d+) error", line)
        if match:
            info["error_summary"] = int(match.group(1))
        elif line.startswith("=========") and re.search(
            r"Invalid __global__|Warp assert|out of bounds|Program hit|Assertion", line
        ):
            if len(info["findings"]) < 20:
                info["findings"].append(line[9:].strip()[:512])
    return info


# ------------------------------------------------------------------ the run


def run(args) -> int:
    t0 = time.monotonic()
    started_at = mf.utc_now_rfc3339()
    if args.timeout is None:
        args.timeout = DEFAULT_TIMEOUT_S[args.mode]
    result = _base_result(args, started_at)
    try:
        os.makedirs(args.out_dir, exist_ok=True)
    except OSError as exc:
        print(f"assertwatch-replay: cannot create --out-dir {args.out_dir}: {exc.strerror}", file=sys.stderr)
        _set(result, "harness_error", "out_dir_unusable", str(exc))
        return _finish(args, result, t0)
    out_dir = os.path.abspath(args.out_dir)

    if args.find_under is not None:
        try:
            args.manifest, _ = find_mod.find(args.find_under, args.pod, args.rank, args.before)
        except find_mod.NotFound as exc:
            _set(result, "skipped", exc.reason, str(exc))
            return _finish(args, result, t0)
        result["manifest"] = os.path.abspath(args.manifest)
    try:
        doc = mf.load(args.manifest)
    except mf.ManifestError as exc:
        _set(result, "harness_error", "manifest_invalid", str(exc))
        return _finish(args, result, t0)
    result["step"] = doc["step"]
    result["determinism"] = dict(doc["determinism"], weights_exact=doc["model_state"]["exact"])
    result["phases_s"]["validate"] = round(time.monotonic() - t0, 6)

    if args.mode not in doc["replay"].get("modes", mf.MODES):
        _set(result, "skipped", "mode_not_supported", f"the job lists replay.modes = {doc['replay']['modes']}")
        return _finish(args, result, t0)
    if doc["replay"].get("requires_world_size", 1) > 1:
        _set(result, "skipped", "needs_distributed", "the step needs more than one process")
        return _finish(args, result, t0)

    worker_argv = [
        sys.executable, "-m", "assertwatch_replay.worker",
        "--manifest", os.path.abspath(args.manifest), "--mode", args.mode, "--out-dir", out_dir,
    ]
    sanitizer_log = None
    if args.mode == "sanitizer":
        tool = find_sanitizer()
        if tool is None:
            _set(result, "skipped", "tool_missing", "compute-sanitizer was not found on PATH or under /usr/local/cuda/bin")
            return _finish(args, result, t0)
        sanitizer_log = os.path.join(out_dir, "sanitizer.log")
        worker_argv = [
            tool, "--tool", "memcheck",
            "--error-exitcode", str(SANITIZER_ERROR_EXITCODE),
            "--launch-timeout", "120",
            "--print-limit", "100",
            "--log-file", sanitizer_log,
            "--",
        ] + worker_argv

    env = worker_env(doc, args.mode)
    result["mode_env"] = dict(MODE_ENV[args.mode])
    worker_json = os.path.join(out_dir, WORKER_NAME)
    try:
        os.unlink(worker_json)  # a stale report from an earlier attempt must not be merged
    except FileNotFoundError:
        pass

    assertions = AssertionCollector()
    scanner = TextScanner()

    def on_stderr(line: str) -> None:
        assertions.feed(line)
        scanner.feed(line)

    stderr_cap = CappedCapture(os.path.join(out_dir, "stderr.log"), args.max_output_bytes, on_stderr)
    stdout_cap = CappedCapture(os.path.join(out_dir, "stdout.log"), args.max_output_bytes, assertions.feed)

    terminated = {"signal": None}

    def on_signal(signum, _frame):
        terminated["signal"] = signum

    old_handlers = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    t_spawn = time.monotonic()
    try:
        proc = subprocess.Popen(
            worker_argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=out_dir,
            start_new_session=True,  # own process group: a timeout kills the whole tree by pgid
            preexec_fn=_pdeathsig_preexec(),
            close_fds=True,
        )
    except OSError as exc:
        stderr_cap.close()
        stdout_cap.close()
        _set(result, "harness_error", "spawn_failed", f"cannot start {worker_argv[0]}: {exc.strerror or exc}")
        return _finish(args, result, t0)
    result["worker"] = {"pid": proc.pid, "exit_code": None, "signal": None}

    timed_out = _pump(proc, {proc.stdout: stdout_cap, proc.stderr: stderr_cap}, t_spawn + args.timeout,
                      args.grace, terminated)
    for sig, handler in old_handlers.items():
        signal.signal(sig, handler)
    result["stderr"] = stderr_cap.close()
    result["stdout"] = stdout_cap.close()
    result["phases_s"]["worker"] = round(time.monotonic() - t_spawn, 6)
    rc = proc.returncode
    result["worker"]["exit_code"] = rc if rc is not None and rc >= 0 else None
    result["worker"]["signal"] = -rc if rc is not None and rc < 0 else None

    report = _read_worker_report(worker_json)
    result["kernel_assertions"] = assertions.results()
    result["kernel_assertions_truncated"] = assertions.dropped > 0
    if sanitizer_log is not None:
        result["sanitizer"] = dict(_parse_sanitizer_log(sanitizer_log), exit_code=rc)
    _decide(result, report, scanner, timed_out, terminated["signal"], args.mode)
    return _finish(args, result, t0)


def _pump(proc, captures, deadline: float, grace: float, terminated) -> bool:
    """Copy the worker's output into the captures until it exits or the deadline passes.

    Returns True when the deadline passed (or the supervisor was told to stop) and the worker's
    process group was killed.
    """
    sel = selectors.DefaultSelector()
    for pipe, cap in captures.items():
        os.set_blocking(pipe.fileno(), False)
        sel.register(pipe, selectors.EVENT_READ, cap)
    open_pipes = len(captures)
    exited_at = None
    killed_at = None
    timed_out = False
    while True:
        now = time.monotonic()
        if killed_at is None and (now >= deadline or terminated["signal"] is not None):
            timed_out = True
            _kill_group(proc.pid, signal.SIGTERM)
            killed_at = now
        if killed_at is not None and now - killed_at >= grace:
            _kill_group(proc.pid, signal.SIGKILL)
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        if open_pipes == 0 and exited_at is not None:
            break
        if exited_at is not None and now - exited_at >= DRAIN_AFTER_EXIT_S:
            # The worker is gone but something it started still holds the pipes open.
            _kill_group(proc.pid, signal.SIGKILL)
            break
        if killed_at is not None and now - killed_at >= grace + 5.0:
            break  # nothing more can be done from here
        wait = 0.25
        if killed_at is None:
            wait = max(0.0, min(wait, deadline - now))
        for key, _ in sel.select(timeout=wait):
            try:
                data = os.read(key.fileobj.fileno(), 65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if data:
                key.data.write(data)
                key.data.feed_lines(data)
            else:
                sel.unregister(key.fileobj)
                open_pipes -= 1
    sel.close()
    for pipe in captures:
        pipe.close()
    if killed_at is not None:
        _kill_group(proc.pid, signal.SIGKILL)
    try:
        proc.wait(timeout=grace + 5.0)
    except subprocess.TimeoutExpired:
        pass
    return timed_out


def _read_worker_report(path: str) -> Optional[Dict[str, Any]]:
    try:
        with open(path, "rb") as fh:
            data = fh.read(4 * 1024 * 1024)
        report = json.loads(data.decode("utf-8"))
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


def _decide(result, report, scanner: TextScanner, timed_out: bool, term_signal, mode: str) -> None:
    gpu_mode = mode != "cpu"
    exc = report.get("exception") if report else None
    if report:
        result["phases_s"].update(report.get("phases_s") or {})
        if report.get("environment"):
            result["environment"].update(report["environment"])
        if result["determinism"] is not None:
            result["determinism"]["rng_restored"] = report.get("rng_restored", [])
    if exc:
        result["exception"] = {
            k: exc.get(k) for k in ("type", "bases", "message", "message_lines", "cuda_error_code")
        }
        result["failing_frame"] = exc.get("failing_frame")
        result["user_frames"] = [
            {k: f[k] for k in ("file", "line", "function")} for f in exc.get("frames", []) if f.get("user")
        ]
    elif report is None and scanner.fault_frames():
        from .worker import _non_user_roots, is_user_file

        roots = _non_user_roots()
        frames = [f for f in scanner.fault_frames() if is_user_file(f["file"], roots)]
        result["user_frames"] = frames
        if frames:
            result["failing_frame"] = dict(frames[-1], code=None)
    result["dsa"] = dsa_verdict(gpu_mode, scanner, (exc or {}).get("message"))
    asserts = bool(result["kernel_assertions"])

    if timed_out:
        if term_signal is not None:
            _set(result, "timeout", "terminated", f"the supervisor received signal {term_signal}")
        else:
            _set(result, "timeout", "deadline", f"the step did not finish within {result['timeout_s']} s")
        return
    if report is None:
        worker = result["worker"] or {}
        how = f"signal {worker['signal']}" if worker.get("signal") else f"exit status {worker.get('exit_code')}"
        if scanner.fatal:
            how += f" ({scanner.fatal})"
        if gpu_mode and asserts:
            _set(result, "reproduced", "worker_died_after_assert",
                 f"the worker died with {how} without a report, after a kernel assertion")
        else:
            _set(result, "harness_error", "worker_died", f"the worker died with {how} without writing {WORKER_NAME}")
        return
    status = report.get("status")
    if status == "harness_error":
        _set(result, "harness_error", report.get("reason") or report.get("phase"), report.get("detail"))
        return
    if status == "skipped":
        _set(result, "skipped", report.get("reason"), report.get("detail"))
        return
    if status == "ok":
        if gpu_mode and asserts:
            _set(result, "reproduced", "kernel_assertion_without_exception",
                 "the step returned, but a kernel assertion was printed")
        else:
            _set(result, "not_reproduced", None, "the step ran to completion without an error")
        return
    if status == "raised":
        message = (exc or {}).get("message") or ""
        if not gpu_mode and HARD_CODED_CUDA_RE.search(message):
            _set(result, "harness_error", "hard_coded_cuda_device",
                 "the replay needs a GPU in cpu mode; the entrypoint should use the device it is given")
            return
        _set(result, "reproduced" if gpu_mode else "reproduced_cpu_only", None, None)
        return
    _set(result, "harness_error", "worker_report_invalid", f"{WORKER_NAME} has status {status!r}")


# ------------------------------------------------------------------ command line


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= 7 * 86400:
        raise argparse.ArgumentTypeError("must be more than 0 and at most 604800 seconds")
    return value


def _byte_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a byte count: {text!r}") from None
    if not 4096 <= value <= 1 << 30:
        raise argparse.ArgumentTypeError("must be between 4096 and 1073741824")
    return value


def _utc_time(text: str):
    try:
        return find_mod.parse_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m assertwatch_replay",
        description="Replay one recorded training step and write a machine-readable result.",
    )
    parser.add_argument("--version", action="version", version=f"assertwatch-replay {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser("run", help="replay a recorded step")
    which = run_p.add_mutually_exclusive_group(required=True)
    which.add_argument("--manifest", help="path of the step's manifest.json")
    which.add_argument("--find-under", metavar="DIR",
                       help="find the step under this debug-state directory (the recorder's root): "
                            "the newest complete entry of --pod and --rank created by --before")
    run_p.add_argument("--pod", help="with --find-under: only entries the job recorded in this pod")
    run_p.add_argument("--rank", type=int, help="with --find-under: only entries of this rank")
    run_p.add_argument("--before", type=_utc_time, help="with --find-under: only entries created "
                                                         "at or before this RFC 3339 UTC time")
    run_p.add_argument("--mode", required=True, choices=mf.MODES)
    run_p.add_argument("--result", required=True, help="where to write result.json (atomically)")
    run_p.add_argument("--out-dir", required=True, help="directory for stdout.log, stderr.log, worker.json")
    run_p.add_argument("--timeout", type=_positive_seconds, default=None,
                       help="seconds before the worker's process group is killed (default per mode)")
    run_p.add_argument("--grace", type=_positive_seconds, default=5.0,
                       help="seconds between SIGTERM and SIGKILL on timeout (default 5)")
    run_p.add_argument("--max-output-bytes", type=_byte_count, default=DEFAULT_STREAM_CAP,
                       help="cap for each of stdout.log and stderr.log (default 8 MiB)")
    run_p.add_argument("--quiet", action="store_true", help="print nothing on success")
    run_p.add_argument("--print-result", action="store_true",
                       help="also print the result as one JSON line, last on stdout "
                            "(for replays whose result is read from a container log)")
    val_p = sub.add_parser("validate", help="check a manifest against the schema and exit 0 or 2")
    val_p.add_argument("manifest")
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "validate":
        try:
            doc = mf.load(args.manifest)
        except mf.ManifestError as exc:
            print(f"{args.manifest}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        print(f"{args.manifest}: ok ({doc['job']['name']}, step {doc['step']['global_step']})")
        return 0
    if args.find_under is None and (args.pod or args.rank is not None or args.before):
        print("assertwatch-replay: --pod, --rank and --before go with --find-under", file=sys.stderr)
        return EXIT_USAGE
    return run(args)
