"""Queue workers: the per-record logic the worker Lambdas run (handlers stay thin)."""
