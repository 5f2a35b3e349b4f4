"""What a consolidation run reports beyond its counts, in a module of its own: the API's admin route
tells a busy run apart without importing the job (``job.py``), which only a consolidating container needs."""

#: the report of a run that found another consolidation of the user still running
BUSY = "busy"
