"""OpenSearch adapter: the ``opensearch`` store backend (index template, bulk writes, _msearch)."""
