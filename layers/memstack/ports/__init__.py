"""One small interface per external part. Adapters implement them; the domain uses only these.

Import each port from its own module (``memstack.ports.store``): this package imports nothing, so
a light caller (the HTTP clients read ``ports.job_status`` through the API's schemas) does not load
numpy and every other port with it.
"""
