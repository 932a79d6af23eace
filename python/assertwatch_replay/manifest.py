"""The debug-state manifest: schema, limits and validation.

This module is the single source of truth on the Python side for what a manifest may contain. It
imports nothing beyond the standard library, so the supervisor can validate a manifest without
torch. ``docs/manifest.md`` describes the same contract for readers in other languages; keep the two
in step.
"""

from __future__ import annotations

import json
import math
import os
import re
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional

SCHEMA = "assertwatch.debug-state/v1"
MANIFEST_NAME = "manifest.json"
MAX_MANIFEST_BYTES = 64 * 1024
MAX_EXTRA_BYTES = 16 * 1024
MAX_EXTRA_DEPTH = 8
MAX_FILES = 16
MAX_PATH_CHARS = 4096
MAX_STRING_CHARS = 4096
MAX_ARGV = 64
MAX_ENV = 32
# JSON numbers above 2**53 - 1 lose precision in common parsers; keep every integer below it.
MAX_SAFE_INT = 2**53 - 1
MAX_PID = 4194304  # Linux PID_MAX_LIMIT on 64-bit kernels (include/linux/threads.h)
MAX_ID = 2**32 - 2  # uid/gid; 2**32 - 1 is the "no id" value in the kernel ABI

MODES = ("sync-gpu", "cpu", "sanitizer")
FILE_ROLES = ("batch", "rng", "model", "optimizer", "extra_state")
REQUIRED_ROLES = ("batch", "rng")
RNG_STREAMS = ("cpu", "cuda", "python", "numpy")
MODEL_STATE_KINDS = ("full", "checkpoint_ref", "none")
PLACEHOLDERS = ("{python}", "{manifest}", "{mode}", "{result}", "{out_dir}", "{timeout_s}")
# Variables a job may ask the replay to carry. Anything else is refused: the mode variables belong
# to the harness, and loader variables such as LD_PRELOAD have no business in a replay.
ENV_ALLOW = (
    "PYTHONPATH",
    "PYTHONHASHSEED",
    "LD_LIBRARY_PATH",
    "CUBLAS_WORKSPACE_CONFIG",
    "PYTORCH_CUDA_ALLOC_CONF",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "TOKENIZERS_PARALLELISM",
    "NVIDIA_TF32_OVERRIDE",
    "HF_HOME",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
)

JOB_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
FILE_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
ENTRYPOINT_RE = re.compile(rf"^{IDENT}(?:\.{IDENT})*:{IDENT}(?:\.{IDENT})*$")
# RFC 3339 in UTC with a literal Z and 0-9 fraction digits, e.g. 2026-03-01T12:00:00.123Z.
CREATED_AT_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?Z$")
K8S_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class ManifestError(ValueError):
    """A manifest broke the contract. ``field`` is the dotted path of the offending value."""

    def __init__(self, field: str, problem: str):
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}" if field else problem)


def utc_now_rfc3339() -> str:
    """The current time as RFC 3339 UTC with millisecond precision."""
    now = datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


# --------------------------------------------------------------------------- small checkers


def _obj(value: Any, field: str, required: tuple, optional: tuple = ()) -> Dict[str, Any]:
    if not isinstance(value, dict):
        raise ManifestError(field, "must be an object")
    allowed = set(required) | set(optional)
    for key in value:
        if key not in allowed:
            raise ManifestError(_join(field, key), "unknown key")
    for key in required:
        if key not in value:
            raise ManifestError(_join(field, key), "missing")
    return value


def _join(field: str, key: Any) -> str:
    return f"{field}.{key}" if field else str(key)


def _int(value: Any, field: str, lo: int, hi: int, nullable: bool = False) -> Optional[int]:
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ManifestError(field, "must be an integer" + (" or null" if nullable else ""))
    if not lo <= value <= hi:
        raise ManifestError(field, f"must be between {lo} and {hi}")
    return value


def _bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise ManifestError(field, "must be true or false")
    return value


def _str(
    value: Any,
    field: str,
    max_chars: int = MAX_STRING_CHARS,
    nullable: bool = False,
    pattern: Optional[re.Pattern] = None,
    allow_empty: bool = False,
) -> Optional[str]:
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise ManifestError(field, "must be a string" + (" or null" if nullable else ""))
    if not value and not allow_empty:
        raise ManifestError(field, "must not be empty")
    if len(value) > max_chars:
        raise ManifestError(field, f"longer than {max_chars} characters")
    if "\x00" in value:
        raise ManifestError(field, "contains a NUL character")
    if pattern is not None and not pattern.match(value):
        raise ManifestError(field, f"does not match {pattern.pattern}")
    return value


