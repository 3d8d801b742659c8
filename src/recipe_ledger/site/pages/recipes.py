"""The recipe pages (``recipes/<org>/<name>.html``) and the recipes' JSON API (``api/``): each
recipe's description, the evidence the ledger holds per hardware, the command builder's precomputed
commands, the memory fit on every box profile, the newest entries naming it, and its guide.

The builder is static JS over precomputed text, so every command it shows is produced here by
the same functions `ledger recipe command` calls (``resolve_for_people`` + ``text_for_people``),
for the request the CLI builds from ``-H HW -s STRATEGY -v VARIANT -f F...`` (or
``--no-features``). Which combinations are precomputed (see docs/site.md):

- hardware: every id the recipe names under ``meta.hardware`` (its default hardware if none);
- strategies: the recipe's compatible *single-node* strategies that the hardware does not opt out of;
- variants: all;
- feature sets: all subsets when the recipe has at most ``ALL_SUBSETS_UP_TO`` features (every
  recipe of the vLLM corpus has at most 6); otherwise the site's default set, the default set with
  each one feature toggled, no feature, and every feature, and any other combination shows the CLI
  command to run instead of a command.

Commands share most of their lines, so each distinct line (and warning, and error) is stored once
in ``texts`` and a combination lists indices into it: all 32 feature sets of a 5-feature recipe on
11 hardware ids then fit in a page well under 2 MB.

A recipe that does not load still gets a page, showing its error.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from markdown_it import MarkdownIt

from recipe_ledger.errors import LedgerError
from recipe_ledger.ledger.views import summarize
from recipe_ledger.recipes import resolve
from recipe_ledger.recipes.boxes import Box
from recipe_ledger.recipes.catalog import LoadedRecipe, RecipeRoot
from recipe_ledger.recipes.command import (
    CommandRequest,
    ResolvedCommand,
    resolve_for_people,
    text_for_people,
)
from recipe_ledger.recipes.fit import FitReport, verdict_lines
from recipe_ledger.recipes.fitting import (
    command_parallel_sizes,
    cross_gpu_gap,
    fit_recipe,
    predict_ceilings,
    predict_decode,
)
from recipe_ledger.site.entries import LedgerIndex, entry_ref
from recipe_ledger.site.shown import redact, redact_all
from recipe_ledger.site.writer import Progress, SiteWriter, dump_json, run_tasks, slugify, unique_path

RECIPE_LEDGER_ROWS = 50  # newest entries naming a recipe listed on its page (the timeline has all)
EVIDENCE_LINKS = 3  # newest entries linked per recipe x hardware cell
EVIDENCE_KINDS = ("result", "release", "reproduction", "failure")
UPSTREAM = "https://recipes.vllm.ai"  # where the recipes' own site-absolute links point
ALL_SUBSETS_UP_TO = 6


# -- the recipes -------------------------------------------------------------------------------


def recipe_name(ref: str) -> str:
    """``models/org/name.yaml`` -> ``org/name``: what `ledger recipe command` accepts."""
    return ref.removeprefix("models/").removesuffix(".yaml").removesuffix(".yml")


class CachedRoot(RecipeRoot):
    """A RecipeRoot that validates each recipe once: the builder resolves one recipe a hundred
    times, and `RecipeRoot.load` parses the model again on every call."""

    def __init__(self, root):
        super().__init__(root)
        self._loaded: dict[str, LoadedRecipe] = {}

    def load(self, name: str) -> LoadedRecipe:
        if name not in self._loaded:
            self._loaded[name] = super().load(name)
        return self._loaded[name]


def error_text(error: LedgerError, root: RecipeRoot) -> str:
    """An error's one line with the recipes root written as `recipes` (no absolute path on the site)."""
    text = error.one_line()
    for prefix in {str(root.root), str(root.root.resolve())}:
        text = text.replace(prefix, "recipes")
    return redact(text)


@dataclass
class RecipeInfo:
    ref: str
    name: str
    page: str  # path under out
    loaded: LoadedRecipe | None
    error: str | None = None


