"""`ledger release publish`: a release spec turned into a ``release`` entry with every pin resolved.

Publishing never fails silently and never flatters: a pin that cannot be completed or a number
that no verified result entry backs is written down as a reason, and the release is recorded as
``verified: false`` with those reasons. What cannot be pinned at all (an image digest the daemon
does not have, a model directory that is not there, a number whose result does not say it) is
refused, naming it: nothing half-true is published.

A release is published from a clean tree: when its spec, recipes, scripts or the tool differ from
HEAD it is refused unless ``allow_dirty`` (then its git stamp records the files and the diff's
hash). ``preview`` drafts the same payload and writes nothing (`ledger release publish --dry-run`):
a release can only be retracted once written, so its pins and reasons are shown first.
"""

from __future__ import annotations

import shlex
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from recipe_ledger import runs
from recipe_ledger.errors import InputError, StateError
from recipe_ledger.instruments.base import sha256_file
from recipe_ledger.launch import images
from recipe_ledger.ledger import gitinfo
from recipe_ledger.ledger.fold import fold_statuses
from recipe_ledger.ledger.models import (
    ArmRecord,
    ExperimentRecord,
    ImagePin,
    ModelPin,
    ReleaseNumber,
    ReleasePayload,
    validate_payload,
)
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.ledger.verify import require_whole
from recipe_ledger.pipeline.clean_tree import refusal, require_clean_tree
from recipe_ledger.pipeline.run import repo_relative
from recipe_ledger.recipes.flags import parse_flags
from recipe_ledger.redact import redact_obj
from recipe_ledger.releases import catalog, pins
from recipe_ledger.releases.spec import NumberSpec, ReleaseSpec, load_release_spec

DEFAULT_TOLERANCE = 0.10  # when the experiment has no bar on the number's metric and point

P = TypeVar("P")


@dataclass
class Draft:
    """A release payload being assembled, with every reason against verifying it."""

    fields: dict[str, Any] = field(default_factory=dict)
    gaps: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def take(self, pinned: pins.Pinned[P]) -> P:
        self.gaps += pinned.gaps
        self.notes += pinned.notes
        return pinned.pin


@dataclass(frozen=True)
class Source:
    """A result entry behind one or more numbers."""

    entry: dict[str, Any]
    record: ExperimentRecord
    status: str


def publish(
    ledger: Ledger,
    repo: Path,
    spec_path: Path,
    lane: str,
    version: str,
    *,
    writer: str,
    allow_dirty: bool = False,
) -> dict[str, Any]:
    """Append the release ``lane``@``version`` described by ``spec_path``; return the entry.

    Refused unless the ledger passes ``ledger verify --history``: a release's numbers come from it.
    """
    require_whole(ledger, "published")
    draft = _drafted(ledger, repo, spec_path, lane, version)
    git = require_clean_tree(repo, [spec_path], allow_dirty=allow_dirty)
    return ledger.append("release", draft.fields, writer=writer, git=git)


@dataclass(frozen=True)
class Preview:
    """What `publish` would append, and what it would say about the tree; nothing is written."""

    payload: ReleasePayload
    tree_refusal: str | None  # why publish would refuse the tree without --allow-dirty, if it would


def preview(ledger: Ledger, repo: Path, spec_path: Path, lane: str, version: str) -> Preview:
    """The release payload ``publish`` would write (the same checks and pins), without writing it."""
    draft = _drafted(ledger, repo, spec_path, lane, version)
    payload = validate_payload("release", redact_obj(draft.fields), where="release payload")
    assert isinstance(payload, ReleasePayload)
    changes = gitinfo.feeding_changes(repo, [spec_path])
    return Preview(payload, refusal(changes) if changes is not None and changes.dirty else None)


def _drafted(ledger: Ledger, repo: Path, spec_path: Path, lane: str, version: str) -> Draft:
    spec = load_release_spec(spec_path)
    _check_names(spec, spec_path, lane, version)
    _refuse_existing(ledger, lane, version)
    return draft_release(ledger, repo, spec, spec_path)


