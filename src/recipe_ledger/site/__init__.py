"""The static recipe site: the ledger, the recipes and the published tables as HTML.

Modules:
  build          the order of a build: load the verified ledger and the recipes once, empty the
                 output folder, hand each page kind what it shows
  writer         the output folder (its marker), rendering with jinja2, each page's JSON beside
                 it, the static files, page names (slugs); deterministic, relative links only
  entries        the ledger indexed for pages (by id, retractions, references, timeline page) and
                 the link every page writes for an entry
  shown          what a page shows: text redacted against one environment snapshot per build,
                 payload objects with every key a template reads
  reproductions  reproductions in words (timeline, release and experiment pages)
  plots          small pure-Python SVG charts (sweeps with their knee, lane history, verdict effects)
  pages/         one module per page kind (home, recipes, experiments, releases, timeline, tables):
                 see its __init__
  templates/     base.html, _partials/ and one template per page kind (autoescape, StrictUndefined)
  static/        site.css and site.js (the command builder and the timeline filter; no framework)

jinja2 and markdown-it-py are imported here and nowhere else (the ``site`` extra).
"""

from recipe_ledger.site.build import BuildReport, build_site

__all__ = ["BuildReport", "build_site"]