def load_recipes(root: RecipeRoot) -> list[RecipeInfo]:
    infos: list[RecipeInfo] = []
    used: set[str] = set()
    for path in root.recipe_paths:
        ref = root.ref_of(path)
        name = recipe_name(ref)
        page = unique_path(f"recipes/{'/'.join(slugify(p) for p in name.split('/'))}.html", used)
        try:
            infos.append(RecipeInfo(ref, name, page, root.load(str(path))))
        except LedgerError as error:
            infos.append(RecipeInfo(ref, name, page, None, error_text(error, root)))
    return infos


# -- the ledger's evidence per recipe and hardware ---------------------------------------------


_TOKEN_SPLIT = re.compile(r"[\s,;:()\[\]{}\"'`]+")


def entry_tokens(entry: dict[str, Any]) -> set[str]:
    """Lower-case words of an entry's subject-like fields (to tie entries to recipes and hardware)."""
    p = entry.get("payload", {})
    model = p.get("model") if isinstance(p.get("model"), dict) else {}
    experiment = p.get("experiment") if isinstance(p.get("experiment"), dict) else {}
    conditions = p.get("conditions") if isinstance(p.get("conditions"), dict) else {}
    fields = [
        p.get("subject"),
        p.get("lane"),
        model.get("name"),
        experiment.get("box"),
        conditions.get("box"),
        conditions.get("hardware"),
        p.get("title"),
        # an arm resolved from a recipe names it: "models/org/name.yaml · cpu_x86 · single_node_tp ..."
        *(a.get("source") for a in (experiment.get("arms") or {}).values() if isinstance(a, dict)),
    ]
    words: set[str] = set()
    for text in fields:
        if isinstance(text, str):
            words.update(w.strip(".").lower() for w in _TOKEN_SPLIT.split(text) if w)
    return words


def recipe_keys(info: RecipeInfo) -> set[str]:
    """Words that, in an entry's subject, mean this recipe's model."""
    keys = {info.name.lower(), info.name.split("/")[-1].lower(), info.ref.lower()}
    if info.loaded:
        keys |= {info.loaded.recipe.meta.slug.lower(), info.loaded.recipe.model.model_id.lower()}
    return keys


def hardware_of(entry_words: set[str], boxes: dict[str, Box], hardware_ids: Iterable[str]) -> set[str]:
    found = {hw for hw in hardware_ids if hw in entry_words or hw.replace("_", "-") in entry_words}
    found |= {box.hardware for word in entry_words if (box := boxes.get(word)) and box.hardware}
    return found


def recipe_evidence(
    infos: list[RecipeInfo], index: LedgerIndex, boxes: dict[str, Box], hardware_ids: list[str]
) -> dict[str, list[tuple[dict[str, Any], set[str]]]]:
    """recipe name -> [(entry, hardware ids it names)] for entries whose subject names the recipe."""
    by_key: dict[str, str] = {}
    for info in infos:
        for key in recipe_keys(info):
            by_key.setdefault(key, info.name)
    tied = []
    for entry in index.entries:
        if entry.get("kind") not in ("result", "failure", "release", "note", "reproduction"):
            continue
        words = entry_tokens(entry)
        tied.append(
            (entry, {by_key[w] for w in words if w in by_key}, hardware_of(words, boxes, hardware_ids))
        )
    found: dict[str, list] = defaultdict(list)
    for entry, names, hws in inherit_release_subjects(tied):
        for name in sorted(names):
            found[name].append((entry, hws))
    return found


Tied = tuple[dict[str, Any], set[str], set[str]]  # (entry, recipe names, hardware ids)


