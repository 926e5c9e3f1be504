"""The PyTorch side: the mixture stream for training and the per-domain validation stream."""

from ._options import OUTPUTS, MixtureOptions
from .domain_loss import DomainLossMeter, domain_loss_sums
from .masking import MaskedLMCollator, mask_tokens
from .mixture import ScaleAwareMixtureDataset
from .validation import MixtureValidationDataset

__all__ = [
    "DomainLossMeter",
    "MaskedLMCollator",
    "MixtureOptions",
    "MixtureValidationDataset",
    "OUTPUTS",
    "ScaleAwareMixtureDataset",
    "domain_loss_sums",
    "mask_tokens",
]
