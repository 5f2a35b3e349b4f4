"""Rerankers: cross-encoders behind the ``Reranker`` port (Bedrock Rerank in AWS)."""