def inherit_release_subjects(tied: list[Tied]) -> list[Tied]:
    """A release often names neither its model nor its box (an imported lane's v12 lists only the
    flags it changed), yet it ran where its lane runs. So a release takes the recipes and hardware
    that any release of its lane names; and, failing that, an imported one takes those the other
    entries imported from the same document name, when they name exactly one (a seed document is
    one campaign on one box). Other kinds keep only what they name themselves."""
    lanes: dict[str, tuple[set[str], set[str]]] = defaultdict(lambda: (set(), set()))
    documents: dict[str, tuple[set[str], set[str]]] = defaultdict(lambda: (set(), set()))
    for entry, names, hws in tied:
        payload = entry.get("payload") or {}
        if entry.get("kind") == "release" and isinstance(payload.get("lane"), str):
            lanes[payload["lane"]][0].update(names)
            lanes[payload["lane"]][1].update(hws)
        if document := _imported_from(entry):
            documents[document][0].update(names)
            documents[document][1].update(hws)
    out = []
    for entry, names, hws in tied:
        payload = entry.get("payload") or {}
        if entry.get("kind") == "release":
            lane_names, lane_hws = lanes.get(str(payload.get("lane")), (set(), set()))
            names, hws = names | lane_names, hws | lane_hws
            doc_names, doc_hws = documents.get(_imported_from(entry) or "", (set(), set()))
            names = names or (doc_names if len(doc_names) == 1 else set())
            hws = hws or (doc_hws if len(doc_hws) == 1 else set())
        out.append((entry, names, hws))
    return out


def _imported_from(entry: dict[str, Any]) -> str | None:
    origin = (entry.get("payload") or {}).get("origin")
    if isinstance(origin, dict) and origin.get("how") == "imported" and isinstance(origin.get("source"), str):
        return origin["source"]
    return None


def count_words(counts: dict[str, int]) -> str:
    """``{"result": 1, "release": 3, "failure": 5}`` -> ``1 result, 3 releases, 5 failures`` (the
    kinds with none left out; "no measured evidence" when all are none)."""
    said = [f"{n} {kind}{'' if n == 1 else 's'}" for kind, n in counts.items() if n]
    return ", ".join(said) or "no measured evidence"


def evidence_cells(
    hardware: dict[str, str], evidence: list[tuple[dict[str, Any], set[str]]], index: LedgerIndex, root: str
) -> list[dict[str, Any]]:
    """Per hardware the recipe names (or the ledger ties to it): what the recipe claims, and the
    measured evidence behind it by kind, with the newest entries linked; or none."""
    names = list(hardware) + sorted({hw for _, hws in evidence for hw in hws} - set(hardware))
    cells = []
    for hw in names:
        here = [e for e, hws in evidence if hw in hws and e.get("kind") in EVIDENCE_KINDS]
        counts = {kind: sum(e.get("kind") == kind for e in here) for kind in EVIDENCE_KINDS}
        newest = [_evidence_row(e, {hw}, index, root) for e in here[-EVIDENCE_LINKS:][::-1]]
        cells.append(
            {
                "hardware": hw,
                "claimed": hardware.get(hw, ""),
                "counts": counts,
                "said": count_words(counts),
                "newest": newest,
            }
        )
    return cells


def _evidence_row(entry: dict[str, Any], hardware: set[str], index: LedgerIndex, root: str) -> dict[str, Any]:
    return {
        **entry_ref(index, entry["id"], root),
        "kind": entry.get("kind"),
        "ts": entry.get("ts", ""),
        "summary": redact(summarize(entry, 140)),
        "hardware": sorted(hardware),
    }


# -- the page ----------------------------------------------------------------------------------


