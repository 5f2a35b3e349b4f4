"""``memstack bench``: latency and throughput against a floor measured in the same run.

The machines this runs on are shared and noisy, so every figure is a median
(or a percentile) of many, and search latency is always reported beside the
floor measured in the same process, interleaved query by query: the ratio is
the figure that travels from one machine to another.
"""
