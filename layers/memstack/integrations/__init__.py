"""memstack where agents already live: an MCP server, a LangGraph store, Strands and LangChain tools.

Each module imports its framework when it is imported itself (the packages are
are the ``integrations`` extra, ``pip install 'memstack[integrations]'``; the Lambda
layer ships none of them),
and each speaks to memstack through ``memstack.client.MemoryClient``: over the
network, or in this process (``memstack.client.in_process``).
"""
