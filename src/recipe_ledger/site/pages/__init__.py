"""One module per page kind, each owning its pages fully: what they show (a plain, JSON-able dict
per page, sorted, fixed number formats, redacted), where they go under ``out``, and writing them
through ``site.writer.SiteWriter``.

Modules:
  home         index.html (recipes x hardware, with the ledger's counts) and llms.txt
  recipes      recipes/<org>/<name>.html: evidence per hardware, the command builder's precomputed
               commands, the fit on every box, the guide; api/<org>/<name>.json and api/models.json
  experiments  experiments/<name>-<id>.html and experiments/index.html: the control, what differs
               between arms, repeats and traces from hash-matching run folders, verdicts, plots
  releases     releases/<lane>/<version>.html and releases/index.html: pins, numbers, doubts,
               reproductions, the diff to the previous version, each lane's history charts
  timeline     ledger/index.html, ledger/page-N.html: every entry in words (rows without jinja)
  tables       tables.html and the site's copies of the table files under tables/
"""
