"""Recorder: keeps the debug state of the last K training steps on disk.

A device-side assert leaves the CUDA context unusable, so nothing can be saved once it has fired.
The recorder therefore runs *before* every step and keeps a small ring of committed entries::

    <root>/<job>/rank-<rank:05d>/
        ring/step-<global_step:012d>/
            batch.pt  rng.pt  [model.pt]  [optimizer.pt]  [extra_state.pt]
            manifest.json          <- written last; its presence commits the entry
        latest.json                <- {"step_dir": "ring/step-..."}, replaced atomically

Every state file is written to a temporary name, fsynced and renamed; the manifest follows the same
way only after all of them, so an entry without ``manifest.json`` is incomplete and readers ignore
it. Entries that fall out of the ring are removed only after the new one is committed, manifest
first. See docs/manifest.md for the manifest contract.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import socket
import sys
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import torch

from . import __version__
from . import manifest as mf
from .fsutil import atomic_write, atomic_write_bytes, fsync_dir

STEP_DIR_PREFIX = "step-"
log = logging.getLogger("assertwatch_replay")
DEFAULT_ARGV = (
    "{python}",
    "-m",
    "assertwatch_replay",
    "run",
    "--manifest",
    "{manifest}",
    "--mode",
    "{mode}",
    "--result",
    "{result}",
    "--out-dir",
    "{out_dir}",
    "--timeout",
    "{timeout_s}",
)

BatchLike = Any
CheckpointRef = Union[str, os.PathLike, Mapping[str, Any], None]


class RecorderError(RuntimeError):
    """Raised for misuse of the recorder (bad arguments, unsupported batch contents)."""


def step_dir_name(global_step: int) -> str:
    return f"{STEP_DIR_PREFIX}{global_step:012d}"


def to_cpu(obj: Any, path: str = "batch") -> Any:
    """Copy a batch to host memory in a form ``torch.load(weights_only=True)`` accepts.

    Tensors are detached and copied to the CPU; dicts (string keys), lists and tuples are walked;
    numpy arrays become tensors; ints, floats, bools, strings, bytes and None pass through.
    Anything else raises RecorderError naming where it was found.
    """
    if isinstance(obj, torch.Tensor):
        out = obj.detach()
        if out.device.type != "cpu":
            out = out.to("cpu")
        elif out.requires_grad or out.is_shared():
            out = out.clone()
        return out
    if obj is None or isinstance(obj, (bool, int, float, str, bytes)):
        return obj
    if isinstance(obj, Mapping):
        out_map = {}
        for key, value in obj.items():
            if not isinstance(key, (str, int)):
                raise RecorderError(f"{path}: dict keys must be str or int, found {type(key).__name__}")
            out_map[key] = to_cpu(value, f"{path}[{key!r}]")
        return out_map
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        # Named tuples are not weights-only loadable; keep their fields as a dict.
        return {name: to_cpu(getattr(obj, name), f"{path}.{name}") for name in obj._fields}
    if isinstance(obj, (list, tuple)):
        items = [to_cpu(value, f"{path}[{i}]") for i, value in enumerate(obj)]
        return tuple(items) if isinstance(obj, tuple) else items
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.ndarray):
        return torch.from_numpy(obj.copy())
    if np is not None and isinstance(obj, np.generic):
        return obj.item()
    raise RecorderError(
        f"{path}: cannot record a {type(obj).__module__}.{type(obj).__name__}; "
        "pass tensors, numbers, strings or dicts/lists/tuples of them"
    )


def capture_rng() -> Dict[str, Any]:
    """The CPU, CUDA, python and numpy RNG states, stored as tensors and plain numbers only.

    ``np.random.get_state()`` and ``random.getstate()`` hold a numpy array and a tuple of Python
    ints; ``torch.load(weights_only=True)`` refuses numpy objects, so both are converted.
    CUDA state is read only when the job has already initialised CUDA: the recorder never does.
    """
    state: Dict[str, Any] = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = list(torch.cuda.get_rng_state_all())
    version, internal, gauss_next = random.getstate()
    state["python"] = {
        "version": int(version),
        "state": torch.tensor(internal, dtype=torch.int64),
        "gauss_next": gauss_next,
    }
    np = sys.modules.get("numpy")
    if np is not None:
        name, keys, pos, has_gauss, cached = np.random.get_state()
        state["numpy"] = {
            "name": str(name),
            "keys": torch.from_numpy(keys.astype("int64")),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        }
    return state


def _cuda_device_info() -> Optional[Dict[str, Any]]:
    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return None
    index = torch.cuda.current_device()
    info: Dict[str, Any] = {"index": index, "uuid": None, "name": None, "pci_bus_id": None}
    try:
        props = torch.cuda.get_device_properties(index)
        info["name"] = props.name
        uuid = getattr(props, "uuid", None)
        if uuid is not None:
            text = str(uuid)
            info["uuid"] = text if text.startswith("GPU-") else f"GPU-{text}"
        bus = getattr(props, "pci_bus_id", None)
        if bus is not None:
            domain = getattr(props, "pci_domain_id", 0)
            device = getattr(props, "pci_device_id", 0)
            info["pci_bus_id"] = f"{domain:08X}:{bus:02X}:{device:02X}.0"
    except Exception:  # device properties are a nicety; never fail a training step over them
        pass
    return info


def _kubernetes_from_env() -> Optional[Dict[str, Any]]:
    pod = os.environ.get("POD_NAME")
    namespace = os.environ.get("POD_NAMESPACE")
    if not pod or not namespace:
        return None
    out = {"namespace": namespace, "pod": pod}
    if os.environ.get("CONTAINER_NAME"):
        out["container"] = os.environ["CONTAINER_NAME"]
    return out


def _env_int(names: Sequence[str]) -> Optional[int]:
    for name in names:
        value = os.environ.get(name)
        if value is not None and value.isdigit():
            return int(value)
    return None


class Recorder:
    """Records the state needed to replay one training step, for the last ``keep`` steps.

    Typical use::

        rec = Recorder("/scratch/debug-state", job="resnet-a", entrypoint="train:replay_step",
                       log_file="/scratch/logs/train.log", extra={"n_classes": 10})
        for step, batch in enumerate(loader):
            rec.record(step=step, epoch=epoch, batch=batch, checkpoint_ref=last_ckpt)
            ...

    Pass the batch as the data loader produced it, before it is moved to the GPU: copying device
    tensors back to the host synchronises the device on every step.
    """

    def __init__(
        self,
        root: Union[str, os.PathLike],
        job: str,
        keep: int = 3,
        entrypoint: str = "",
        log_file: Union[str, os.PathLike, None] = None,
        extra: Optional[Mapping[str, Any]] = None,
        *,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        cwd: Union[str, os.PathLike, None] = None,
        env: Optional[Mapping[str, str]] = None,
        argv: Optional[Sequence[str]] = None,
        modes: Optional[Sequence[str]] = None,
        seed: Optional[int] = None,
        compiled: bool = False,
        enabled: bool = True,
        durable: bool = True,
        on_error: str = "warn",
    ):
        if not isinstance(keep, int) or isinstance(keep, bool) or not 1 <= keep <= 100:
            raise RecorderError("keep must be an integer between 1 and 100")
        if not mf.JOB_NAME_RE.match(job or ""):
            raise RecorderError(f"job name {job!r} must match {mf.JOB_NAME_RE.pattern}")
        if not mf.ENTRYPOINT_RE.match(entrypoint or ""):
            raise RecorderError(f"entrypoint {entrypoint!r} must look like 'package.module:function'")
        if on_error not in ("warn", "raise"):
            raise RecorderError("on_error must be 'warn' or 'raise'")
        self.enabled = enabled
        self.durable = durable
        self.on_error = on_error
        self.write_errors = 0
        self.job = job
        self.keep = keep
        self.entrypoint = entrypoint
        self.log_file = os.path.abspath(os.fspath(log_file)) if log_file else None
        self.extra = dict(extra or {})
        self.rank = rank if rank is not None else (_env_int(("RANK",)) or 0)
        self.world_size = world_size if world_size is not None else _env_int(("WORLD_SIZE",))
        self.cwd = os.path.abspath(os.fspath(cwd)) if cwd else os.getcwd()
        self.env = dict(env or {})
        self.argv = list(argv or DEFAULT_ARGV)
        self.modes = list(modes or mf.MODES)
        self.seed = seed
        self.compiled = compiled
        self.job_dir = os.path.join(os.path.abspath(os.fspath(root)), job, f"rank-{self.rank:05d}")
        self.ring_dir = os.path.join(self.job_dir, "ring")
        self._hostname = socket.gethostname()
        self._last_time: Optional[float] = None
        self._step_seconds: Optional[float] = None
        self.last_overhead_s: Optional[float] = None
        # Validate the static half of the manifest now, so a mistake fails at start, not at step 1.
        if self.enabled:
            os.makedirs(self.ring_dir, exist_ok=True)
            mf._check_replay(self._replay_section())
            mf._check_extra(self.extra)

    # ------------------------------------------------------------------ public API

    def record(
        self,
        step: int,
        batch: BatchLike,
        epoch: int = 0,
        model: Optional[torch.nn.Module] = None,
        optimizer: Optional[torch.optim.Optimizer] = None,
        checkpoint_ref: CheckpointRef = None,
        extra_state: Any = None,
        batch_index: Optional[int] = None,
    ) -> Optional[str]:
        """Save the state for ``step`` (call it before running the step). Returns the manifest path.

        ``model``/``optimizer``: their full state dicts are saved (exact weights; costly for big
        models). ``checkpoint_ref``: a path, or ``{"ref": path, "step": n}``, naming the last regular
        checkpoint instead. ``extra_state``: any tensors/plain data the replay needs (grad scaler,
        counters); it reaches the entrypoint as ``state["extra_state"]``.

        A failed write (disk full, a vanished mount) is logged and the step is not recorded
        (returns None) unless the recorder was built with ``on_error="raise"``: a debugging aid
        must not stop a training run. Unsupported batch contents always raise RecorderError.
        """
        if not self.enabled:
            return None
        try:
            return self._record(step, batch, epoch, model, optimizer, checkpoint_ref, extra_state, batch_index)
        except OSError as exc:
            # Disk full, quota, a vanished mount: debugging aids must not kill the training run.
            self.write_errors += 1
            if self.on_error == "raise":
                raise
            if self.write_errors == 1 or self.write_errors % 1000 == 0:
                log.warning("assertwatch-replay: could not record step %s (%s); %d failures so far",
                            step, exc, self.write_errors)
            try:
                _remove_entry(os.path.join(self.ring_dir, step_dir_name(step)), durable=False)
            except OSError:
                pass
            return None

    def _record(self, step, batch, epoch, model, optimizer, checkpoint_ref, extra_state, batch_index):
        started = time.perf_counter()
        if self._last_time is not None:
            interval = started - self._last_time
            self._step_seconds = (
                interval if self._step_seconds is None else 0.8 * self._step_seconds + 0.2 * interval
            )
        self._last_time = started

        entry = os.path.join(self.ring_dir, step_dir_name(step))
        self._clear_entry(entry)
        os.makedirs(entry)
        files: List[Dict[str, Any]] = []
        files.append(self._save(entry, "batch", to_cpu(batch)))
        rng = capture_rng()
        files.append(self._save(entry, "rng", rng))
        model_state: Dict[str, Any] = {"kind": "none", "exact": False, "ref": None, "step": None}
        if model is not None:
            files.append(self._save(entry, "model", to_cpu(model.state_dict(), "model")))
            model_state = {"kind": "full", "exact": True, "ref": None, "step": step}
        elif checkpoint_ref is not None:
            model_state = self._checkpoint_section(checkpoint_ref)
        if optimizer is not None:
            files.append(self._save(entry, "optimizer", to_cpu(optimizer.state_dict(), "optimizer")))
        if extra_state is not None:
            files.append(self._save(entry, "extra_state", to_cpu(extra_state, "extra_state")))

        doc = self._manifest(step, epoch, batch_index, files, model_state, sorted(rng))
        mf.validate(doc)
        if self.durable:
            fsync_dir(entry)  # the state files' names are on disk before the commit
        manifest_path = os.path.join(entry, mf.MANIFEST_NAME)
        atomic_write_bytes(manifest_path, mf.dumps(doc), fsync=self.durable)  # the commit point
        # latest.json is a hint for readers; listing ring/ is the ground truth, so no fsync.
        latest = mf.dumps({"step_dir": os.path.join("ring", step_dir_name(step))})
        atomic_write_bytes(os.path.join(self.job_dir, "latest.json"), latest, fsync=False)
        self._prune(keep_name=step_dir_name(step))
        self.last_overhead_s = time.perf_counter() - started
        return manifest_path

    def entries(self) -> List[str]:
        """Committed ring entries (directories holding a manifest), oldest first."""
        return committed_entries(self.ring_dir)

    # ------------------------------------------------------------------ internals

    def _save(self, entry: str, role: str, obj: Any) -> Dict[str, Any]:
        name = f"{role}.pt"
        size, digest = atomic_write(
            os.path.join(entry, name), lambda f: torch.save(obj, f), fsync=self.durable, sync_dir=False
        )
        return {"role": role, "path": name, "bytes": size, "sha256": digest, "format": "torch.save"}

    def _checkpoint_section(self, ref: CheckpointRef) -> Dict[str, Any]:
        if isinstance(ref, Mapping):
            path = ref.get("ref") or ref.get("path")
            step = ref.get("step")
        else:
            path, step = ref, None
        if not path:
            raise RecorderError("checkpoint_ref needs a path")
        return {"kind": "checkpoint_ref", "exact": False, "ref": os.fspath(path), "step": step}

    def _replay_section(self) -> Dict[str, Any]:
        estimates: Dict[str, Any] = {"step_seconds": None, "gpu_memory_bytes": None}
        if self._step_seconds is not None:
            estimates["step_seconds"] = round(self._step_seconds, 6)
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            try:
                estimates["gpu_memory_bytes"] = int(torch.cuda.max_memory_allocated())
            except Exception:
                pass
        return {
            "argv": list(self.argv),
            "entrypoint": self.entrypoint,
            "env": dict(self.env),
            "cwd": self.cwd,
            "modes": list(self.modes),
            "requires_world_size": 1,
            "estimates": estimates,
        }

    def _manifest(self, step, epoch, batch_index, files, model_state, rng_streams) -> Dict[str, Any]:
        return {
            "schema": mf.SCHEMA,
            "job": {
                "name": self.job,
                "uid": os.getuid(),
                "gid": os.getgid(),
                "hostname": self._hostname,
                "rank": self.rank,
                "world_size": self.world_size,
                "kubernetes": _kubernetes_from_env(),
            },
            "step": {"epoch": epoch, "global_step": step, "batch_index": batch_index},
            "created_at": mf.utc_now_rfc3339(),
            "pid": os.getpid(),
            "cuda_device": _cuda_device_info(),
            "log_file": self.log_file,
            "software": {
                "python": ".".join(str(v) for v in sys.version_info[:3]),
                "executable": os.path.abspath(sys.executable),
                "torch": torch.__version__,
                "cuda_runtime": torch.version.cuda,
                "assertwatch_replay": __version__,
            },
            "files": files,
            "model_state": model_state,
            "determinism": {
                "rng_restored": rng_streams,
                "seed": self.seed,
                "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
                "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
                "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
                "compiled": bool(self.compiled),
            },
            "replay": self._replay_section(),
            "extra": self.extra,
        }

    def _clear_entry(self, entry: str) -> None:
        """Remove a leftover entry of the same step (a restarted job, or a torn write)."""
        if os.path.lexists(entry):
            _remove_entry(entry, self.durable)

    def _prune(self, keep_name: str) -> None:
        # Newest by commit time, not by step number: a job restarted from an earlier checkpoint
        # writes lower step numbers, and the entries of its previous run are the stale ones.
        names = [n for n in os.listdir(self.ring_dir) if n.startswith(STEP_DIR_PREFIX)]
        committed = []
        for name in names:
            try:
                stamp = os.stat(os.path.join(self.ring_dir, name, mf.MANIFEST_NAME)).st_mtime_ns
            except OSError:
                continue
            committed.append((stamp, name))
        committed.sort()
        survivors = {name for _, name in committed[-self.keep :]} | {keep_name}
        for name in names:
            if name not in survivors:
                _remove_entry(os.path.join(self.ring_dir, name), self.durable)


def _remove_entry(entry: str, durable: bool = True) -> None:
    """Uncommit (manifest first, durably), then delete the rest of an entry."""
    manifest_path = os.path.join(entry, mf.MANIFEST_NAME)
    if os.path.isdir(entry) and not os.path.islink(entry):
        try:
            os.unlink(manifest_path)
            if durable:
                fsync_dir(entry)
        except FileNotFoundError:
            pass
        shutil.rmtree(entry, ignore_errors=True)
    else:
        os.unlink(entry)


def committed_entries(ring_dir: str) -> List[str]:
    """Entry directories under ``ring_dir`` that hold a manifest, oldest step first."""
    try:
        names = sorted(os.listdir(ring_dir))
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        path = os.path.join(ring_dir, name)
        if name.startswith(STEP_DIR_PREFIX) and os.path.isfile(os.path.join(path, mf.MANIFEST_NAME)):
            out.append(path)
    return out
