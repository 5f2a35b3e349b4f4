"""The network LLM providers: Bedrock Converse and OpenAI-compatible chat, with the structured-output
prompts and tool schemas they share (``structured``, ``tools``)."""
