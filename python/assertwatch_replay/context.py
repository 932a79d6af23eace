"""The context object handed to a job's replay entrypoint as its fourth argument."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional


@dataclass
class ReplayContext:
    """What a replay entrypoint may want to know besides the batch, the state and the device.

    Attributes:
        mode: ``"sync-gpu"``, ``"cpu"`` or ``"sanitizer"``.
        manifest: the validated manifest (a dict, as in docs/manifest.md).
        manifest_path: absolute path of ``manifest.json``.
        state_dir: the directory holding the manifest and its state files.
        out_dir: a directory the entrypoint may write scratch files to.
        step: ``manifest["step"]`` (``epoch``, ``global_step``, ``batch_index``).
        config: ``manifest["extra"]``, the job's free-form settings (e.g. model sizes).
    """

    mode: str
    manifest: Dict[str, Any]
    manifest_path: str
    state_dir: str
    out_dir: str
    step: Dict[str, Any] = field(default_factory=dict)
    config: Dict[str, Any] = field(default_factory=dict)
    _rng_restorer: Optional[Callable[[], List[str]]] = field(default=None, repr=False)

    def restore_rng(self) -> List[str]:
        """Put every recorded RNG stream back to its state at the start of the step.

        The harness does this once before calling the entrypoint, but building a model draws from
        the same generators (weight initialisation). Call this again right before the step when
        the entrypoint constructs anything random first. Returns the streams restored.
        """
        return self._rng_restorer() if self._rng_restorer is not None else []

    def to_device(self, obj: Any, device: Any) -> Any:
        """Move tensors inside ``obj`` (dicts, lists, tuples) to ``device``; other values pass."""
        torch = sys.modules["torch"]
        if isinstance(obj, torch.Tensor):
            return obj.to(device)
        if isinstance(obj, dict):
            return {k: self.to_device(v, device) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.to_device(v, device) for v in obj]
        if isinstance(obj, tuple):
            return tuple(self.to_device(v, device) for v in obj)
        return obj

    def log(self, message: str) -> None:
        """Write a line to the replay's captured stdout."""
        print(message, flush=True)
