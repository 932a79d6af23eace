"""Hugging Face Transformers: a ``TrainerCallback`` that records the inputs of every training step.

One line in the ``Trainer``::

    trainer = Trainer(model=model, args=args, train_dataset=ds,
                      callbacks=[AssertwatchCallback("/scratch/debug-state", job="my-job",
                                                     entrypoint="train:replay_step")])

Callbacks do not see a step's inputs, so the callback registers, at ``on_train_begin``, a forward
pre-hook on the model; the hook records the keyword arguments of each forward call made in
training mode (one entry per micro-batch) before the forward runs. The ``Trainer`` has already
moved them to the device: on a GPU they are copied back (``gpu_copy`` as in ``Recorder``).
The matching entrypoint::

    def replay_step(batch, state, device, ctx):
        replay_forward_backward(build_model(state["config"]), batch, state, device, ctx)
"""

from __future__ import annotations

from typing import Any, Optional

import torch
from transformers import TrainerCallback

from ..recorder import Recorder


class AssertwatchCallback(TrainerCallback):
    """Records every training forward call's inputs; extra keyword arguments go to ``Recorder``."""

    def __init__(self, root, job: str, entrypoint: str, *, record_model: bool = False,
                 extra: Optional[dict] = None, **recorder_kwargs: Any):
        self.root, self.job, self.entrypoint = root, job, entrypoint
        self.record_model = record_model
        self.extra = extra
        self.recorder_kwargs = recorder_kwargs
        self.recorder: Optional[Recorder] = None
        self._handle = None
        self._calls = 0
        self._epoch = 0

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if self.recorder is None:
            rk = dict(self.recorder_kwargs)
            rk.setdefault("rank", args.process_index)
            rk.setdefault("world_size", args.world_size)
            self.recorder = Recorder(self.root, job=self.job, entrypoint=self.entrypoint, extra=self.extra, **rk)
        if model is not None and self._handle is None:
            self._handle = model.register_forward_pre_hook(self._pre_forward, with_kwargs=True)

    def on_epoch_begin(self, args, state, control, **kwargs):
        self._epoch = int(state.epoch or 0)

    def on_train_end(self, args, state, control, **kwargs):
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        if self.recorder is not None:
            self.recorder.flush()

    def _pre_forward(self, module: torch.nn.Module, args: tuple, kwargs: dict):
        if not (module.training and torch.is_grad_enabled()) or self.recorder is None:
            return None
        batch = dict(kwargs)
        if args:
            batch["__args__"] = list(args)
        self.recorder.record(step=self._calls, epoch=self._epoch, batch=batch,
                             model=module if self.record_model else None)
        self._calls += 1
        return None


def replay_forward_backward(model: torch.nn.Module, batch: dict, state: dict, device, ctx) -> Any:
    """Call ``model(**batch)`` in training mode on ``device`` and run the backward pass of its loss."""
    if state.get("model") is not None:
        model.load_state_dict(state["model"])
    model = model.to(device)
    model.train()
    ctx.restore_rng()
    inputs = dict(ctx.to_device(batch, device))
    args = inputs.pop("__args__", [])
    out = model(*args, **inputs)
    loss = out["loss"] if isinstance(out, dict) or hasattr(out, "keys") else out[0]
    loss.backward()
    return loss