def _abs_path(value: Any, field: str, nullable: bool = False) -> Optional[str]:
    path = _str(value, field, MAX_PATH_CHARS, nullable=nullable)
    if path is None:
        return None
    if not path.startswith("/"):
        raise ManifestError(field, "must be an absolute path")
    return path


def _number(value: Any, field: str, nullable: bool = False) -> Optional[float]:
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ManifestError(field, "must be a number" + (" or null" if nullable else ""))
    if not math.isfinite(value) or value < 0 or value > 1e9:
        raise ManifestError(field, "must be a finite number between 0 and 1e9")
    return float(value)


def _json_depth(value: Any, depth: int = 0) -> int:
    if isinstance(value, dict):
        return max([depth + 1] + [_json_depth(v, depth + 1) for v in value.values()])
    if isinstance(value, list):
        return max([depth + 1] + [_json_depth(v, depth + 1) for v in value])
    return depth


# --------------------------------------------------------------------------- sections


def _check_job(job: Any) -> None:
    _obj(job, "job", ("name", "uid", "gid", "hostname"), ("rank", "world_size", "kubernetes"))
    _str(job["name"], "job.name", 128, pattern=JOB_NAME_RE)
    _int(job["uid"], "job.uid", 0, MAX_ID)
    _int(job["gid"], "job.gid", 0, MAX_ID)
    _str(job["hostname"], "job.hostname", 255)
    _int(job.get("rank"), "job.rank", 0, 1_000_000, nullable=True)
    _int(job.get("world_size"), "job.world_size", 1, 1_000_000, nullable=True)
    k8s = job.get("kubernetes")
    if k8s is not None:
        _obj(k8s, "job.kubernetes", ("namespace", "pod"), ("container",))
        _str(k8s["namespace"], "job.kubernetes.namespace", 63, pattern=K8S_NAME_RE)
        _str(k8s["pod"], "job.kubernetes.pod", 253, pattern=K8S_NAME_RE)
        _str(k8s.get("container"), "job.kubernetes.container", 63, nullable=True, pattern=K8S_NAME_RE)


def _check_step(step: Any) -> None:
    _obj(step, "step", ("epoch", "global_step"), ("batch_index",))
    _int(step["epoch"], "step.epoch", 0, MAX_SAFE_INT)
    _int(step["global_step"], "step.global_step", 0, MAX_SAFE_INT)
    _int(step.get("batch_index"), "step.batch_index", 0, MAX_SAFE_INT, nullable=True)


def _check_created_at(value: Any) -> None:
    _str(value, "created_at", 40, pattern=CREATED_AT_RE)
    try:
        datetime.strptime(value[:19], "%Y-%m-%dT%H:%M:%S")
    except ValueError as exc:
        raise ManifestError("created_at", f"not a valid date and time ({exc})") from None


def _check_cuda_device(dev: Any) -> None:
    if dev is None:
        return
    _obj(dev, "cuda_device", ("index",), ("uuid", "name", "pci_bus_id"))
    _int(dev["index"], "cuda_device.index", 0, 1023)
    _str(dev.get("uuid"), "cuda_device.uuid", 128, nullable=True)
    _str(dev.get("name"), "cuda_device.name", 256, nullable=True)
    _str(dev.get("pci_bus_id"), "cuda_device.pci_bus_id", 64, nullable=True)


def _check_software(sw: Any) -> None:
    _obj(sw, "software", ("python", "executable"), ("torch", "cuda_runtime", "assertwatch_replay"))
    _str(sw["python"], "software.python", 64)
    _abs_path(sw["executable"], "software.executable")
    _str(sw.get("torch"), "software.torch", 64, nullable=True)
    _str(sw.get("cuda_runtime"), "software.cuda_runtime", 64, nullable=True)
    _str(sw.get("assertwatch_replay"), "software.assertwatch_replay", 64, nullable=True)


def _check_files(files: Any) -> None:
    if not isinstance(files, list):
        raise ManifestError("files", "must be a list")
    if not 1 <= len(files) <= MAX_FILES:
        raise ManifestError("files", f"must hold 1 to {MAX_FILES} entries")
    roles, paths = set(), set()
    for i, entry in enumerate(files):
        field = f"files[{i}]"
        _obj(entry, field, ("role", "path", "bytes", "sha256"), ("format",))
        role = entry["role"]
        if role not in FILE_ROLES:
            raise ManifestError(f"{field}.role", f"must be one of {', '.join(FILE_ROLES)}")
        if role in roles:
            raise ManifestError(f"{field}.role", f"duplicate role {role!r}")
        roles.add(role)
        path = _str(entry["path"], f"{field}.path", 128)
        if not FILE_NAME_RE.match(path) or path == MANIFEST_NAME:
            raise ManifestError(
                f"{field}.path",
                "must be a plain file name in the manifest's directory "
                "(letters, digits, '.', '_', '-'; no '/', not starting with '.' or '-')",
            )
        if path in paths:
            raise ManifestError(f"{field}.path", f"duplicate path {path!r}")
        paths.add(path)
        _int(entry["bytes"], f"{field}.bytes", 0, MAX_SAFE_INT)
        _str(entry["sha256"], f"{field}.sha256", 64, pattern=SHA256_RE)
        fmt = entry.get("format", "torch.save")
        if fmt != "torch.save":
            raise ManifestError(f"{field}.format", "must be \"torch.save\"")
    for role in REQUIRED_ROLES:
        if role not in roles:
            raise ManifestError("files", f"no entry with role {role!r}")


