"""DynamoDB adapters: the memories store and the short-term store."""
