"""Online mixing controllers: per-domain training losses in, the next mixture weights out.

The controller protocol (``controller``), the exact segments of an online stream (``carry``), ADO, ODM,
weights decided in advance (``preset``) and a simulator with known laws (``simulate``).

Pure numpy (no torch): a controller is driven by
:class:`~autoscale_data.dataset.online.OnlineMixture`, which all-reduces the per-domain losses once
per update, asks the controller for the next weights and appends a segment to the exact stream.
"""

from .ado import ADO
from .carry import carried_counts
from .controller import Controller, Window, check_proposal, check_state
from .odm import ODM
from .preset import PresetWeights, Replay, replay_phases

__all__ = ["ADO", "Controller", "ODM", "PresetWeights", "Replay", "Window", "carried_counts",
           "check_proposal", "check_state", "replay_phases"]
