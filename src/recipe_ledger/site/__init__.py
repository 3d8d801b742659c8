"""The static recipe site: the ledger, the recipes and the published tables as HTML.

Modules:
  build      gather each page's data (a plain, JSON-able dict), render it with jinja2, write the
             page and the same data as JSON beside it; deterministic, relative links only
  recipes    the per-recipe data: the command builder's precomputed commands, the fit table, guide
  plots      small pure-Python SVG charts (sweeps with their knee, lane history, verdict effects)
  templates/ base.html, _partials/ and one template per page kind (autoescape, StrictUndefined)
  static/    site.css and site.js (the command builder and the timeline filter; no framework)

jinja2 and markdown-it-py are imported here and nowhere else (the ``site`` extra).
"""

from recipe_ledger.site.build import BuildReport, build_site

__all__ = ["BuildReport", "build_site"]