def _check_model_state(ms: Any, roles: set) -> None:
    _obj(ms, "model_state", ("kind", "exact"), ("ref", "step"))
    kind = ms["kind"]
    if kind not in MODEL_STATE_KINDS:
        raise ManifestError("model_state.kind", f"must be one of {', '.join(MODEL_STATE_KINDS)}")
    exact = _bool(ms["exact"], "model_state.exact")
    _str(ms.get("ref"), "model_state.ref", MAX_PATH_CHARS, nullable=True)
    _int(ms.get("step"), "model_state.step", 0, MAX_SAFE_INT, nullable=True)
    if kind == "full" and "model" not in roles:
        raise ManifestError("model_state.kind", "is \"full\" but no file has role \"model\"")
    if kind != "full" and "model" in roles:
        raise ManifestError("model_state.kind", "must be \"full\" when a file has role \"model\"")
    if kind == "checkpoint_ref" and not ms.get("ref"):
        raise ManifestError("model_state.ref", "required when kind is \"checkpoint_ref\"")
    if kind != "full" and exact:
        raise ManifestError("model_state.exact", "can only be true when kind is \"full\"")


def _check_determinism(det: Any) -> None:
    _obj(
        det,
        "determinism",
        ("rng_restored", "deterministic_algorithms", "compiled"),
        ("seed", "cudnn_deterministic", "cudnn_benchmark"),
    )
    streams = det["rng_restored"]
    if not isinstance(streams, list):
        raise ManifestError("determinism.rng_restored", "must be a list")
    for i, name in enumerate(streams):
        if name not in RNG_STREAMS:
            raise ManifestError(f"determinism.rng_restored[{i}]", f"must be one of {', '.join(RNG_STREAMS)}")
    if len(set(streams)) != len(streams):
        raise ManifestError("determinism.rng_restored", "has duplicates")
    _bool(det["deterministic_algorithms"], "determinism.deterministic_algorithms")
    _bool(det["compiled"], "determinism.compiled")
    _int(det.get("seed"), "determinism.seed", 0, 2**64 - 1, nullable=True)
    for key in ("cudnn_deterministic", "cudnn_benchmark"):
        if key in det:
            _bool(det[key], f"determinism.{key}")


def _check_argv(argv: Any) -> None:
    if not isinstance(argv, list):
        raise ManifestError("replay.argv", "must be a list of strings (never a shell string)")
    if not 1 <= len(argv) <= MAX_ARGV:
        raise ManifestError("replay.argv", f"must hold 1 to {MAX_ARGV} elements")
    for i, arg in enumerate(argv):
        field = f"replay.argv[{i}]"
        _str(arg, field, MAX_STRING_CHARS, allow_empty=True)
        if ("{" in arg or "}" in arg) and arg not in PLACEHOLDERS:
            raise ManifestError(
                field,
                "braces are allowed only as a whole-element placeholder: " + ", ".join(PLACEHOLDERS),
            )
    if argv[0] != "{python}" and not argv[0].startswith("/"):
        raise ManifestError("replay.argv[0]", "must be \"{python}\" or an absolute path")
    for needed in ("{manifest}", "{mode}", "{result}", "{out_dir}"):
        if needed not in argv:
            raise ManifestError("replay.argv", f"must contain the placeholder {needed}")