def _check_names(spec: ReleaseSpec, spec_path: Path, lane: str, version: str) -> None:
    if (spec.lane, spec.version) != (catalog.slug(lane), version):
        raise InputError(
            f"the spec describes {spec.lane}@{spec.version}, not {catalog.slug(lane)}@{version}",
            where=str(spec_path),
            hint=f"ledger release publish {spec.lane} {spec.version} --from {spec_path}",
        )


def _refuse_existing(ledger: Ledger, lane: str, version: str) -> None:
    try:
        found = catalog.find(ledger, f"{lane}@{version}")
    except InputError:
        return
    if found.status != "retracted":
        raise StateError(
            f"release {found.ref} is already published ({found.id[:12]}); nothing published is edited",
            where=found.id[:12],
            hint="publish a new version, or `ledger retract` this one first",
        )


def draft_release(ledger: Ledger, repo: Path, spec: ReleaseSpec, spec_path: Path) -> Draft:
    """Resolve every pin of ``spec``; the draft's fields are a valid release payload."""
    draft = Draft()
    sources: dict[str, Source] = {}
    measured = [_number(ledger, repo, n, sources, draft) for n in spec.numbers]
    numbers = [number for number, _ in measured]
    if not numbers:
        draft.gaps.append("the release publishes no numbers")
    arm = _configuration([arm for _, arm in measured], draft)
    image = _image(spec, arm, draft)
    model = _model(spec, repo, image, arm, draft)
    script_pins = draft.take(pins.pin_scripts(repo, _script_paths(spec, sources)))
    _scripts_match_results(script_pins, sources, draft)
    draft.fields = {
        "lane": spec.lane,
        "lane_title": spec.lane_title,
        "version": spec.version,
        "changes": list(spec.changes),
        "supersedes": _supersedes(ledger, spec),
        "spec": repo_relative(Path(spec_path), repo),
        "spec_sha256": sha256_file(Path(spec_path)),
        "argv": list(arm.argv) if arm else [],
        "env": dict(arm.env) if arm else {},
        "flags": flag_strings(arm.argv) if arm else [],
        "command": docker_command(arm, image) if arm else None,
        "image": image.model_dump(mode="json", exclude_none=True) if image else None,
        "model": model.model_dump(mode="json", exclude_none=True) if model else None,
        "script_pins": script_pins,
        "scripts": sorted(script_pins),
        "box": _box(sources, image is not None, draft),
        "numbers": [n.model_dump(mode="json", exclude_none=True) for n in numbers],
        "metrics": {n.name: n.value for n in numbers},
        "origin": {"how": "measured", "source": repo_relative(Path(spec_path), repo)},
    }
    draft.fields["verified"] = not draft.gaps
    draft.fields["unverified"] = list(dict.fromkeys(draft.gaps))
    draft.fields["notes"] = list(dict.fromkeys(draft.notes))
    return draft


# ---------------------------------------------------------------------------------------- numbers


def _number(
    ledger: Ledger, repo: Path, spec: NumberSpec, sources: dict[str, Source], draft: Draft
) -> tuple[ReleaseNumber, ArmRecord]:
    """The number as its result entry says it, and the arm configuration that measured it."""
    source = _source(ledger, spec)
    sources[source.entry["id"]] = source
    short = source.entry["id"][:12]
    gaps = _source_gaps(source)
    if spec.arm not in source.record.arms:
        raise InputError(
            f"number {spec.name}: result {short} has no arm {spec.arm!r} "
            f"(it has {', '.join(sorted(source.record.arms))})",
            where=spec.name,
        )
    key = f"{spec.arm}.c{spec.point}.{spec.metric}"
    metrics = source.entry["payload"].get("metrics", {})
    if key not in metrics:
        raise InputError(
            f"number {spec.name}: result {short} holds no {key}", where=spec.name, hint=f"ledger show {short}"
        )
    value = float(metrics[key])
    samples = _samples(repo, source, spec, value, gaps, draft)
    draft.gaps += [f"number {spec.name}: {gap}" for gap in gaps]
    number = ReleaseNumber(
        name=spec.name,
        value=value,
        metric=spec.metric,
        point=spec.point,
        arm=spec.arm,
        unit=spec.unit,
        result=source.entry["id"],
        samples=samples,
        tolerance=spec.tolerance or _bar_tolerance(source.record, spec),
        verified=not gaps,
    )
    return number, source.record.arms[spec.arm]


