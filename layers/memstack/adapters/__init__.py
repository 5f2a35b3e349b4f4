"""Adapters: one module per provider behind each port. ``memstack.factory`` picks them by settings."""
