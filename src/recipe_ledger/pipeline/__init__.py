"""The one place the stages are wired: spec -> plan -> run -> measurements -> verdict -> record.

Modules:
  stages      what the CLI calls, once each: plan_experiment, power_report, run_experiment,
              calibrate_experiment (the experiment file is loaded once per stage)
  plan        experiment + recipes + box -> RunPlan: each arm's argv, env, image; ABBA schedule; seeds
  preflight   refuse a run that cannot be right before spending machine time (engine, model, ports...)
  clean_tree  refuse a dirty tree in what feeds the measurement, or record it when allowed
  power       each bar's MDE with the planned repeats, from the matching calibration, before launching
  measure     one launch of one arm (``Launch``): warm up, every point x instrument (each kind's
              registered measure), counters, refusals; PointRecord
  run         calibrate, measure ABBA, decide, record a ``result``; the RunContext stages share
  quality     quality bars decided from the quality instruments' items at the end of a run, and
              what they make of a speed win ("faster, quality not shown", "faster, worse answers")
  sequence    the sequential design: launch pairs, look after each, stop when every bar is decided;
              runs/<id>/sequence.json, --resume, --plan's expected launches and box-hours
  failures    recording_failure: stop every server, write the ``failure`` entry, raise a typed error
  abandoned   a run whose ledger process died (its runs/<id>/lock.json names a gone pid): one
              ``failure`` entry, once, from the next command that runs or shows
  steps       StepClock: wall seconds per step of a run (runs/<id>/timings.json), not evidence
  events      typed progress events (Planned, PhaseStarted, PointMeasured, Notice) for one callback
"""