def _source(ledger: Ledger, spec: NumberSpec) -> Source:
    entries = ledger.entries()
    statuses = fold_statuses(entries)
    if spec.result is not None:
        entry = ledger.get(spec.result)
    else:
        candidates = [
            e
            for e in entries
            if e["kind"] == "result"
            and e["payload"].get("subject") == spec.experiment
            and e["payload"].get("experiment")
            and statuses[e["id"]] != "retracted"
        ]
        if not candidates:
            raise InputError(
                f"number {spec.name}: no active result of experiment {spec.experiment!r} in the ledger",
                where=spec.name,
                hint=f"ledger run experiments/... (name: {spec.experiment})",
            )
        entry = candidates[-1]
    if entry["kind"] != "result":
        raise InputError(
            f"number {spec.name}: entry {entry['id'][:12]} is a {entry['kind']}, not a result",
            where=spec.name,
            hint="ledger log --kind result",
        )
    record = entry["payload"].get("experiment")
    if not record:
        raise InputError(
            f"number {spec.name}: result {entry['id'][:12]} was not measured by `ledger run` "
            "(no experiment record): it cannot back a release number",
            where=spec.name,
        )
    return Source(entry, ExperimentRecord.model_validate(record), statuses[entry["id"]])


def _source_gaps(source: Source) -> list[str]:
    short = source.entry["id"][:12]
    gaps = []
    if source.status == "retracted":
        gaps.append(f"result {short} is retracted")
    if source.entry["payload"].get("origin", {}).get("how") != "measured":
        gaps.append(f"result {short} was not measured by this tool")
    return gaps


def _samples(
    repo: Path, source: Source, spec: NumberSpec, value: float, gaps: list[str], draft: Draft
) -> list[float]:
    """The per-launch values behind the median, from the run's measurements file, whose content
    hash the result entry recorded (a changed file is named, never used)."""
    run_id = source.record.run_id
    path = runs.runs_dir(repo) / run_id / runs.MEASUREMENTS  # checked as a run id before it is read
    recorded = source.entry["payload"].get("artifacts", {}).get(runs.MEASUREMENTS)
    if not runs.is_run_id(run_id) or not path.is_file() or recorded is None:
        draft.notes.append(
            f"raw measurements of run {source.record.run_id} are not on this machine: "
            f"a reproduction of {spec.name} compares against its median alone"
        )
        return []
    if sha256_file(path) != recorded:
        gaps.append(f"{path.relative_to(repo)} does not match the hash its result entry recorded")
        return []
    rows = runs.read_records(path).raise_if_problems()  # a bad line is named, never skipped
    samples = [
        float(r["metrics"][spec.metric])
        for r in rows
        if r["arm"] == spec.arm and r["point"] == spec.point and spec.metric in r["metrics"]
    ]
    if samples and round(statistics.median(samples), 6) != round(value, 6):
        gaps.append(f"the median of its {len(samples)} samples is not the {value} its result entry says")
    return samples


def _bar_tolerance(record: ExperimentRecord, spec: NumberSpec) -> float:
    for bar in record.bars:
        if bar.metric == spec.metric and str(bar.point) == str(spec.point):
            return bar.min_effect
    return DEFAULT_TOLERANCE


# --------------------------------------------------------------------------- configuration and pins


def _configuration(arms: list[ArmRecord], draft: Draft) -> ArmRecord | None:
    """The one server configuration every number was measured with (argv, env, image)."""
    distinct = {arm.fingerprint: arm for arm in arms}
    if len(distinct) > 1:
        draft.gaps.append(
            f"the numbers were measured with {len(distinct)} different configurations "
            "(argv, env or image differ): a release is one configuration"
        )
    return arms[0] if arms else None


