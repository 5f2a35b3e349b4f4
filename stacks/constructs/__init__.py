"""One construct per capability.

storage, search, queues, alerts, functions/compute, api, schedules, observability, cost.
"""
