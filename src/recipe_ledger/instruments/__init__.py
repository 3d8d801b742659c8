"""Benchmark instruments: a command template plus a parser into normalized metrics.

Each instrument module builds the argv of one measurement (one sweep point, one repeat), runs
it, keeps its raw output as a file (hashed), and turns it into metrics with normalized names and
units (``ttft_ms_p50``, ``output_tps_total``...). ``server_metrics`` reads the server's own
Prometheus counters around a sweep.
"""