def _image(spec: ReleaseSpec, arm: ArmRecord | None, draft: Draft) -> ImagePin | None:
    ref = spec.image or (arm.image if arm else None)
    if ref is None:
        draft.gaps.append("no image: the numbers were served by a local process, which no digest pins")
        return None
    image = draft.take(pins.pin_image(ref))
    ran = arm.image if arm else None
    if ran and images.digest_of(ran) is None:
        draft.gaps.append(
            f"the numbers were measured with image tag {ran}, not a digest: which image ran cannot be shown"
        )
    elif ran and not _same_image(ran, image):
        draft.gaps.append(
            f"the numbers were measured with {ran}, the release names {pins.run_reference(image)}"
        )
    return image


def _same_image(ran: str, image: ImagePin) -> bool:
    if image.digest:
        return images.digest_of(ran) == image.digest
    try:
        return images.image_info(ran).image_id == image.image_id
    except StateError:
        return False


def _model(
    spec: ReleaseSpec, repo: Path, image: ImagePin | None, arm: ArmRecord | None, draft: Draft
) -> ModelPin | None:
    if spec.model is None:
        draft.gaps.append("no model pinned")
        return None
    model = draft.take(pins.pin_model(spec.model, repo))
    if image is not None:
        labels = images.image_info(pins.run_reference(image)).labels
        draft.gaps += pins.check_model_in_image(model, labels)
    if arm and arm.model_sha256 and arm.model_sha256 != model.revision:
        now = f"{model.revision[:19]}…" if model.revision else "unreadable"  # pin_model saw a directory
        draft.gaps.append(
            f"the numbers were measured with model {arm.model_sha256[:19]}…, {spec.model.path} is {now} now"
        )
    return model


def _script_paths(spec: ReleaseSpec, sources: dict[str, Source]) -> list[str]:
    named = list(spec.scripts)
    for source in sources.values():
        named += source.entry["payload"].get("scripts", [])
    return named


def _scripts_match_results(script_pins: dict[str, str], sources: dict[str, Source], draft: Draft) -> None:
    """A script the result pinned must still be the one that produced its number."""
    for source in sources.values():
        for path, blob in ((source.entry.get("git") or {}).get("scripts") or {}).items():
            if script_pins.get(path) not in (None, blob):
                draft.gaps.append(
                    f"script {path} changed since result {source.entry['id'][:12]} used it "
                    f"(blob {blob[:12]} then, {script_pins[path][:12]} now)"
                )


def _box(sources: dict[str, Source], containerized: bool, draft: Draft) -> dict[str, str]:
    hosts = [s.record.host for s in sources.values()]
    if not hosts:
        return {}
    if any(pins.check_box(hosts[0], other) for other in hosts[1:]):
        draft.gaps.append("the numbers come from different boxes")
    box = {**pins.NO_GPU, **hosts[0]}
    if containerized:
        box.update(images.container_runtime())
    return box


def _supersedes(ledger: Ledger, spec: ReleaseSpec) -> str | None:
    if spec.supersedes is None:
        return None
    return catalog.find(ledger, f"{spec.lane}@{spec.supersedes}").id


# ------------------------------------------------------------------------------------- rendering


def flag_strings(argv: list[str]) -> list[str]:
    """``["--max-num-seqs 1", "--enforce-eager", ...]``: the flags as people read them."""
    return [" ".join((flag.name, *flag.values)) for flag in parse_flags(list(argv))]


def docker_command(arm: ArmRecord, image: ImagePin | None) -> str:
    """The exact `docker run` of the release: image by digest, the environment, the argv."""
    if image is None:
        return shlex.join(arm.argv)
    env = [part for name, value in sorted(arm.env.items()) for part in ("-e", f"{name}={value}")]
    return shlex.join(
        [
            "docker",
            "run",
            "-d",
            "--network",
            "host",
            "--ipc",
            "host",
            *env,
            pins.run_reference(image),
            *arm.argv,
        ]
    )
