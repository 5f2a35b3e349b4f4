"""Model adapters: the local rule-based extractor and the Bedrock (Converse) one."""
