"""Retrieval: the eight stages of docs/architecture.md (``stages``, run by ``pipeline.Retriever``).

``config.RetrievalConfig`` is the stages' settings section, ``types`` the request and answer.
Nothing is imported here: ``memstack.settings`` reads ``config`` at every cold start, which must
not load the pipeline.
"""
