"""The memstack CDK app: one stack (``MemstackStack``) composed of constructs per capability."""
