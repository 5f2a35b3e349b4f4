"""Job queues: ``local`` (a durable table in the SQLite file) and ``sqs``."""
