"""PyTorch Lightning: a ``Callback`` that records every training batch at ``on_train_batch_start``.

One line in the ``Trainer``::

    trainer = L.Trainer(..., callbacks=[AssertwatchCallback("/scratch/debug-state", job="my-job",
                                                            entrypoint="train:replay_step")])

and a replay entrypoint in ``train.py`` that rebuilds the module and runs one ``training_step``::

    def replay_step(batch, state, device, ctx):
        replay_training_step(MyModule(**state["config"]), batch, state, device, ctx)

Lightning moves the batch to the device before ``on_train_batch_start``; on a GPU the callback
therefore copies it back (``gpu_copy="sync"`` by default, ``"async"`` for a side-stream copy).
"""

from __future__ import annotations

from typing import Any, Optional

import lightning.pytorch as pl

from ..recorder import Recorder


class AssertwatchCallback(pl.Callback):
    """Records the batch, RNG states and (optionally) the weights before every training step.

    ``record_model=True`` saves the module's weights every step (exact, costly for big models);
    otherwise the replay rebuilds the module from ``extra`` (it reaches the entrypoint as
    ``state["config"]``). Other keyword arguments go to ``Recorder``; rank and world size come
    from the trainer.
    """

    def __init__(self, root, job: str, entrypoint: str, *, record_model: bool = False,
                 extra: Optional[dict] = None, **recorder_kwargs: Any):
        self.root, self.job, self.entrypoint = root, job, entrypoint
        self.record_model = record_model
        self.extra = extra
        self.recorder_kwargs = recorder_kwargs
        self.recorder: Optional[Recorder] = None
        self._batches = 0

    def setup(self, trainer: "pl.Trainer", pl_module: "pl.LightningModule", stage: str) -> None:
        if self.recorder is None:
            kwargs = dict(self.recorder_kwargs)
            kwargs.setdefault("rank", trainer.global_rank)
            kwargs.setdefault("world_size", trainer.world_size)
            self.recorder = Recorder(self.root, job=self.job, entrypoint=self.entrypoint, extra=self.extra, **kwargs)

    def on_train_batch_start(self, trainer, pl_module, batch: Any, batch_idx: int) -> None:
        loop = getattr(getattr(trainer, "fit_loop", None), "epoch_loop", None)
        step = getattr(loop, "total_batch_idx", None)
        if not isinstance(step, int):
            step = self._batches
        self._batches += 1
        assert self.recorder is not None
        self.recorder.record(step=step, epoch=trainer.current_epoch, batch=batch, batch_index=batch_idx,
                             model=pl_module if self.record_model else None)

    def teardown(self, trainer, pl_module, stage: str) -> None:
        if self.recorder is not None:
            self.recorder.flush()


def replay_training_step(module: "pl.LightningModule", batch: Any, state: dict, device, ctx) -> Any:
    """Run ``module.training_step`` on the recorded batch, then the backward pass, on ``device``."""
    if state.get("model") is not None:
        module.load_state_dict(state["model"])
    module = module.to(device)
    module.train()
    ctx.restore_rng()
    step = ctx.step or {}
    out = module.training_step(ctx.to_device(batch, device), step.get("batch_index") or 0)
    loss = out["loss"] if isinstance(out, dict) else out
    if loss is not None:
        loss.backward()
    return loss
