"""Benchmark instruments: a command template plus a parser into normalized metrics.

Each instrument module builds the argv of one measurement (one sweep point, one repeat), runs
it, keeps its raw output as a file (hashed), and turns it into metrics with normalized names and
units (``ttft_ms_p50``, ``output_tps_total``...). ``server_metrics`` reads the server's own
Prometheus counters around a sweep.

Modules:
  base            MeasureContext and Measurement, InstrumentError, running a client, hashing raw files
  vllm_bench      ``vllm bench serve`` (kind ``vllm_bench_serve``), one client process per point
  sglang_bench    ``sglang.bench_serving`` (kind ``sglang_bench_serving``), same names, either engine
  command         any script that prints JSON metrics (kind ``command``), for studies without a server
  server_metrics  the server's Prometheus counters before and after a point, as differences, read
                  into the same names by the arm's engine (``recipe_ledger.engines``)

Which kind runs which module is decided in ``recipe_ledger.pipeline.measure.measure_point``.
"""
