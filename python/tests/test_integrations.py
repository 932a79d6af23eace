"""The trainer integrations, each with the real package on a tiny CPU model.

Each test writes a small job module with a planted bug (a class label out of range at the fourth
batch), trains it for a few steps in a real interpreter until the bug raises, then replays the step
``latest.json`` points at in ``cpu`` mode and checks that the result names the planted line.
A missing package skips the test with its reason, except under CI=true, where it fails.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import child_env, run_replay

pytestmark = pytest.mark.torch

MARK = "# PLANTED-BUG"


def _need(module: str):
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"{module} is not installed ({exc}); pip install -r python/requirements-test.txt")


def _train_and_replay(tmp_path, name: str, source: str, job: str, expected_step: int):
    code = tmp_path / "code"
    code.mkdir()
    path = code / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    planted = next(i for i, line in enumerate(path.read_text().splitlines(), 1) if line.rstrip().endswith(MARK))
    root = tmp_path / "state"
    proc = subprocess.run([sys.executable, str(path), str(root)], cwd=str(code), capture_output=True, text=True,
                          timeout=300, env=child_env(CUDA_VISIBLE_DEVICES="", TOKENIZERS_PARALLELISM="false"))
    assert proc.returncode != 0, "the planted bug did not fire:\n" + proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "IndexError" in proc.stderr or "out of bounds" in proc.stderr, proc.stderr[-3000:]
    rank_dir = root / job / "rank-00000"
    latest = json.loads((rank_dir / "latest.json").read_text())
    assert latest["step_dir"] == f"ring/step-{expected_step:012d}", latest
    manifest = rank_dir / latest["step_dir"] / "manifest.json"
    out = tmp_path / "replay"
    replay, result = run_replay(manifest, "cpu", out, timeout=240)
    assert result is not None, replay.stderr[-3000:]
    assert result["outcome"] == "reproduced_cpu_only", json.dumps(result, indent=1)[:3000]
    frame = result["failing_frame"]
    assert os.path.realpath(frame["file"]) == os.path.realpath(path) and frame["line"] == planted, frame
    return result


LIGHTNING_JOB = """
    import sys
    import torch
    import torch.nn.functional as F
    import lightning.pytorch as L
    from assertwatch_replay.integrations.lightning import AssertwatchCallback, replay_training_step

    CFG = {"n_in": 6, "n_classes": 3}


    class Tiny(L.LightningModule):
        def __init__(self, n_in, n_classes):
            super().__init__()
            self.lin = torch.nn.Linear(n_in, n_classes)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.cross_entropy(self.lin(x), y)  # PLANTED-BUG

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)


    def data():
        g = torch.Generator().manual_seed(0)
        x, y = torch.randn(32, 6, generator=g), torch.randint(0, 3, (32,), generator=g)
        y[13] = 7  # in the fourth batch of four
        return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=4)


    def replay_step(batch, state, device, ctx):
        replay_training_step(Tiny(**state["config"]), batch, state, device, ctx)


    if __name__ == "__main__":
        torch.manual_seed(0)
        trainer = L.Trainer(max_steps=8, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                            enable_progress_bar=False, enable_model_summary=False,
                            callbacks=[AssertwatchCallback(sys.argv[1], job="lit", entrypoint="lit_job:replay_step",
                                                           extra=CFG, record_model=True)])
        trainer.fit(Tiny(**CFG), data())
