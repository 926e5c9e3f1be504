"""HF Accelerate: the mixture loader saved and restored by ``accelerator.save_state`` / ``load_state``.

The loader is not a ``DataLoader``, so ``accelerator.prepare`` hands it back unchanged instead of
cutting the mixture, which already gives each rank its own slice, a second time (docs/ecosystem.md);
it moves batches to ``accelerator.device`` itself, and :func:`prepare_mixture_loader` registers it for
checkpointing::

    accelerator = Accelerator()
    ds = ScaleAwareMixtureDataset("stores/", weights, budget_tokens=N, seq_len=1024, batch_size=8)
    loader = prepare_mixture_loader(accelerator, ds, num_workers=2)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)   # loader unchanged
    accelerator.load_state("ckpt/")          # on resume: the next batch is the one after the save
    for batch in loader: ...
        accelerator.save_state("ckpt/")

Build the dataset after ``Accelerator()`` (which starts the process group), so each process reads
its own slice. The state is the global stream position: it resumes under any number of processes.
"""

from __future__ import annotations

from typing import Any

from ._loader import require_library

require_library("accelerate", "autoscale_data.integrations.accelerate", "accelerate", "accelerate")

from ..dataset import ScaleAwareMixtureDataset  # noqa: E402
from ._loader import MixtureLoader  # noqa: E402

__all__ = ["prepare_mixture_loader"]


def prepare_mixture_loader(accelerator: Any, dataset: ScaleAwareMixtureDataset, *, num_workers: int = 0,
                           pin_memory: bool | None = None) -> MixtureLoader:
    """A :class:`~autoscale_data.integrations.MixtureLoader` on ``accelerator.device``, registered for
    checkpointing.

    ``dataset`` is fresh, with ``batch_size`` set, built on this process's slice; ``pin_memory`` defaults to
    whether the device is CUDA. Every batch the loader yields counts as trained on, so save the state after
    the step that used it (the usual ``for batch in loader: step(); save_state()`` loop).

    Raises:
        ValueError: the dataset's rank slice differs from the accelerator's process layout.
    """
    expect = (int(accelerator.process_index), int(accelerator.num_processes))
    if (dataset.rank, dataset.world_size) != expect:
        raise ValueError(f"the dataset reads rank {dataset.rank} of {dataset.world_size} but this "
                         f"accelerator process is {expect[0]} of {expect[1]}: build the dataset after "
                         "Accelerator() (or pass rank=accelerator.process_index, "
                         "world_size=accelerator.num_processes)")
    device = accelerator.device
    pin = device.type == "cuda" if pin_memory is None else pin_memory
    loader = MixtureLoader(dataset, num_workers=num_workers, pin_memory=pin, device=device)
    accelerator.register_for_checkpointing(loader)
    return loader