def recipe_page_data(
    info: RecipeInfo,
    root: RecipeRoot,
    boxes: list[Box],
    evidence: list,
    index: LedgerIndex,
    pages: dict[str, str] | None = None,
) -> tuple[dict[str, Any], str]:
    """(page data, guide HTML) of one recipe (its builder data is computed apart: start_builders)."""
    rel_root = "../" * info.page.count("/")
    shown = evidence[-RECIPE_LEDGER_ROWS:][::-1]
    ledger_rows = [_evidence_row(entry, hws, index, rel_root) for entry, hws in shown]
    base = {
        "name": info.name,
        "ref": info.ref,
        "error": info.error,
        "ledger": ledger_rows,
        "ledger_total": len(evidence),
    }
    if info.loaded is None:
        return base, ""
    recipe = info.loaded.recipe
    guide = redact(recipe.guide if isinstance(recipe.guide, str) else "")
    data: dict[str, Any] = {
        **base,
        "title": redact(recipe.meta.title),
        "provider": redact(recipe.meta.provider),
        "description": redact(recipe.meta.description),
        "model_id": recipe.model.model_id,
        "hardware": {hw: str(state) for hw, state in recipe.meta.hardware.items()},
        "evidence": evidence_cells(
            {hw: str(state) for hw, state in recipe.meta.hardware.items()}, evidence, index, rel_root
        ),
        "variants": [
            {
                "name": v,
                "precision": var.precision,
                "vram_minimum_gb": var.vram_minimum_gb,
                "description": redact(var.description or ""),
            }
            for v, var in recipe.variants.items()
        ],
        "fit": fit_rows(root, info.loaded, boxes),
        "guide_markdown": guide,
    }
    return data, markdown_html(guide, guide_link(pages or {}, rel_root))


def markdown_html(text: str, link: Callable[[str], str] | None = None) -> str:
    """CommonMark with tables; raw HTML in the source is escaped (shown as text), never passed on.
    ``link`` rewrites each link's target (a guide's site-absolute links: see ``guide_link``)."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(text)
    if link is not None:
        for token in tokens:
            for child in token.children or ():
                href = child.attrs.get("href") if child.type == "link_open" else None
                if isinstance(href, str):
                    child.attrs["href"] = link(href)
    return md.renderer.render(tokens, md.options, {})


def guide_link(pages: dict[str, str], root: str) -> Callable[[str], str]:
    """A guide's ``/org/model`` link (recipes.vllm.ai's form): this site's page of that recipe when
    it has one, else the same path on recipes.vllm.ai; other links unchanged."""

    def rewrite(href: str) -> str:
        if not href.startswith("/") or href.startswith("//"):
            return href
        path, _, fragment = href.partition("#")
        page = pages.get(path.strip("/").lower())
        if page:
            return root + quote(page) + (f"#{fragment}" if fragment else "")
        return UPSTREAM + href

    return rewrite


def write_recipes(
    writer: SiteWriter,
    infos: list[RecipeInfo],
    builders: list[dict[str, Any] | None],
    root: RecipeRoot,
    boxes: list[Box],
    evidence: dict,
    index: LedgerIndex,
    tick: Progress,
) -> None:
    """Every recipe's page and API file, then ``api/models.json`` listing them."""
    pages = {i.name.lower(): i.page for i in infos}

    def one(i: int, out: SiteWriter) -> None:
        info = infos[i]
        data, guide_html = recipe_page_data(info, root, boxes, evidence.get(info.name, []), index, pages)
        page = {**data, "builder": builders[i]}
        out.page(info.page, "recipe.html", page, compact=True, guide_html=guide_html)
        out.write_text(f"api/{info.name}.json", dump_json(api_recipe(info, root)))

    run_tasks(len(infos), one, writer, "recipes", tick)
    writer.write_text("api/models.json", dump_json(models_index(infos)))


# -- the JSON API (recipes.vllm.ai's shape) ----------------------------------------------------


def api_recipe(info: RecipeInfo, root: RecipeRoot) -> dict[str, Any]:
    """The recipes.vllm.ai JSON shape: hf_id, meta, recommended_command first, then the rest."""
    if info.loaded is None:
        return {"hf_id": info.name, "error": info.error}
    dumped = redact_all(info.loaded.recipe.model_dump(mode="json", exclude_none=True))
    out: dict[str, Any] = {"hf_id": info.name, "meta": dumped.pop("meta")}
    recommended = _recommended(info, root)
    if recommended is not None:
        out["recommended_command"] = recommended
    for key in ("strategy_overrides", "compatible_strategies", "default_strategy", "dependencies"):
        dumped.pop(key, None)
    return {**out, **dumped}


def _recommended(info: RecipeInfo, root: RecipeRoot) -> dict[str, Any] | None:
    """The default selection's builder result (recipes.vllm.ai's `recommended_command`)."""
    try:
        resolved = resolve_for_people(root, CommandRequest(info.name))
    except LedgerError:
        return None
    return redact_all(resolved.result)


