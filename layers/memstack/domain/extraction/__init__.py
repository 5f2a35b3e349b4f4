"""Ingestion stages 2-4: time, context-aware extraction, versioned writes."""
