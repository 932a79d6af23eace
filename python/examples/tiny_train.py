"""A tiny training job with planted bugs, to show and test assertwatch-replay end to end.

    python examples/tiny_train.py --state-dir /tmp/state --log-file /tmp/train.log --bug label --bad-step 5

The model embeds tokens, mean-pools them, gathers a few features per sample, and trains a
classifier plus an auxiliary binary head. Synthetic data; a few seconds on a CPU, also runs on CUDA.
At ``--bad-step`` one batch is corrupted according to ``--bug``:

    label  a class label >= n_classes             -> cross_entropy   (CPU: IndexError: Target .. is out of bounds.)
    token  a token id >= the vocabulary size      -> nn.Embedding    (CPU: IndexError: index out of range in self)
    index  a gather index past the feature axis   -> Tensor.gather   (CPU: RuntimeError: index .. is out of bounds ...)
    bce    probabilities pushed above 1           -> binary_cross_entropy (CPU: RuntimeError: all elements of input
                                                                      should be between 0 and 1)

Each of those operations sits on one line marked ``# PLANTED-BUG: <name>``: on CPU, or in a
synchronous GPU replay, that is the line the error names. On CUDA without synchronous launches
the job's own traceback names a later line instead (usually the ``loss.item()`` marked
``# ASYNC-SURFACE``), which is the problem the replay solves.

Before every step the job calls ``Recorder.record``; ``replay_step`` below is the entrypoint the
replay harness calls.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Dict

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
PROJECT_DIR = os.path.dirname(HERE)  # the directory that holds the "examples" package
if PROJECT_DIR not in sys.path:
    sys.path.insert(0, PROJECT_DIR)  # run as a script from a source tree: find assertwatch_replay

from assertwatch_replay import Recorder  # noqa: E402

BUGS = ("none", "label", "token", "index", "bce")
CONFIG = {"vocab": 50, "seq": 12, "dim": 16, "n_feats": 8, "n_classes": 3, "batch": 16, "dropout": 0.1}

log = logging.getLogger("tiny_train")


class TinyModel(nn.Module):
    def __init__(self, vocab: int, dim: int, n_feats: int, n_classes: int, dropout: float):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(n_feats, n_classes)
        self.aux = nn.Linear(n_feats, 1)


def build_model(cfg: Dict[str, int]) -> TinyModel:
    return TinyModel(cfg["vocab"], cfg["dim"], cfg["n_feats"], cfg["n_classes"], cfg["dropout"])


def make_batch(gen: torch.Generator, step: int, bug: str, bad_step: int, cfg) -> Dict[str, torch.Tensor]:
    b = cfg["batch"]
    batch = {
        "tokens": torch.randint(0, cfg["vocab"], (b, cfg["seq"]), generator=gen),
        "labels": torch.randint(0, cfg["n_classes"], (b,), generator=gen),
        "feature_idx": torch.randint(0, cfg["dim"], (b, cfg["n_feats"]), generator=gen),
        "aux_target": torch.rand(b, generator=gen),
        "aux_shift": torch.zeros(b),
    }
    if step == bad_step:
        if bug == "label":
            batch["labels"][3] = cfg["n_classes"] + 2
        elif bug == "token":
            batch["tokens"][2, 5] = cfg["vocab"] + 7
        elif bug == "index":
            batch["feature_idx"][1, 0] = cfg["dim"] + 1
        elif bug == "bce":
            batch["aux_shift"].fill_(1.5)
    return batch


def forward_loss(model: TinyModel, batch: Dict[str, torch.Tensor]) -> torch.Tensor:
    emb = model.embed(batch["tokens"])  # PLANTED-BUG: token
    pooled = model.drop(emb).mean(dim=1)
    feats = pooled.gather(1, batch["feature_idx"])  # PLANTED-BUG: index
    logits = model.head(feats)
    loss = F.cross_entropy(logits, batch["labels"])  # PLANTED-BUG: label
    probs = torch.sigmoid(model.aux(feats)).squeeze(1) + batch["aux_shift"]
    aux_loss = F.binary_cross_entropy(probs, batch["aux_target"])  # PLANTED-BUG: bce
    return loss + 0.1 * aux_loss


def train_step(model: TinyModel, opt: torch.optim.Optimizer, batch: Dict[str, torch.Tensor]) -> torch.Tensor:
    opt.zero_grad(set_to_none=True)
    loss = forward_loss(model, batch)
    loss.backward()
    opt.step()
    return loss


def replay_step(batch, state, device, ctx) -> None:
    """Replay entrypoint: rebuild the model from the saved config and state, run one step."""
    model = build_model(state["config"]).to(device)
    if state["model"] is not None:
        model.load_state_dict(state["model"])
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    if state["optimizer"] is not None:
        opt.load_state_dict(state["optimizer"])
    ctx.restore_rng()  # building the model drew from the RNG; dropout must see the job's state
    loss = train_step(model, opt, ctx.to_device(batch, device))
    ctx.log(f"replay step {ctx.step['global_step']} loss {loss.item():.6f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", required=True, help="root of the debug-state ring")
    parser.add_argument("--log-file", required=True)
    parser.add_argument("--job", default="tiny-train")
    parser.add_argument("--bug", choices=BUGS, default="none")
    parser.add_argument("--bad-step", type=int, default=5)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--keep", type=int, default=3)
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args(argv)

    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=[logging.FileHandler(args.log_file), logging.StreamHandler(sys.stderr)],
    )
    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)
    torch.manual_seed(args.seed)
    cfg = dict(CONFIG)
    model = build_model(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(args.seed + 1)
    rec = Recorder(
        args.state_dir,
        job=args.job,
        keep=args.keep,
        entrypoint="examples.tiny_train:replay_step",
        log_file=args.log_file,
        extra=cfg,
        cwd=PROJECT_DIR,
        seed=args.seed,
    )
    log.info("pid %d device %s bug %s bad_step %d", os.getpid(), device, args.bug, args.bad_step)
    try:
        for step in range(args.steps):
            batch = make_batch(gen, step, args.bug, args.bad_step, cfg)
            rec.record(step=step, epoch=0, batch=batch, model=model, optimizer=opt)
            batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
            loss = train_step(model, opt, batch)
            log.info("step %d loss %.6f", step, loss.item())  # ASYNC-SURFACE
    except Exception:
        log.exception("training failed")
        raise
    log.info("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
