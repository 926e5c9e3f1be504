"""The PyTorch side: the mixture stream for training and the per-domain validation stream."""

from ._options import OUTPUTS, MixtureOptions
from .mixture import ScaleAwareMixtureDataset
from .validation import MixtureValidationDataset

__all__ = ["MixtureOptions", "MixtureValidationDataset", "OUTPUTS", "ScaleAwareMixtureDataset"]
