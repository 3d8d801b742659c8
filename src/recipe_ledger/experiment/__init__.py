"""Experiments: what to compare (arms), how to measure (instruments, points, repeats), the bar.

Modules:
  spec       the experiment file (experiments/*.yaml, ``schema_version`` 1): arms (recipe, command,
             release, study) and their engines (names ``recipe_ledger.engines`` knows), server,
             instruments, points, repeats, bars, calibration; strict, with a JSON Schema
             (``ledger experiment schema``) and errors at file:line
  engines    fair cross-engine bars: refuse a bar whose client cannot measure every arm it compares,
             and name the one client behind each bar
  entry_size the result entry's size from the spec's text, checked at load and at --plan: a spec
             whose run could not be recorded is refused at the field to shorten
  pointwise  ``{point}`` in server arguments and instrument options: filled in per point, arithmetic
             evaluated (``num_prompts: "{point} * 10"``), unknown placeholders refused at load; pure
  reference  docs/experiments.md written from the schema (``./dev docs``; a test compares)
"""
