"""The PyTorch side: the mixture stream for training and the per-domain validation stream."""

from .mixture import OUTPUTS, ScaleAwareMixtureDataset
from .validation import MixtureValidationDataset

__all__ = ["MixtureValidationDataset", "OUTPUTS", "ScaleAwareMixtureDataset"]
