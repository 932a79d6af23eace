"""Adapters that let common trainers adopt the recorder in one line (each imports its trainer lazily).

- ``assertwatch_replay.integrations.lightning.AssertwatchCallback`` (PyTorch Lightning)
- ``assertwatch_replay.integrations.transformers.AssertwatchCallback`` (Hugging Face ``Trainer``)
- ``assertwatch_replay.integrations.accelerate.recorder_for`` / ``recorded`` (Accelerate loops)

Every adapter builds one ``Recorder`` per rank, with the rank and world size the trainer knows.
"""
