"""Custom-resource handlers the stack deploys (infrastructure plumbing, not memstack logic)."""
