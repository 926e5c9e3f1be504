"""Adapters that plug the mixture stream into existing trainers, one module per library.

Each adapter needs its library, installed by an extra of the same name (``pip install
'autoscale-data[lightning]'``); importing it without the library raises
:class:`~autoscale_data.MissingExtraError`. All of them share :class:`MixtureLoader` (the samples a
trainer has consumed: an exact resume; see its module).

- :mod:`autoscale_data.integrations.lightning`: ``MixtureDataModule`` (PyTorch Lightning), and
  ``OnlineMixingCallback`` for a stream that follows an online-mixing controller.
- :mod:`autoscale_data.integrations.accelerate`: ``prepare_mixture_loader`` (HF Accelerate).
- :mod:`autoscale_data.integrations.hf_trainer`: ``MixtureTrainerCallback`` (HF ``Trainer``, fixed or
  online mixing: saves the data position with every checkpoint and restores it by itself on resume,
  in O(1), with ``ignore_data_skip=True``).
- :mod:`autoscale_data.integrations.megatron`: ``MixtureExternalIterator`` (Megatron-Core,
  ``--dataloader-type external``).
- :mod:`autoscale_data.integrations.torchtitan`: ``MixtureTitanDataLoader`` (torchtitan).
"""

from ._loader import MixtureLoader

__all__ = ["MixtureLoader"]
