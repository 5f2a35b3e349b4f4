"""A Lambda function's cold start: its imports with the cyclic garbage collector paused.

Importing a handler builds hundreds of thousands of objects (modules, classes, pydantic
validators) that live as long as the container. The collector, run every few hundred
allocations, walks them again and again while they are being made: about a tenth of the API
function's import (``memstack bench coldstart``, CPU time, interleaved runs). So the handlers
import inside ``cold_imports``: collection is paused, and at the end everything made so far is
frozen (``gc.freeze``: never examined again, so the requests' own collections stay short) and
collection resumes. Nothing here imports more than the standard library.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: what every function's environment sets for the libraries themselves (the stack writes it into each
#: function, ``memstack bench coldstart`` imports with it): pydantic skips its search of every installed
#: distribution's entry points for validation plugins when it builds its first model (memstack uses none;
#: 12 ms of CPU in a 180-distribution environment)
LIBRARY_ENVIRONMENT = {"PYDANTIC_DISABLE_PLUGINS": "__all__"}


@contextmanager
def cold_imports() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
