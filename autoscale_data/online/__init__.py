"""Online mixing controllers: per-domain training losses in, the next mixture weights out.

Pure numpy (no torch): a controller is driven by
:class:`~autoscale_data.dataset.online.OnlineMixture`, which all-reduces the per-domain losses once
per update, asks the controller for the next weights and appends a segment to the exact stream.
"""

from ..mixing import Controller, Window, check_proposal, check_state
from .ado import ADO
from .odm import ODM
from .schedule import FixedSchedule, Replay, replay_phases

__all__ = ["ADO", "Controller", "FixedSchedule", "ODM", "Replay", "Window", "check_proposal", "check_state",
           "replay_phases"]
