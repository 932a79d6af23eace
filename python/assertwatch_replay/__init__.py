"""assertwatch-replay: record the debug state of training steps and replay one synchronously.

Importing this package does not import torch. ``Recorder`` (which needs torch) is loaded on first
use, so the replay supervisor can run in an environment, or a process, without it.
"""

__version__ = "0.1.0"

__all__ = ["Recorder", "RecorderError", "ReplayContext", "__version__"]


def __getattr__(name):  # PEP 562 lazy attributes
    if name in ("Recorder", "RecorderError"):
        from . import recorder

        return getattr(recorder, name)
    if name == "ReplayContext":
        from .context import ReplayContext

        return ReplayContext
    raise AttributeError(f"module 'assertwatch_replay' has no attribute {name!r}")
