"""The embedded backend: one SQLite file (FTS5 for BM25, float32 blobs scored with numpy)."""
