"""Import hand-made debug files (``torch.save({'model': ..., 'data': batch, 'rng': ...})``) as ring entries.

    python -m assertwatch_replay.importer --root /scratch/debug-state --job my-job \\
        --entrypoint train:replay_step debug_0_17.pt debug_0_18.pt

Each file becomes one committed entry, so the usual replay runs on it. The batch is the file's
``--data-key`` value, the CPU RNG state its ``--rng-key`` value (a ``torch.get_rng_state()``
tensor), the weights its ``--model-key`` value (a state dict, or a module whose state dict is
taken). Epoch and batch index come from the file name (``--name-pattern``, default
``debug_<epoch>_<batch>.pt``); the global step is the file's position in (epoch, batch) order
unless the pattern has a ``step`` group. Only the CPU RNG is restored on replay: the files do not
hold the python, numpy or CUDA states.

Files are loaded with ``torch.load(weights_only=True)``; pass ``--trust`` for files that pickle
whole modules (that runs their pickled code: only for files you made yourself).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any, List, Optional, Tuple

DEFAULT_PATTERN = r"(?P<epoch>\d+)_(?P<batch>\d+)\.pt$"


def _order(paths: List[str], pattern: str) -> List[Tuple[int, int, Optional[int], str]]:
    rx = re.compile(pattern)
    rows = []
    for path in paths:
        m = rx.search(os.path.basename(path))
        groups = m.groupdict() if m else {}
        epoch = int(groups["epoch"]) if groups.get("epoch") else 0
        batch = int(groups["batch"]) if groups.get("batch") else None
        step = int(groups["step"]) if groups.get("step") else None
        rows.append((epoch, batch if batch is not None else 0, step, path, batch))
    rows.sort(key=lambda r: (r[0], r[1], r[3]))
    return [(epoch, batch_index, step, path) for epoch, _, step, path, batch_index in rows]


def import_files(paths: List[str], root: str, job: str, entrypoint: str, *, data_key: str = "data",
                 rng_key: str = "rng", model_key: str = "model", pattern: str = DEFAULT_PATTERN,
                 trust: bool = False, **recorder_kwargs: Any) -> List[str]:
    """Write one committed ring entry per file; returns the manifest paths, in step order."""
    import torch

    from .recorder import Recorder, RecorderError

    if not paths:
        raise RecorderError("no files to import")
    keep = max(1, min(100, len(paths)))
    rec = Recorder(root, job=job, keep=keep, entrypoint=entrypoint, background=False, on_error="raise",
                   **recorder_kwargs)
    out = []
    for index, (epoch, batch_index, step, path) in enumerate(_order(paths, pattern)):
        doc = torch.load(path, map_location="cpu", weights_only=not trust)
        if not isinstance(doc, dict) or data_key not in doc:
            raise RecorderError(f"{path}: expected a dict with a {data_key!r} entry")
        model = doc.get(model_key)
        state_dict = model.state_dict() if isinstance(model, torch.nn.Module) else model
        taken = rec._take(step if step is not None else index, doc[data_key], epoch, None, None, None, None,
                          batch_index)
        rng = doc.get(rng_key)
        if isinstance(rng, torch.Tensor):
            taken.rng = {"cpu": rng, "python": None}
        else:
            raise RecorderError(f"{path}: {rng_key!r} must be a torch.get_rng_state() tensor")
        if state_dict is not None:
            taken.model = rec._snapshot(state_dict, "model", taken, True)
            taken.model_state = {"kind": "full", "exact": True, "ref": None, "step": taken.step}
        out.append(rec._write_guarded(taken))
    return out


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m assertwatch_replay.importer", description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--root", required=True, help="state root (as Recorder's root)")
    parser.add_argument("--job", required=True)
    parser.add_argument("--entrypoint", required=True, help="module:function the replay calls")
    parser.add_argument("--cwd", help="directory the entrypoint is imported from (default: here)")
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--extra-json", help="JSON object the entrypoint receives as state['config']")
    parser.add_argument("--data-key", default="data")
    parser.add_argument("--rng-key", default="rng")
    parser.add_argument("--model-key", default="model")
    parser.add_argument("--name-pattern", default=DEFAULT_PATTERN,
                        help="regex on the file name with named groups epoch, batch and optionally step")
    parser.add_argument("--trust", action="store_true", help="load with weights_only=False (runs pickled code)")
    args = parser.parse_args(argv)
    try:
        paths = import_files(args.files, args.root, args.job, args.entrypoint, data_key=args.data_key,
                             rng_key=args.rng_key, model_key=args.model_key, pattern=args.name_pattern,
                             trust=args.trust, cwd=args.cwd, rank=args.rank,
                             extra=json.loads(args.extra_json) if args.extra_json else None)
    except Exception as exc:
        print(f"assertwatch-replay import: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
