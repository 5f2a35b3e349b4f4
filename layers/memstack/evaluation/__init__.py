"""Measuring retrieval: the LoCoMo loader, recall@k, and the evaluation runner."""
