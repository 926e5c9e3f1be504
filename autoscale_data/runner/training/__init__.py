"""Training one run: the trainer, its processes, checkpoints and per-domain evaluation.

``train`` is the one entry point (in process, or ``python -m autoscale_data.runner.training.train
--job job.json`` per rank); ``dist`` the process group and device, ``checkpoint`` the resumable
checkpoints, ``validation_loss`` the validation loss of every domain, ``extension`` a finished target run
continued to a larger budget (its parent, mix and learning rate), ``downstream`` the zero-shot tasks on a
finished target run's final model, ``step`` how fast the step runs (TF32, the micro-batch of
``train.micro_batch: auto``), ``hooks`` the step-hook protocol (a mixing method's code inside the steps).
"""

from __future__ import annotations

__all__ = ["checkpoint", "dist", "downstream", "extension", "hooks", "step", "train", "validation_loss"]