def models_index(infos: list[RecipeInfo]) -> list[dict[str, Any]]:
    """``api/models.json``: every recipe's hf_id, title, provider, page and API file."""
    return [
        {
            "hf_id": info.name,
            "title": redact(info.loaded.recipe.meta.title) if info.loaded else info.name,
            "provider": redact(info.loaded.recipe.meta.provider) if info.loaded else "",
            "url": info.page,
            "json": f"api/{info.name}.json",
        }
        for info in infos
    ]


# -- the command builder -----------------------------------------------------------------------


def feature_sets(features: list[str], default: list[str]) -> list[list[str]]:
    """The feature subsets the builder offers precomputed, each in the recipe's feature order."""
    if len(features) <= ALL_SUBSETS_UP_TO:
        chosen = [set(c) for n in range(len(features) + 1) for c in itertools.combinations(features, n)]
    else:
        base = set(default)
        chosen = [base, set(), set(features)] + [base ^ {f} for f in features]
    seen, out = set(), []
    for subset in chosen:
        ordered = [f for f in features if f in subset]
        if tuple(ordered) not in seen:
            seen.add(tuple(ordered))
            out.append(ordered)
    return out


def combo_key(hardware: str, strategy: str, variant: str, features: list[str]) -> str:
    return f"{hardware}|{strategy}|{variant}|{','.join(features)}"


def cli_line(name: str, hardware: str, strategy: str, variant: str, features: list[str]) -> str:
    flags = " ".join(f"-f {f}" for f in features) if features else "--no-features"
    return f"ledger recipe command {name} -H {hardware} -s {strategy} -v {variant} {flags}"


def single_node_strategies(raw: dict, hardware: str, strategies: dict, taxonomy: dict) -> list[str]:
    hw = resolve.hardware_for(taxonomy, hardware)
    return [
        s
        for s in resolve.effective_compatible_strategies(raw)
        if isinstance(s, str)
        and resolve.get(strategies, s, "deploy_type") == "single_node"
        and resolve.is_strategy_supported_on_hardware(raw, s, hw)
    ]


def command_for(
    root: RecipeRoot, name: str, hardware: str, strategy: str, variant: str, features: list[str]
) -> dict[str, Any]:
    """One builder cell: the text `ledger recipe command` prints for this request, or its error."""
    cli = cli_line(name, hardware, strategy, variant, features)
    try:
        resolved = resolve_for_people(root, CommandRequest(name, hardware, strategy, variant, list(features)))
    except LedgerError as error:
        return {"cli": cli, "error": error_text(error, root)}
    return {
        "cli": cli,
        "command": redact(text_for_people(resolved, docker=False)),
        "warnings": [redact(w) for w in resolved.warnings],
    }


