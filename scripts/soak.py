"""Soak: ``memstack bench soak`` without the CLI (same options, same figures); see memstack.bench.soak."""

from __future__ import annotations

import sys

from memstack.bench.soak import main

if __name__ == "__main__":
    sys.exit(main())
