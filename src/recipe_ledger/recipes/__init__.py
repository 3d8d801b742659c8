"""The recipe engine: models, resolution to launch commands, lint and memory fit.

Modules:
  models      pydantic models of the vLLM recipes schema plus our superset (conflicts_with, memory)
  corpus      a recipes root (taxonomy, strategies, models), each file loaded once
  catalog     find a recipe by path, org/name or slug; validate; list
  preprocess  recipe YAML -> the object the reference builder receives (js-yaml values, hf_id...)
  resolve     selection -> argv, env, image, as recipes.vllm.ai builds it (pure: an import contract)
  sglang      the same selection as SGLang's launch command: its ``sglang`` blocks, else vLLM's flags
              translated (pure)
  sglang_flags the vLLM -> SGLang flag table: parsers, layout, memory, speculative decoding (pure)
  shell       dedupe, quoting, command lines and ``docker run`` text, byte-identical to the site
  flags       a vLLM argv read as flags (``--x v`` / ``--x=v`` / switches / multi-value)
  command     ``ledger recipe command``: resolution with the site's defaults filled in
  lint        the schema's silent traps as warnings at file:line
  boxes       box profiles (recipes/boxes/*.yaml, ``schema_version`` 1), looked up in several folders
  layers      a lab's layout: a flat recipes root or a lab's overlay over its upstream snapshot, the
              packaged defaults (lab_template/), where box profiles are found
  boxdetect   this machine's box profile from nvidia-smi, /proc/meminfo, lscpu (parsers pure)
  lab         the files ``ledger init`` makes in a new lab, never overwriting one
  upstream    ``ledger recipe update``: a new upstream snapshot compared, linted, swapped in
  fit         memory arithmetic: budget, resident weights, KV room, what must leave the GPU (pure)
  ceiling     ``ledger fit --predict``: the decode tok/s the host link alone allows for the offload (pure)
  parallel_cost  what a decode step pays between GPUs: TP all-reduces, EP all-to-alls (pure)
  fitting     ``ledger fit`` glue: resolve for a box, then fit
"""
