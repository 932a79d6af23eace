"""Accelerate: a recorder for the current process, and a loader wrapper that records each batch.

One line around the loop's data loader::

    rec = recorder_for(accelerator, "/scratch/debug-state", job="my-job", entrypoint="train:replay_step")
    for step, batch in enumerate(recorded(loader, rec)):
        ...

Wrap the loader *before* ``accelerator.prepare`` moves batches to the device where the loop
allows it (``recorded(loader, rec)`` then yields CPU batches to ``prepare``); wrapping the
prepared loader works too, at the cost of a device-to-host copy per step.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from ..recorder import Recorder


def recorder_for(accelerator: Any, root, job: str, entrypoint: str, **kwargs: Any) -> Recorder:
    """A ``Recorder`` for this process: rank and world size from the ``Accelerator``."""
    kwargs.setdefault("rank", accelerator.process_index)
    kwargs.setdefault("world_size", accelerator.num_processes)
    return Recorder(root, job=job, entrypoint=entrypoint, **kwargs)


def recorded(loader: Iterable[Any], recorder: Recorder, start_step: int = 0, epoch: int = 0) -> Iterator[Any]:
    """Yield the batches of ``loader``, recording each one before the loop sees it."""
    for index, batch in enumerate(loader):
        recorder.record(step=start_step + index, epoch=epoch, batch=batch, batch_index=index)
        yield batch
