"""Webhooks: a tenant's events (memory created, updated, deleted; job failed), signed, delivered, retried."""
