"""The PyTorch side: the mixture stream for training and the per-domain validation stream."""

from ._options import OUTPUTS, MixtureOptions
from .domain_loss import DomainLossMeter, domain_loss_sums
from .mixture import ScaleAwareMixtureDataset
from .validation import MixtureValidationDataset

__all__ = [
    "DomainLossMeter",
    "MixtureOptions",
    "MixtureValidationDataset",
    "OUTPUTS",
    "ScaleAwareMixtureDataset",
    "domain_loss_sums",
]
