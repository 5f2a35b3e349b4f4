"""Consolidation (Memoria): STM turns summarised and synthesised into LTM, on a schedule.

``job.Consolidator`` runs one user's job; ``scheduler`` finds the users that
are due and fans out one job each; ``grouping`` decides which turns are
summarised together. Its settings section is ``domain.sections.ConsolidationConfig``.
"""
