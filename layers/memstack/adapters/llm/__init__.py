"""Model adapters behind the LLM ports: the network providers (Bedrock Converse, OpenAI-compatible chat)
in ``providers``, the offline rule-based extractor and summariser in ``rules``."""
