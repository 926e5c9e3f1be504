"""The PyTorch side: the mixture stream for training and the per-domain validation stream."""

from ._mixture_options import OUTPUTS, MixtureOptions
from ._state import CURSOR_KEY, DOMAIN_COUNTS_KEY, TOTAL_SEQUENCES_KEY
from .domain_loss import DomainLossMeter, domain_loss_sums
from .masking import MaskedLMCollator, mask_tokens
from .mixture import ScaleAwareMixtureDataset
from .online import OnlineMixture
from .validation import MixtureValidationDataset

__all__ = [
    "CURSOR_KEY",
    "DOMAIN_COUNTS_KEY",
    "DomainLossMeter",
    "MaskedLMCollator",
    "MixtureOptions",
    "MixtureValidationDataset",
    "OUTPUTS",
    "OnlineMixture",
    "ScaleAwareMixtureDataset",
    "TOTAL_SEQUENCES_KEY",
    "domain_loss_sums",
    "mask_tokens",
]
