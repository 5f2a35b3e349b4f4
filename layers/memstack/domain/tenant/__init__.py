"""A tenant's own configuration (``config``) and how the product reads it (``configs``)."""