def _check_replay(rp: Any) -> None:
    _obj(
        rp,
        "replay",
        ("argv", "entrypoint", "env", "cwd"),
        ("modes", "requires_world_size", "estimates"),
    )
    _check_argv(rp["argv"])
    _str(rp["entrypoint"], "replay.entrypoint", 256, pattern=ENTRYPOINT_RE)
    env = rp["env"]
    if not isinstance(env, dict):
        raise ManifestError("replay.env", "must be an object of strings")
    if len(env) > MAX_ENV:
        raise ManifestError("replay.env", f"more than {MAX_ENV} entries")
    for key, value in env.items():
        if key not in ENV_ALLOW:
            raise ManifestError(f"replay.env.{key}", "variable is not on the allow-list")
        _str(value, f"replay.env.{key}", MAX_STRING_CHARS, allow_empty=True)
    _abs_path(rp["cwd"], "replay.cwd")
    modes = rp.get("modes", list(MODES))
    if not isinstance(modes, list) or not modes:
        raise ManifestError("replay.modes", "must be a non-empty list")
    for i, mode in enumerate(modes):
        if mode not in MODES:
            raise ManifestError(f"replay.modes[{i}]", f"must be one of {', '.join(MODES)}")
    if len(set(modes)) != len(modes):
        raise ManifestError("replay.modes", "has duplicates")
    _int(rp.get("requires_world_size", 1), "replay.requires_world_size", 1, 1_000_000)
    est = rp.get("estimates")
    if est is not None:
        _obj(est, "replay.estimates", (), ("step_seconds", "gpu_memory_bytes"))
        _number(est.get("step_seconds"), "replay.estimates.step_seconds", nullable=True)
        _int(est.get("gpu_memory_bytes"), "replay.estimates.gpu_memory_bytes", 0, MAX_SAFE_INT, nullable=True)


def _check_extra(extra: Any) -> None:
    if not isinstance(extra, dict):
        raise ManifestError("extra", "must be an object")
    try:
        size = len(json.dumps(extra, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode())
    except (TypeError, ValueError) as exc:
        raise ManifestError("extra", f"must be plain JSON ({exc})") from None
    if size > MAX_EXTRA_BYTES:
        raise ManifestError("extra", f"{size} bytes when serialised; the limit is {MAX_EXTRA_BYTES}")
    if _json_depth(extra) > MAX_EXTRA_DEPTH:
        raise ManifestError("extra", f"nested deeper than {MAX_EXTRA_DEPTH} levels")


TOP_REQUIRED = (
    "schema",
    "job",
    "step",
    "created_at",
    "pid",
    "cuda_device",
    "log_file",
    "software",
    "files",
    "model_state",
    "determinism",
    "replay",
)
TOP_OPTIONAL = ("extra",)


def validate(doc: Any) -> Dict[str, Any]:
    """Check a parsed manifest against schema v1. Returns it unchanged or raises ManifestError."""
    if not isinstance(doc, dict):
        raise ManifestError("", "the manifest must be a JSON object")
    if "schema" in doc and doc["schema"] != SCHEMA:
        raise ManifestError("schema", f"must be {SCHEMA!r}, found {doc['schema']!r}")
    _obj(doc, "", TOP_REQUIRED, TOP_OPTIONAL)
    _check_job(doc["job"])
    _check_step(doc["step"])
    _check_created_at(doc["created_at"])
    _int(doc["pid"], "pid", 1, MAX_PID)
    _check_cuda_device(doc["cuda_device"])
    _abs_path(doc["log_file"], "log_file", nullable=True)
    _check_software(doc["software"])
    _check_files(doc["files"])
    _check_model_state(doc["model_state"], {f["role"] for f in doc["files"]})
    _check_determinism(doc["determinism"])
    _check_replay(doc["replay"])
    if "extra" in doc:
        _check_extra(doc["extra"])
    return doc


def _reject_duplicates(pairs: List[tuple]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ManifestError(str(key), "duplicate key")
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise ManifestError("", f"{name} is not valid JSON")


def parse(data: bytes) -> Dict[str, Any]:
    """Parse and validate manifest bytes (size, UTF-8, strict JSON, schema)."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise ManifestError("", f"manifest is {len(data)} bytes; the limit is {MAX_MANIFEST_BYTES}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestError("", f"not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        doc = json.loads(text, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ManifestError("", f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    return validate(doc)


def load(path: str) -> Dict[str, Any]:
    """Read, bound and validate a manifest file. Refuses symlinks and non-regular files."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ManifestError("", f"cannot open {path}: {exc.strerror}") from None
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ManifestError("", f"{path} is not a regular file")
        chunks = []
        remaining = MAX_MANIFEST_BYTES + 1
        while remaining > 0:
            chunk = os.read(fd, remaining)
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    finally:
        os.close(fd)
    return parse(b"".join(chunks))


def file_entry(doc: Dict[str, Any], role: str) -> Optional[Dict[str, Any]]:
    for entry in doc["files"]:
        if entry["role"] == role:
            return entry
    return None


def dumps(doc: Dict[str, Any]) -> bytes:
    """Serialise a manifest the way the recorder writes it (sorted keys, UTF-8, newline-terminated)."""
    return (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n").encode()
