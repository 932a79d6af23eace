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

``record()`` only takes what must be taken on the training thread (references to the CPU batch,
copies of the RNG states and of any weights, the step's metadata); a ``writer.BackgroundWriter``
thread does the serialising, writing, fsyncing and pruning, and is flushed when the process ends.
"""

from __future__ import annotations

import ctypes
import logging
import os
import random
import shutil
import socket
import sys
import time
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch

from . import __version__
from . import manifest as mf
from . import writer as writer_mod
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

COPY_MODES = ("auto", "always")
GPU_COPY_MODES = ("sync", "async")

BatchLike = Any
CheckpointRef = Union[str, os.PathLike, Mapping[str, Any], None]


class RecorderError(RuntimeError):
    """Raised for misuse of the recorder (bad arguments, unsupported batch contents)."""


def step_dir_name(global_step: int) -> str:
    return f"{STEP_DIR_PREFIX}{global_step:012d}"


class _Attr(str):
    """A named tuple's field name inside a snapshot path (printed as ``.name``, not ``['name']``)."""


def _path_text(path: Any) -> str:
    """A snapshot path, nested ``(parent, key)`` pairs around a root name, as ``batch['x'][0].f``."""
    keys = []
    while isinstance(path, tuple):
        path, key = path
        keys.append(key)
    text = str(path)
    for key in reversed(keys):
        text += f".{key}" if isinstance(key, _Attr) else f"[{key!r}]"
    return text


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
    """The CPU, CUDA, python and numpy RNG states, stored as tensors and plain numbers only."""
    return _rng_tensors(_take_rng())


def _take_rng() -> Dict[str, Any]:
    """The RNG states as the libraries return them: the cheap half, done on the training thread.

    CUDA state is read only when the job has already initialised CUDA: the recorder never does.
    A CUDA generator's state is its Philox seed and offset, kept on the host: ``get_state()``
    packs them into a small CPU tensor without any device work or synchronisation (PyTorch
    aten/src/ATen/cuda/CUDAGeneratorImpl.cpp, ``CUDAGeneratorImpl::get_state``).
    """
    raw: Dict[str, Any] = {"cpu": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_initialized():  # implies is_available(), which reads the environment each call
        try:
            raw["cuda"] = [gen.get_state() for gen in torch.cuda.default_generators]
        except RuntimeError:  # e.g. during CUDA graph capture; the replay then runs without it
            pass
    np = sys.modules.get("numpy")
    if np is not None:
        raw["numpy"] = _NUMPY_RNG.take(np)
    return raw


class _NumpyRngWatch:
    """numpy's global RNG state, re-read with ``get_state()`` only when it moved.

    ``np.random.get_state()`` copies the 624-word Mersenne Twister key into a new array one element
    at a time, about 55 microseconds per call, the largest single cost of ``record()``. Most
    training steps never draw from numpy's global generator, so each call first reads the raw
    state struct of the legacy ``RandomState`` (the key words and the position, through the bit
    generator's documented ``ctypes.state_address``) and, when those bytes are what they were at
    the last full read, returns that read's tuple again. Any draw moves the position (and a full
    turn regenerates the key), and seeding rewrites both. The one change that moves neither is
    handing out a cached second Gaussian (``has_gauss`` 1 to 0, kept outside the struct), so a
    read that found a cached Gaussian is never reused. (Left out: ``set_state()`` of a state with
    the very key and position of the live one but a cached Gaussian it does not have.) The struct
    layout (``uint32 key[624]; int pos``, numpy's ``random/src/mt19937/mt19937.h``) is checked
    against every full read; on a mismatch, or without ctypes access, every call reads the full
    state as before.
    """

    KEY_WORDS = 624
    STRUCT_BYTES = KEY_WORDS * 4 + 4

    def __init__(self) -> None:
        self._rand: Any = None
        self._addr: Optional[int] = None
        self._last: Optional[Tuple[bytes, Any]] = None  # one attribute: swapped atomically

    def take(self, np: Any) -> Any:
        rand = getattr(getattr(np.random, "mtrand", None), "_rand", None)
        if rand is None:
            return np.random.get_state()
        if rand is not self._rand:
            self._rand, self._last = rand, None
            try:
                self._addr = int(rand._bit_generator.ctypes.state_address)
            except Exception:  # no ctypes interface: always the full read
                self._addr = None
        if self._addr is None:
            return rand.get_state()
        raw = ctypes.string_at(self._addr, self.STRUCT_BYTES)
        last = self._last
        if last is not None and raw == last[0] and not last[1][3]:
            return last[1]
        state = rand.get_state()  # a tuple holding a fresh copy of the key array
        if not self._layout_matches(raw, state):
            # Another thread drew in between, or the struct is not laid out as expected: read it
            # again after the full read; a second mismatch turns the fast path off for good.
            raw = ctypes.string_at(self._addr, self.STRUCT_BYTES)
            if not self._layout_matches(raw, state):
                self._addr = None
                return state
        self._last = (raw, state)
        return state

    def _layout_matches(self, raw: bytes, state: Any) -> bool:
        try:
            name, keys, pos = state[0], state[1], state[2]
            return (
                name == "MT19937"
                and raw[: self.KEY_WORDS * 4] == keys.tobytes()
                and int.from_bytes(raw[self.KEY_WORDS * 4:], sys.byteorder, signed=True) == int(pos)
            )
        except Exception:
            return False


_NUMPY_RNG = _NumpyRngWatch()


def _rng_tensors(raw: Mapping[str, Any]) -> Dict[str, Any]:
    """Convert ``_take_rng()``'s result into what ``torch.load(weights_only=True)`` accepts.

    ``np.random.get_state()`` and ``random.getstate()`` hold a numpy array and a tuple of Python
    ints; weights-only loading refuses numpy objects, so both become tensors.
    """
    state: Dict[str, Any] = {"cpu": raw["cpu"]}
    if "cuda" in raw:
        state["cuda"] = list(raw["cuda"])
    if raw.get("python") is not None:
        version, internal, gauss_next = raw["python"]
        state["python"] = {
            "version": int(version),
            "state": torch.tensor(internal, dtype=torch.int64),
            "gauss_next": gauss_next,
        }
    if "numpy" in raw:
        name, keys, pos, has_gauss, cached = raw["numpy"][:5]
        state["numpy"] = {
            "name": str(name),
            "keys": torch.from_numpy(keys.astype("int64")),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        }
    return state


def _rfc3339(stamp: float) -> str:
    """``stamp`` as RFC 3339 UTC with millisecond precision, the manifest's ``created_at`` format."""
    now = datetime.fromtimestamp(stamp, timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def _gpu_memory() -> Optional[int]:
    try:
        return int(torch.cuda.max_memory_allocated())  # host-side allocator statistics
    except Exception:
        return None


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


_NO_MODEL_STATE = {"kind": "none", "exact": False, "ref": None, "step": None}


class _Taken:
    """One step as taken on the training thread: references, small copies and metadata only."""

    __slots__ = ("step", "epoch", "batch_index", "batch", "rng", "model", "optimizer", "extra_state",
                 "model_state", "watched", "events", "created_at", "estimates", "determinism", "cuda_device")


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

    ``record()`` takes references on the training thread and leaves serialising and writing to a
    background thread (``background=False`` writes synchronously, as earlier versions did).
    ``copy="auto"`` keeps CPU tensors by reference and checks their version counters before the
    entry is committed; ``copy="always"`` copies them on ``record()``. ``gpu_copy="sync"`` copies
    device tensors with a plain (synchronising) ``.to("cpu")``; ``"async"`` copies them into
    pinned memory on a side stream. Call ``record()`` from one thread.
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
        background: bool = True,
        queue_size: Optional[int] = None,
        copy: str = "auto",
        gpu_copy: str = "sync",
        exit_timeout_s: float = writer_mod.DEFAULT_EXIT_TIMEOUT_S,
        handle_sigterm: bool = True,
    ):
        if not isinstance(keep, int) or isinstance(keep, bool) or not 1 <= keep <= 100:
            raise RecorderError("keep must be an integer between 1 and 100")
        if not mf.JOB_NAME_RE.match(job or ""):
            raise RecorderError(f"job name {job!r} must match {mf.JOB_NAME_RE.pattern}")
        if not mf.ENTRYPOINT_RE.match(entrypoint or ""):
            raise RecorderError(f"entrypoint {entrypoint!r} must look like 'package.module:function'")
        if on_error not in ("warn", "raise"):
            raise RecorderError("on_error must be 'warn' or 'raise'")
        if copy not in COPY_MODES:
            raise RecorderError(f"copy must be one of {', '.join(COPY_MODES)}")
        if gpu_copy not in GPU_COPY_MODES:
            raise RecorderError(f"gpu_copy must be one of {', '.join(GPU_COPY_MODES)}")
        if queue_size is None:
            queue_size = keep  # at exit, the whole ring can be filled from the queue
        if not isinstance(queue_size, int) or isinstance(queue_size, bool) or not 1 <= queue_size <= 100:
            raise RecorderError("queue_size must be an integer between 1 and 100")
        self.enabled = enabled
        self.durable = durable
        self.on_error = on_error
        self.background = background
        self.copy = copy
        self.gpu_copy = gpu_copy
        self.write_errors = 0
        self.mutated_steps = 0
        self.bytes_written = 0
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
        self._cuda_info: Dict[int, Optional[Dict[str, Any]]] = {}
        self._side_streams: Dict[Any, Any] = {}
        self._deferred: Optional[BaseException] = None
        self._warned_drop = False
        self.last_overhead_s: Optional[float] = None
        self._writer = writer_mod.BackgroundWriter(
            self._write_guarded, maxsize=queue_size, name=f"assertwatch-writer-{job}", on_drop=self._on_drop
        )
        # Validate the static half of the manifest now, so a mistake fails at start, not at step 1.
        if self.enabled:
            os.makedirs(self.ring_dir, exist_ok=True)
            mf._check_replay(self._replay_section(None, None))
            mf._check_extra(self.extra)
            if self.background:
                writer_mod.register(self, exit_timeout_s, sigterm=handle_sigterm)

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

        In the background mode (the default) the entry is committed later, by the writer thread;
        the path returned is where its manifest will be (``flush()`` waits for it). A step the
        writer had to drop (it fell behind, or the batch was modified in place, see ``copy``) never
        appears there.

        ``model``/``optimizer``: their full state dicts are copied on this thread and saved (exact
        weights; costly for big models). ``checkpoint_ref``: a path, or ``{"ref": path, "step": n}``,
        naming the last regular checkpoint instead. ``extra_state``: any tensors/plain data the
        replay needs (grad scaler, counters); it reaches the entrypoint as ``state["extra_state"]``.

        A failed write (disk full, a vanished mount) is logged and the step is not recorded
        (returns None in the synchronous mode) unless the recorder was built with
        ``on_error="raise"``: then the ``OSError`` is raised, by this call in the synchronous mode
        or by the next ``record()``/``flush()`` in the background mode. Unsupported batch contents
        always raise RecorderError from this call.
        """
        if not self.enabled:
            return None
        self._raise_deferred()
        started = time.perf_counter()
        if self._last_time is not None:
            interval = started - self._last_time
            self._step_seconds = (
                interval if self._step_seconds is None else 0.8 * self._step_seconds + 0.2 * interval
            )
        self._last_time = started
        taken = self._take(step, batch, epoch, model, optimizer, checkpoint_ref, extra_state, batch_index)
        if self.background:
            self._writer.put(taken)
            result: Optional[str] = os.path.join(self.ring_dir, step_dir_name(step), mf.MANIFEST_NAME)
        else:
            result = self._write_guarded(taken)
            self._raise_deferred()
        self.last_overhead_s = time.perf_counter() - started
        return result

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Wait until every step handed to ``record()`` is committed or dropped.

        Returns False if ``timeout`` seconds passed first. Re-raises a write error held back for
        ``on_error="raise"``.
        """
        done = self._writer.flush(timeout) if self.background else True
        self._raise_deferred()
        return done

    def close(self, timeout: Optional[float] = None) -> bool:
        """Flush and stop the writer thread (a later ``record()`` starts it again)."""
        done = self._writer.close(timeout) if self.background else True
        self._raise_deferred()
        return done

    def stats(self) -> Dict[str, Any]:
        """Counters of the recorder and its writer (exact after ``flush()``)."""
        w = self._writer
        return {
            "steps_written": w.written if self.background else None,
            "steps_dropped": w.dropped,
            "steps_mutated": self.mutated_steps,
            "write_errors": self.write_errors,
            "bytes_written": self.bytes_written,
            "writer_busy_s": round(w.busy_s, 6),
            "writer_cpu_s": round(w.cpu_s, 6),
            "max_queued": w.max_queued,
            "queue_size": w.maxsize,
            "copy": self.copy,
        }

    def entries(self) -> List[str]:
        """Committed ring entries (directories holding a manifest), oldest first."""
        return committed_entries(self.ring_dir)

    # ------------------------------------------------------------------ training thread

    def _take(self, step, batch, epoch, model, optimizer, checkpoint_ref, extra_state, batch_index) -> _Taken:
        if type(step) is not int or type(epoch) is not int or step < 0 or epoch < 0 or (
                batch_index is not None and (type(batch_index) is not int or batch_index < 0)):
            # The slow path names the culprit (and accepts int subclasses other than bool).
            for name, value in (("step", step), ("epoch", epoch), ("batch_index", batch_index)):
                if value is None and name == "batch_index":
                    continue
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise RecorderError(f"{name} must be a non-negative integer, not {value!r}")
        t = _Taken()
        t.step, t.epoch, t.batch_index = step, epoch, batch_index
        t.watched, t.events = [], []
        copy_all = self.copy == "always"
        t.batch = self._snapshot(batch, "batch", t, copy_all)
        t.rng = _take_rng()
        t.model = t.optimizer = t.extra_state = None
        t.model_state = _NO_MODEL_STATE  # read-only; replaced below, never changed in place
        # Weights and optimizer state change in place at every optimizer step: always copied.
        if model is not None:
            t.model = self._snapshot(model.state_dict(), "model", t, True)
            t.model_state = {"kind": "full", "exact": True, "ref": None, "step": step}
        elif checkpoint_ref is not None:
            t.model_state = self._checkpoint_section(checkpoint_ref)
        if optimizer is not None:
            t.optimizer = self._snapshot(optimizer.state_dict(), "optimizer", t, True)
        if extra_state is not None:
            t.extra_state = self._snapshot(extra_state, "extra_state", t, copy_all)
        t.created_at = time.time()  # formatted by the writer
        cuda_ready = torch.cuda.is_initialized()
        t.estimates = (self._step_seconds, _gpu_memory() if cuda_ready else None)
        t.cuda_device = self._cuda_device_info() if cuda_ready else None
        t.determinism = {
            "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
            "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
            "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        }
        return t

    def _snapshot(self, obj: Any, path: Any, taken: _Taken, copy: bool) -> Any:
        """What ``record()`` keeps of ``obj``: references to CPU tensors (watched), copies of the rest.

        Validates the structure as ``to_cpu`` does, so unsupported contents fail on this thread.
        ``path`` names where ``obj`` sits, as a root name or a ``(parent, key)`` pair that
        ``_path_text`` formats only when a message needs it (building the text for every key
        would cost more than the rest of the walk).
        """
        if isinstance(obj, torch.Tensor):
            # A plain tensor outside autograd is kept as it is (a detach() costs more than the rest
            # of the walk for a small batch); otherwise a detached view, which shares storage and
            # version counter with obj.
            t = obj if type(obj) is torch.Tensor and not obj.requires_grad else obj.detach()
            if t.is_cpu:
                if copy or t.is_inference():  # inference tensors have no version counter
                    return t.clone()
                taken.watched.append((t, t._version, path))
                return t
            return self._from_device(t, path, taken)
        if obj is None or isinstance(obj, (bool, int, float, str, bytes)):
            return obj
        if type(obj) is dict or isinstance(obj, Mapping):  # the exact type first: the ABC check is slower
            out_map = {}
            for key, value in obj.items():
                if not isinstance(key, (str, int)):
                    raise RecorderError(
                        f"{_path_text(path)}: dict keys must be str or int, found {type(key).__name__}")
                out_map[key] = self._snapshot(value, (path, key), taken, copy)
            return out_map
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):
            return {name: self._snapshot(getattr(obj, name), (path, _Attr(name)), taken, copy)
                    for name in obj._fields}
        if isinstance(obj, (list, tuple)):
            items = [self._snapshot(value, (path, i), taken, copy) for i, value in enumerate(obj)]
            return tuple(items) if isinstance(obj, tuple) else items
        np = sys.modules.get("numpy")
        if np is not None and isinstance(obj, np.ndarray):
            return torch.from_numpy(obj.copy())  # numpy has no version counter to watch
        if np is not None and isinstance(obj, np.generic):
            return obj.item()
        raise RecorderError(
            f"{_path_text(path)}: cannot record a {type(obj).__module__}.{type(obj).__name__}; "
            "pass tensors, numbers, strings or dicts/lists/tuples of them"
        )

    def _from_device(self, t: torch.Tensor, path: str, taken: _Taken) -> torch.Tensor:
        if self.gpu_copy == "async" and t.device.type == "cuda":
            # Copy into pinned host memory on a side stream ordered after the work queued so far;
            # the writer waits for the event. record_stream keeps the caching allocator from handing
            # t's memory to someone else before the copy has run.
            # https://pytorch.org/docs/stable/notes/cuda.html#cuda-streams
            side = self._side_streams.get(t.device)
            if side is None:
                side = self._side_streams[t.device] = torch.cuda.Stream(device=t.device)
            side.wait_stream(torch.cuda.current_stream(t.device))
            with torch.cuda.stream(side):
                host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
                host.copy_(t, non_blocking=True)
                event = torch.cuda.Event()
                event.record(side)
            t.record_stream(side)
            taken.events.append(event)
            taken.watched.append((t, t._version, path))
            return host
        return t.to("cpu")  # synchronises with the device: safe, and the copy is ours

    # ------------------------------------------------------------------ writer thread

    def _on_drop(self, taken: _Taken) -> None:
        if not self._warned_drop:
            self._warned_drop = True
            log.warning("assertwatch-replay: the writer fell behind; step %s was dropped to keep the "
                        "newest steps (further drops are counted in Recorder.stats(), not logged)", taken.step)

    def _write_guarded(self, taken: _Taken) -> Optional[str]:
        try:
            return self._write(taken)
        except Exception as exc:
            # Disk full, quota, a vanished mount: debugging aids must not kill the training run.
            self.write_errors += 1
            if self.write_errors == 1 or self.write_errors % 1000 == 0:
                log.warning("assertwatch-replay: could not record step %s (%s: %s); %d failures so far",
                            taken.step, type(exc).__name__, exc, self.write_errors)
            try:
                _remove_entry(os.path.join(self.ring_dir, step_dir_name(taken.step)), durable=False)
            except OSError:
                pass
            if self.on_error == "raise" or not isinstance(exc, OSError):
                self._deferred = exc
            return None

    def _raise_deferred(self) -> None:
        exc, self._deferred = self._deferred, None
        if exc is not None:
            raise exc

    def _mutated(self, taken: _Taken) -> Optional[str]:
        for tensor, version, path in taken.watched:
            if tensor._version != version:
                return _path_text(path)
        return None

    def _reject_mutated(self, taken: _Taken, path: str, entry: Optional[str]) -> None:
        self.mutated_steps += 1
        if entry is not None:
            _remove_entry(entry, durable=False)  # never committed: no manifest yet
        if self.mutated_steps == 1:
            log.warning(
                "assertwatch-replay: %s was modified in place after record(step=%s); that step is not "
                "recorded, and from now on this recorder copies tensors on record() (copy='always')",
                path, taken.step)
        self.copy = "always"

    def _write(self, taken: _Taken) -> Optional[str]:
        for event in taken.events:
            event.synchronize()
        changed = self._mutated(taken)
        if changed is not None:
            self._reject_mutated(taken, changed, None)
            return None
        step = taken.step
        entry = os.path.join(self.ring_dir, step_dir_name(step))
        self._clear_entry(entry)
        os.makedirs(entry)
        files: List[Dict[str, Any]] = []
        files.append(self._save(entry, "batch", to_cpu(taken.batch)))
        rng = _rng_tensors(taken.rng)
        files.append(self._save(entry, "rng", rng))
        if taken.model is not None:
            files.append(self._save(entry, "model", to_cpu(taken.model, "model")))
        if taken.optimizer is not None:
            files.append(self._save(entry, "optimizer", to_cpu(taken.optimizer, "optimizer")))
        if taken.extra_state is not None:
            files.append(self._save(entry, "extra_state", to_cpu(taken.extra_state, "extra_state")))
        # An in-place change that finished before this check is caught; the data is then suspect.
        changed = self._mutated(taken)
        if changed is not None:
            self._reject_mutated(taken, changed, entry)
            return None

        doc = self._manifest(taken, files, sorted(rng))
        mf.validate(doc)
        if self.durable:
            fsync_dir(entry)  # the state files' names are on disk before the commit
        manifest_path = os.path.join(entry, mf.MANIFEST_NAME)
        atomic_write_bytes(manifest_path, mf.dumps(doc), fsync=self.durable)  # the commit point
        # latest.json is a hint for readers; listing ring/ is the ground truth, so no fsync.
        latest = mf.dumps({"step_dir": os.path.join("ring", step_dir_name(step))})
        atomic_write_bytes(os.path.join(self.job_dir, "latest.json"), latest, fsync=False)
        self._prune(keep_name=step_dir_name(step))
        self.bytes_written += sum(f["bytes"] for f in files)
        return manifest_path

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

    def _cuda_device_info(self) -> Optional[Dict[str, Any]]:
        index = torch.cuda.current_device()
        if index not in self._cuda_info:  # device properties do not change: read them once
            self._cuda_info[index] = _cuda_device_info()
        return self._cuda_info[index]

    def _replay_section(self, step_seconds: Optional[float], gpu_memory: Optional[int]) -> Dict[str, Any]:
        estimates: Dict[str, Any] = {"step_seconds": None, "gpu_memory_bytes": gpu_memory}
        if step_seconds is not None:
            estimates["step_seconds"] = round(step_seconds, 6)
        return {
            "argv": list(self.argv),
            "entrypoint": self.entrypoint,
            "env": dict(self.env),
            "cwd": self.cwd,
            "modes": list(self.modes),
            "requires_world_size": 1,
            "estimates": estimates,
        }

    def _manifest(self, taken: _Taken, files, rng_streams) -> Dict[str, Any]:
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
            "step": {"epoch": taken.epoch, "global_step": taken.step, "batch_index": taken.batch_index},
            "created_at": _rfc3339(taken.created_at),
            "pid": os.getpid(),
            "cuda_device": taken.cuda_device,
            "log_file": self.log_file,
            "software": {
                "python": ".".join(str(v) for v in sys.version_info[:3]),
                "executable": os.path.abspath(sys.executable),
                "torch": torch.__version__,
                "cuda_runtime": torch.version.cuda,
                "assertwatch_replay": __version__,
            },
            "files": files,
            "model_state": taken.model_state,
            "determinism": {
                "rng_restored": rng_streams,
                "seed": self.seed,
                "deterministic_algorithms": taken.determinism["deterministic_algorithms"],
                "cudnn_deterministic": taken.determinism["cudnn_deterministic"],
                "cudnn_benchmark": taken.determinism["cudnn_benchmark"],
                "compiled": bool(self.compiled),
            },
            "replay": self._replay_section(*taken.estimates),
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
