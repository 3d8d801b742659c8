"""Recipe Ledger: launch commands, memory fit, measured runs and an append-only ledger.

A typed core with a thin CLI on top. Imports flow one way, from the CLI down to ``errors``, and
every external library has one owner; pyproject.toml's ``[tool.importlinter]`` enforces both
(``lint-imports``). docs/architecture.md walks the data flow stage by stage.

Package map (one owner per concern):
  cli/         the only user of click and rich: parse, call one core function, print, exit code
  errors       LedgerError (``where`` + ``hint``): InputError exit 2, StateError exit 3
  spec/        YAML with js-yaml semantics and line numbers (the only user of PyYAML), validation
  recipes/     vLLM recipes: models, resolution to argv/env/image (pure), lint, fit, box profiles
  experiment/  the experiment spec (experiments/*.yaml)
  pipeline/    the one place the stages are wired: plan, preflight, measure, run, record
  launch/      servers as a process group or a docker container (the only user of docker)
  engines/     one module per serving engine (vllm, sglang, the stand-in none) behind one class,
               found by name (built-ins and ``recipe_ledger.engines`` entry points)
  instruments/ benchmark clients -> normalized metrics, raw files hashed; the registry of kinds
  verdict      candidate vs control with calibrated noise (pure)
  stats        Student t, chi-square, sigma upper bounds, sample stdev: the verdict's arithmetic (pure)
  sequential   the sequential verdict: a look per launch pair, resumable state (pure; see pipeline.sequence)
  quality      quality bars: non-inferiority of items kept, paired by item, Tango's score test (pure)
  provenance   host / GPU fingerprint and model content hash (reads the machine, decides nothing)
  redact       secrets out of everything written (pure)
  plugins      registries a plugin extends: built-ins plus Python entry points (instrument kinds)
  ledger/      the append-only hash chains under ledger/ (git through ledger.gitinfo only)
  releases/    release specs, pins, publish, diff, reproduce
  tracking/    the MLflow index of the ledger (mlflow and sqlite3 each through one of its modules)
  runs         the run folder runs/<run_id>/: paths, versioned headers, one reading policy
  metrics      what a metric is: unit, direction, label, format, each engine's source
  routing      routing skew from an engine's per-pass expert hits (pure; scripts/routing_probe.py)
  profile_summary  where a profiled window's time went, from a torch trace (pure; scripts/profile_probe.py)
  tables       verified, non-retracted entries -> tables/*.csv|json|md (the dvc ``tables`` stage)
  site/        tables + recipes + ledger -> static HTML (the only user of jinja2 and markdown-it)
  scaleout/    several boxes: `ledger sweep` hands each experiment to its box on Ray
"""

__version__ = "0.1.0"