class TextTable:
    """Distinct strings stored once; a cell refers to them by index (in first-seen order)."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._index: dict[str, int] = {}

    def ref(self, text: str) -> int:
        if text not in self._index:
            self._index[text] = len(self.texts)
            self.texts.append(text)
        return self._index[text]


def packed_cell(cell: dict[str, Any], table: TextTable) -> dict[str, list[int]]:
    """A ``command_for`` cell as indices: command lines, warnings, or the error (the CLI line the
    page derives from the selection, as `cli_line` does)."""
    if "error" in cell:
        return {"error": [table.ref(cell["error"])]}
    return {
        "lines": [table.ref(line) for line in cell["command"].split("\n")],
        "warnings": [table.ref(w) for w in cell["warnings"]],
    }


def unpacked_cell(cell: dict[str, list[int]], texts: list[str]) -> dict[str, Any]:
    """The inverse of ``packed_cell`` (what the page's script does), for tests and tools."""
    if "error" in cell:
        return {"error": texts[cell["error"][0]]}
    return {
        "command": "\n".join(texts[i] for i in cell["lines"]),
        "warnings": [texts[i] for i in cell["warnings"]],
    }


def builder_data(root: RecipeRoot, loaded: LoadedRecipe) -> dict[str, Any]:
    name = recipe_name(loaded.ref)
    raw = root.corpus.recipe(loaded.ref)
    corpus = root.corpus
    variants = list(loaded.recipe.variants)
    features = list(loaded.recipe.features)
    default_variant = resolve.default_variant(raw) or (variants[0] if variants else "default")
    hardware = list(loaded.recipe.meta.hardware) or [
        resolve.default_hardware(raw, default_variant, corpus.taxonomy)
    ]
    default_hw = resolve.default_hardware(raw, default_variant, corpus.taxonomy)
    combos: dict[str, Any] = {}
    per_hw: dict[str, Any] = {}
    table = TextTable()
    for hw in hardware:
        strategies = single_node_strategies(raw, hw, corpus.strategies, corpus.taxonomy)
        recommended, _ = resolve.default_strategy(
            raw, default_variant, hw, corpus.strategies, corpus.taxonomy
        )
        defaults = {v: resolve.default_features(raw, hw, v) for v in variants}
        per_hw[hw] = {
            "strategies": strategies,
            "default_features": defaults,
            "default_strategy": recommended if recommended in strategies else (strategies or [""])[0],
        }
        for strategy, variant in itertools.product(strategies, variants):
            for subset in feature_sets(features, defaults[variant]):
                cell = command_for(root, name, hw, strategy, variant, subset)
                combos[combo_key(hw, strategy, variant, subset)] = packed_cell(cell, table)
    return {
        "recipe": name,
        "hardware": hardware,
        "default_hardware": default_hw if default_hw in hardware else hardware[0],
        "variants": variants,
        "default_variant": default_variant,
        "features": [
            {
                "name": f,
                "description": redact(loaded.recipe.features[f].description),
                "opt_in": f in loaded.recipe.opt_in_features,
            }
            for f in features
        ],
        "per_hardware": per_hw,
        "subset_rule": (
            f"all subsets (at most {ALL_SUBSETS_UP_TO} features)"
            if len(features) <= ALL_SUBSETS_UP_TO
            else "the default set, each feature toggled from it, none, and all"
        ),
        "all_subsets_up_to": ALL_SUBSETS_UP_TO,
        "combos": combos,
        "texts": table.texts,
    }


POOL_FROM = 50  # recipes; below this, starting worker processes costs more than it saves
_work: tuple[RecipeRoot, list[LoadedRecipe | None]] | None = None  # what forked workers read


def _builder_of(i: int) -> dict[str, Any] | None:
    assert _work is not None
    root, loaded = _work
    recipe = loaded[i]
    return builder_data(root, recipe) if recipe else None


def start_builders(root: RecipeRoot, loaded: list[LoadedRecipe | None]) -> Callable[[], list]:
    """Start computing every recipe's builder data; returns the function that waits for them (in
    ``loaded``'s order, None for a recipe that does not load).

    ~70 resolutions per recipe are most of a 1,000-recipe build, so they run in forked workers
    (which inherit the loaded recipes: nothing is pickled on the way in) while the caller writes
    the ledger pages. Small sites, or platforms without fork, compute them when asked instead."""
    global _work
    if len(loaded) < POOL_FROM or "fork" not in multiprocessing.get_all_start_methods():
        return lambda: [builder_data(root, one) if one else None for one in loaded]
    _work = (root, loaded)
    pool = multiprocessing.get_context("fork").Pool(processes=min(4, os.cpu_count() or 1))
    pending = pool.map_async(_builder_of, range(len(loaded)), chunksize=4)

    def finish() -> list:
        global _work
        try:
            return pending.get()
        finally:
            pool.close()
            pool.join()
            _work = None

    return finish


# -- the memory fit on every box ---------------------------------------------------------------


def fit_rows(root: RecipeRoot, loaded: LoadedRecipe, boxes: list[Box]) -> list[dict[str, Any]]:
    """`ledger fit` on every box profile, for a recipe with a memory block (else no rows)."""
    if loaded.recipe.memory is None:
        return []
    name = recipe_name(loaded.ref)
    return [_fit_row(root, name, box) for box in boxes]


CEILING_WINDOWS = [1, 5]  # one token per step, and a k=5 speculative verify window


def _ceiling_cells(report: FitReport, resolved: ResolvedCommand) -> dict[str, Any]:
    """The decode tok/s the box's host link alone allows for the fit's expert offload, one sequence
    (`ledger fit --predict`); nothing when nothing is offloaded or the recipe has no routing."""
    memory = resolved.loaded.recipe.memory
    if memory is None or memory.routing is None or report.expert_offload_gib <= 0:
        return {}
    ceilings, _ = predict_ceilings(report, resolved, batches=[1], windows=CEILING_WINDOWS)
    return {
        "ceilings": [
            {"window": c.window, "tok_s": c.tok_s, "gb_per_step": c.bytes_per_step / 1e9} for c in ceilings
        ],
        "ceiling_cli": (
            f"ledger fit {recipe_name(resolved.loaded.ref)} --box {report.box_id} --predict --window 5"
        ),
    }


CROSS_GPU_BATCHES = [1, 32]  # one sequence, and a busy decode batch: latency- and bandwidth-bound ends


def _cross_gpu_cells(report: FitReport, resolved: ResolvedCommand, root: RecipeRoot) -> dict[str, Any]:
    """What the command's tensor and expert parallelism pay between GPUs per decode step on this box,
    with each term's share of the modelled step (`ledger fit --predict`), at ``CROSS_GPU_BATCHES``;
    nothing for a command on one GPU, the reason when it cannot be counted."""
    sizes = command_parallel_sizes(resolved)
    if not sizes.crosses_gpus:
        return {}
    batches = " ".join(f"--batch {batch}" for batch in CROSS_GPU_BATCHES)
    cli = f"ledger fit {recipe_name(resolved.loaded.ref)} --box {report.box_id} --predict {batches}"
    cell: dict[str, Any] = {"layout": sizes.label(), "cli": cli}
    gap = cross_gpu_gap(report, resolved)
    if gap:  # no shape in the recipe or no path in the box: say which, not a number
        return {"cross_gpu": {**cell, "note": redact(gap)}}
    try:
        prediction = predict_decode(report, resolved, batches=CROSS_GPU_BATCHES, windows=[1])
    except LedgerError as error:  # the host link's half refused (offloaded experts, no routing)
        return {"cross_gpu": {**cell, "note": error_text(error, root)}}
    path = prediction.path
    cell["path"] = f"{path.gbps:g} GB/s, {path.latency_us:g} us a call ({path.source})" if path else ""
    cell["steps"] = [
        {
            "batch": step.batch,
            "step_ms": step.ms,
            "host_link_share": step.shares().get("base", 0.0),
            "terms": [
                {"name": c.name, "ms": c.ms, "binds": c.binds, "share": step.shares()[c.name]}
                for c in step.collectives
            ],
        }
        for step in prediction.steps
    ]
    return {"cross_gpu": cell}


def _fit_row(root: RecipeRoot, name: str, box: Box) -> dict[str, Any]:
    row: dict[str, Any] = {
        "box": box.id,
        "display_name": box.display_name,
        "hardware": box.hardware or "",
        "gpus": box.gpu.count,
        "hbm_gib": box.gpu.hbm_gib,
        "cli": f"ledger fit {name} --box {box.id}",
    }
    try:
        report, resolved = fit_recipe(root, name, box.id)
    except LedgerError as error:
        return {**row, "error": error_text(error, root)}
    return {
        **_ceiling_cells(report, resolved),
        **_cross_gpu_cells(report, resolved, root),
        **row,
        "fits": report.fits,
        "context": report.context,
        "budget_gib": report.budget_gib,
        "resident_gib": report.resident_gib,
        "kv_room_gib": report.kv_room_gib,
        "host_used_gib": report.host_used_gib,
        "min_expert_offload_gib": report.min_expert_offload_gib,
        "verdict": [redact(v) for v in verdict_lines(report)],
        "notes": [redact(a) for a in report.problems + report.assumptions],
    }
