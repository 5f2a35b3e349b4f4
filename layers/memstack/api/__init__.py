"""The REST API: one Powertools resolver (``create_app``) for the API Lambda and ``memstack serve``."""
