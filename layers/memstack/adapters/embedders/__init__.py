"""Embedders: ``hashing`` (unit tests), ``minilm`` (offline default), ``bedrock`` (AWS)."""
