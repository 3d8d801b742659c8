"""The one place the stages are wired: spec -> plan -> run -> measurements -> verdict -> record.

Modules:
  plan       experiment + recipes + box -> RunPlan: each arm's argv, env, image; ABBA schedule; seeds
  preflight  refuse a run that cannot be right before spending machine time (engine, model, ports...)
  measure    one launch of one arm: warm up, every point x instrument, counters; PointRecord
  run        ``ledger run`` / ``ledger calibrate``: calibrate, measure ABBA, decide, record a
             ``result`` or a ``failure`` entry; the run folder ``runs/<run_id>/``
"""
