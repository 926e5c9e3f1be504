"""A run's hashed training settings as records (:attr:`~.specs.RunSpec.settings`): the model, the optimiser,
the batch shape, the backend and precision, the stores' fingerprints and the evaluation settings that change a
result.

Their JSON (the codec of :mod:`autoscale_data._records`) has exactly the keys and values of the nested dict
the runner built by hand before 2026-11-28, each optional key written only where it was (a padded vocabulary,
BERT's masking rate and evaluation passes, DeepSpeed's section), so every run id stays what it was and every
kept ``spec.json`` reads into them. :class:`ModelSettings` is the one place a run's model is derived: its
fields, its padded vocabulary and the model built from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..._records import Record, omitted
from ..config import RunnerConfig
from ..config.sections import ModelConfig, OptimizerConfig
from .data import DomainInfo
from .estimate import flops_per_token

if TYPE_CHECKING:
    import torch

__all__ = ["DeepSpeedSettings", "ModelSettings", "SETTINGS_VERSION", "TrainingSettings"]

#: The version of the settings' shape (in every run id).
SETTINGS_VERSION = 1


@dataclass(frozen=True)
class ModelSettings(Record):
    """The model a run trains (``settings.model``)."""

    preset: str
    """A preset of ``runner.models.PRESETS``."""
    fields: dict[str, Any]
    """Its transformers config fields (:func:`~autoscale_data.runner.models.model_config_dict`), the
    vocabulary the loss spans among them."""
    padded_vocab: int | None = omitted(default=None)
    """Embedding and output rows, where ``train.pad_vocab`` rounded the vocabulary up (``None``: not padded;
    only then in the JSON, so the ids of unpadded models stay as they were)."""
    mlm_probability: float | None = omitted(default=None)
    """BERT's masking rate (``None`` for a GPT-2)."""

    def __post_init__(self) -> None:
        vocab = self.fields.get("vocab_size") if isinstance(self.fields, dict) else None
        if not isinstance(vocab, int) or isinstance(vocab, bool) or vocab < 1:
            raise ValueError(f"model settings fields['vocab_size'] = {vocab!r} is invalid: expected a "
                             "positive integer")
        rows = self.padded_vocab
        if rows is not None and (not isinstance(rows, int) or isinstance(rows, bool) or rows <= vocab):
            raise ValueError(f"model settings padded_vocab = {rows!r} is invalid: expected an integer above "
                             f"the vocabulary, {vocab} (or none)")

    @classmethod
    def of(cls, model: ModelConfig, vocab_size: int, seq_len: int, dropout: float | None,
           pad_vocab: int) -> ModelSettings:
        """The settings of ``model`` over the stores' ``vocab_size`` tokens, its rows padded to a multiple of
        ``pad_vocab`` (``train.pad_vocab``)."""
        from ..models import model_config_dict, padded_vocab

        fields = model_config_dict(model.preset, model.overrides, vocab_size=vocab_size, seq_len=seq_len,
                                   dropout=dropout, activation=model.activation)
        rows = padded_vocab(int(fields["vocab_size"]), pad_vocab)
        return cls(preset=model.preset, fields=fields,
                   padded_vocab=rows if rows != fields["vocab_size"] else None,
                   mlm_probability=model.mlm_probability if model.family == "bert" else None)

    @property
    def vocab_size(self) -> int:
        """The vocabulary the loss spans (BERT's counts its [MASK] id); a padded model has more rows."""
        return int(self.fields["vocab_size"])

    def flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs per token (:func:`~.estimate.flops_per_token`)."""
        return flops_per_token(self.preset, self.fields, seq_len)

    def build(self, eos_id: int | None = None) -> torch.nn.Module:
        """A randomly initialised model of these settings, its padded rows included
        (:func:`~autoscale_data.runner.models.build_model`; seed torch first for a seeded init)."""
        from ..models import build_model

        return build_model(self.preset, self.fields, eos_id=eos_id, vocab_rows=self.padded_vocab)


@dataclass(frozen=True)
class DeepSpeedSettings(Record):
    """``settings.deepspeed`` of a ``backend: deepspeed`` run."""

    zero_stage: int
    extra: dict[str, Any]


@dataclass(frozen=True)
class TrainingSettings(Record):
    """Everything a run id hashes about how the run trains (``spec.json``'s ``settings``; built by
    :meth:`of`)."""

    version: int
    model: ModelSettings
    optimizer: OptimizerConfig
    """The optimiser the run trains with (a proxy's learning rate may be ``ddo.proxy_lr``)."""
    seq_len: int
    micro_batch_size: int
    global_batch_size: int
    procs: int
    backend: str
    precision: str
    stores: dict[str, str]
    """Domain -> the store's data fingerprint."""
    heldout_tokens_per_domain: int
    mlm_eval_passes: int | None = omitted(default=None)
    """``eval.mlm_passes`` of a BERT run where it is not 1 (only then in the JSON)."""
    deepspeed: DeepSpeedSettings | None = omitted(default=None)
    """The DeepSpeed section of a ``backend: deepspeed`` run."""

    def __post_init__(self) -> None:
        if self.version != SETTINGS_VERSION:
            raise ValueError(f"settings version {self.version!r} is invalid: expected {SETTINGS_VERSION}")

    @classmethod
    def of(cls, config: RunnerConfig, domains: DomainInfo) -> TrainingSettings:
        """The settings of ``config``'s runs over the stores ``domains``."""
        bert = config.model.family == "bert"
        return cls(
            version=SETTINGS_VERSION,
            model=ModelSettings.of(config.model, domains.vocab_size, config.seq_len, config.dropout,
                                   config.train.pad_vocab),
            optimizer=config.optimizer, seq_len=config.seq_len, micro_batch_size=config.micro_batch_size,
            global_batch_size=config.global_batch_size, procs=config.procs, backend=config.backend,
            precision=config.precision, stores={d: domains.fingerprints[d] for d in domains.names},
            heldout_tokens_per_domain=config.eval.heldout_tokens_per_domain,
            # only where they were: the ids of runs without them do not hash them
            mlm_eval_passes=config.eval.mlm_passes if bert and config.eval.mlm_passes != 1 else None,
            deepspeed=(DeepSpeedSettings(config.deepspeed.zero_stage, config.deepspeed.extra)
                       if config.backend == "deepspeed" else None))
