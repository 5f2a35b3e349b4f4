"""The product's rules: ingestion, retrieval, scoring. Imports no AWS SDK."""