"""


def test_lightning_callback(tmp_path):
    _need("lightning")
    result = _train_and_replay(tmp_path, "lit_job", LIGHTNING_JOB, "lit", expected_step=3)
    assert result["determinism"]["weights_exact"] is True


TRANSFORMERS_JOB = """
    import sys
    import torch
    import torch.nn.functional as F
    from transformers import Trainer, TrainingArguments
    from assertwatch_replay.integrations.transformers import AssertwatchCallback, replay_forward_backward

    CFG = {"vocab": 20, "n_classes": 3}


    class Tiny(torch.nn.Module):
        def __init__(self, vocab, n_classes):
            super().__init__()
            self.emb = torch.nn.Embedding(vocab, 8)
            self.head = torch.nn.Linear(8, n_classes)

        def forward(self, input_ids, labels=None):
            logits = self.head(self.emb(input_ids).mean(1))
            loss = F.cross_entropy(logits, labels)  # PLANTED-BUG
            return {"loss": loss, "logits": logits}


    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return 32

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            label = 7 if i == 13 else i % 3
            return {"input_ids": torch.randint(0, 20, (5,), generator=g), "labels": torch.tensor(label)}


    def replay_step(batch, state, device, ctx):
        replay_forward_backward(Tiny(**state["config"]), batch, state, device, ctx)


    if __name__ == "__main__":
        root = sys.argv[1]
        args = TrainingArguments(output_dir=root + "/out", per_device_train_batch_size=4, max_steps=8, report_to=[],
                                 use_cpu=True, save_strategy="no", logging_strategy="no", dataloader_num_workers=0,
                                 remove_unused_columns=False, disable_tqdm=True, seed=0)
        trainer = Trainer(model=Tiny(**CFG), args=args, train_dataset=Data(),
                          callbacks=[AssertwatchCallback(root, job="hf", entrypoint="hf_job:replay_step", extra=CFG,
                                                         record_model=True)])
        trainer.train()
"""


def test_transformers_callback(tmp_path):
    _need("transformers")
    # The Trainer shuffles with its own seeded sampler: the failing step is the one holding sample 13.
    result = _train_and_replay(tmp_path, "hf_job", TRANSFORMERS_JOB, "hf", expected_step=_hf_bad_step(tmp_path))
    assert result["determinism"]["weights_exact"] is True


def _hf_bad_step(tmp_path) -> int:
    """Ask the real Trainer which step holds sample 13 (its sampler order depends on its version)."""
    probe = tmp_path / "order.py"
    probe.write_text(textwrap.dedent("""
        import sys, torch
        from transformers import Trainer, TrainingArguments
        class Data(torch.utils.data.Dataset):
            def __len__(self): return 32
            def __getitem__(self, i): return {"idx": torch.tensor(i)}
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__(); self.w = torch.nn.Parameter(torch.zeros(1))
            def forward(self, idx):
                return {"loss": self.w.sum() * 0}
        args = TrainingArguments(output_dir=sys.argv[1], per_device_train_batch_size=4, max_steps=8, report_to=[],
                                 use_cpu=True, save_strategy="no", logging_strategy="no", remove_unused_columns=False,
                                 disable_tqdm=True, seed=0)
        loader = Trainer(model=M(), args=args, train_dataset=Data()).get_train_dataloader()
        for step, batch in enumerate(loader):
            if 13 in batch["idx"].tolist():
                print(step)
                break
    """))
    proc = subprocess.run([sys.executable, str(probe), str(tmp_path / "probe-out")], capture_output=True, text=True,
                          timeout=300, env=child_env(CUDA_VISIBLE_DEVICES=""))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return int(proc.stdout.strip().splitlines()[-1])


ACCELERATE_JOB = """
    import sys
    import torch
    import torch.nn.functional as F
    from accelerate import Accelerator
    from assertwatch_replay.integrations.accelerate import recorded, recorder_for

    CFG = {"n_in": 6, "n_classes": 3}


    def loss_of(model, batch):
        x, y = batch
        return F.cross_entropy(model(x), y)  # PLANTED-BUG


    def replay_step(batch, state, device, ctx):
        torch.manual_seed(0)
        model = torch.nn.Linear(CFG["n_in"], CFG["n_classes"]).to(device)
        ctx.restore_rng()
        loss_of(model, ctx.to_device(batch, device)).backward()


    if __name__ == "__main__":
        accelerator = Accelerator(cpu=True)
        rec = recorder_for(accelerator, sys.argv[1], job="acc", entrypoint="acc_job:replay_step", extra=CFG)
        torch.manual_seed(0)
        model = torch.nn.Linear(CFG["n_in"], CFG["n_classes"])
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(0)
        x, y = torch.randn(32, 6, generator=g), torch.randint(0, 3, (32,), generator=g)
        y[13] = 7
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=4)
        model, opt, loader = accelerator.prepare(model, opt, loader)
        for batch in recorded(loader, rec):
            loss = loss_of(model, batch)
            accelerator.backward(loss)
            opt.step()
            opt.zero_grad()
"""


def test_accelerate_helper(tmp_path):
    _need("accelerate")
    _train_and_replay(tmp_path, "acc_job", ACCELERATE_JOB, "acc", expected_step=3)
