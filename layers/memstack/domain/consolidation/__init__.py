"""Consolidation (Memoria): STM turns summarised and synthesised into LTM, on a schedule.

``job.Consolidator`` runs one user's job; ``scheduler`` finds the users that
are due and fans out one job each; ``grouping`` decides which turns are
summarised together.
"""

from memstack.domain.consolidation.job import ConsolidationConfig, ConsolidationReport, Consolidator
from memstack.domain.consolidation.scheduler import schedule, start_consolidation_timer

__all__ = [
    "ConsolidationConfig",
    "ConsolidationReport",
    "Consolidator",
    "schedule",
    "start_consolidation_timer",
]
