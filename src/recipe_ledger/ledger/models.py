"""Entry kinds and their versioned payloads (pydantic v2, strict, extra="forbid").

Every payload carries ``schema_version``. A stored entry is never rewritten, so an old payload is
read by upgrading a *copy* step by step (``register_upgrade``), asv-style: version 1 -> 2 -> ...
-> the current model. A payload newer than this tool knows is refused with a clear message rather
than half-read; the stored line is untouched either way.

To extend a kind (as release v2 did for full release pins): add the fields to a new model with
``schema_version: Literal[2]``, register an upgrade from 1, and point
``MODELS`` at the new model. Entries written under version 1 keep verifying byte for byte.

The envelope around a payload (id, seq, prev, writer, ts, git, refs) is described by ``Envelope``;
the hot paths (verify, log) read entries as plain dicts and never build these models.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from recipe_ledger.errors import InputError, StateError
from recipe_ledger.ledger.kinds import FORMAT_VERSION as FORMAT_VERSION  # re-exported for older imports
from recipe_ledger.ledger.kinds import KINDS

EntryId = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
ContentHash = Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]
Scalar = str | int | float | bool
Relation = Literal["see", "retracts", "evidence", "supersedes", "reproduces"]


class Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class Origin(Strict):
    """Where an entry's content comes from: measured on this box, imported from a document, or stated."""

    how: Literal["measured", "imported", "stated"] = "stated"
    source: str | None = None  # the document or run it was taken from
    item: str | None = None  # a stable key inside that source: re-importing skips what is there
    as_of: str | None = None  # the date the source gives for it (ISO), when it is not the entry's ts


class Payload(Strict):
    kind: ClassVar[str] = ""
    schema_version: int
    origin: Origin = Field(default_factory=Origin)
    scripts: list[str] = Field(
        default_factory=list
    )  # paths under scripts/; the envelope pins their git blob hashes
    artifacts: dict[str, ContentHash] = Field(
        default_factory=dict
    )  # raw outputs kept outside the ledger, by content hash


class ArmRecord(Strict):
    """One arm of an experiment as it was launched."""

    source: str  # what it was resolved from (recipe, hardware, strategy, variant, features)
    fingerprint: ContentHash  # argv + env (redacted) + image: same fingerprint, same configuration
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    image: str | None = None
    model_sha256: ContentHash | None = None  # content hash of a local model directory
    engine: str | None = None  # "vllm" or "sglang"; absent in entries recorded before engines were an axis
    points: list[int] | None = None  # the arm's own sweep points (arm ``points:``); absent: every point


class BarVerdict(Strict):
    """One bar decided for one candidate against the control (see recipe_ledger.verdict)."""

    candidate: str
    metric: str
    point: int | str
    direction: Literal["higher", "lower"]
    min_effect: float
    # v4: a speed win whose candidate's quality bars are not all shown non-inferior is published as
    # "faster, quality not shown" or "faster, worse answers" (issue 25), never as a win.
    outcome: Literal[
        "win",
        "regression",
        "no-change",
        "inconclusive",
        "not-comparable",
        "faster, quality not shown",
        "faster, worse answers",
    ]
    effect: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    mde: float | None = None
    control: float | None = None
    value: float | None = None
    reason: str = ""
    # v3, the sequential design: the bar's own launches (both arms) and looks, how it stopped, in words.
    launches: int | None = None
    looks: int | None = None
    stopped: Literal["decided", "cap", "refused"] | None = None
    decision: str | None = None  # "decided after 6 launches: win"
    # v4: the candidate's quality bars together: kept (all non-inferior), not shown, or worse.
    quality: Literal["kept", "not shown", "worse"] | None = None


class QualityVerdict(Strict):
    """One quality bar decided for one candidate (v4, ``recipe_ledger.quality``): non-inferiority of
    its share of items kept against the control's, paired by item."""

    candidate: str
    metric: str
    instrument: str
    point: int | str
    margin: float
    outcome: Literal["non-inferior", "worse", "not-shown", "not-comparable"]
    method: str
    alpha: float  # one-sided, each way
    items: int
    control_launches: int
    candidate_launches: int
    control: float | None = None  # the control's mean item share (its A/A against the reference)
    value: float | None = None  # the candidate's
    difference: float | None = None  # candidate - control, share of items
    ci_low: float | None = None
    ci_high: float | None = None
    reason: str = ""


class DesignRecord(Strict):
    """How a run spent its launches (v3): the design, its error rate and cap, and why it stopped."""

    kind: Literal["sequential", "fixed"]
    method: str
    alpha: float | None = None  # sequential: false calls over the whole sequence
    cap: int | None = None  # sequential: launches per arm at most
    cap_source: str = ""  # where the cap came from, for people
    pairs_per_look: int | None = None
    looks: int | None = None
    launches: int  # the measurement's launches, both arms (an inline calibration's apart)
    stopped: Literal["decided", "cap", "refused", "planned"]  # fixed: the planned repeats ran
    summary: str  # "decided after 6 launches: win"
    launch_seconds: float | None = None  # median wall seconds of one launch (boot to teardown)
    resumed: int = 0  # times the run was resumed (`ledger run --resume`)


class ExperimentRecord(Strict):
    """What `ledger run` measured: enough to re-run it and to read the verdict without MLflow."""

    name: str
    spec: str  # path of the experiment file, relative to the repository
    spec_sha256: ContentHash
    hypothesis: str = ""
    box: str
    run_id: str
    points: list[int]
    repeats: int
    schedule: list[str] = Field(default_factory=list)  # "arm#repeat" in launch order (ABBA)
    instruments: dict[str, str] = Field(default_factory=dict)  # name -> version
    arms: dict[str, ArmRecord]
    bars: list[BarVerdict] = Field(default_factory=list)
    calibration: EntryId | None = None
    calibration_inline: bool = False
    method: str = ""
    host: dict[str, str] = Field(default_factory=dict)
    duration_s: float | None = None
    # Cross-engine experiments only: the one client that measured both arms of each bar
    # ("metric@point" -> "vllm bench serve 0.32.0 (instrument bench)").
    clients: dict[str, str] | None = None
    design: DesignRecord | None = None  # v3
    quality: list[QualityVerdict] | None = None  # v4: the quality bars, beside the speed bars


class ResultPayload(Payload):
    kind: ClassVar[str] = "result"
    schema_version: Literal[4] = 4
    subject: str = Field(min_length=1)  # what was measured: a lane, an experiment, an arm
    text: str = ""
    metrics: dict[str, float] = Field(default_factory=dict)
    conditions: dict[str, Scalar] = Field(default_factory=dict)
    verdict: str | None = None
    experiment: ExperimentRecord | None = None  # v2: set by `ledger run`
    mlflow: dict[str, str] = Field(
        default_factory=dict
    )  # v2: tracking URI and run ids, when the run was indexed at once


class FailurePayload(Payload):
    kind: ClassVar[str] = "failure"
    schema_version: Literal[1] = 1
    subject: str = Field(min_length=1)
    cause_class: Literal["no-boot", "oom", "hang", "crash", "slow-boot", "bad-output", "config", "other"]
    cause: str = Field(min_length=1)
    log_tail: str | None = Field(None, max_length=4000)  # the last lines; the full log is an artifact
    minutes_lost: float | None = None
    conditions: dict[str, Scalar] = Field(default_factory=dict)
    fix: str | None = None


class PointNoise(Strict):
    """The noise of one sweep point, from A/A launches of the same configuration."""

    n: int = Field(ge=2)
    mean: float
    sigma: float = Field(ge=0)
    cv: float = Field(ge=0)  # sigma / mean
    sigma_log: float | None = Field(None, ge=0)  # standard deviation of ln(sample)
    max_spread: float = Field(ge=0)  # (max - min) / mean
    samples: list[float] = Field(default_factory=list)


class CalibrationPayload(Payload):
    kind: ClassVar[str] = "calibration"
    schema_version: Literal[2] = 2
    instrument: str = Field(min_length=1)
    metric: str = Field(min_length=1)
    unit: str | None = None
    sigma: float | None = None
    spread: float | None = None  # half-width of the observed band, in `unit`
    repeats: list[float] = Field(default_factory=list)
    text: str = ""
    conditions: dict[str, Scalar] = Field(default_factory=dict)
    fingerprint: str | None = None  # v2: what a run must match to reuse it (box, control, instrument, points)
    method: str | None = None  # v2: the verdict method the numbers are meant for
    points: dict[str, PointNoise] = Field(default_factory=dict)  # v2: per sweep point


class ImagePin(Strict):
    ref: str  # as given: a tag or a digest reference
    digest: str | None = None  # the repository (manifest) digest, sha256:...
    pinned: bool = False  # True only with a digest: a tag can move under you
    image_id: str | None = None  # v2: the daemon's image id (sha256 of the image config) when published
    repo_digests: list[str] | None = None  # v2: every repository@digest the daemon knew for the image

    @model_validator(mode="after")
    def _pinned_means_digest(self) -> ImagePin:
        if self.pinned != (self.digest is not None):
            raise ValueError("pinned must be true exactly when a digest is given")
        return self


# How a model revision was obtained; only "hf-snapshot" and "content-hash" pin the weights.
RevisionSource = Literal["hf-snapshot", "content-hash", "folder-name", "stated"]


class ModelPin(Strict):
    name: str | None = None
    path: str | None = None
    revision: str | None = (
        None  # hf:<commit> of a snapshot, sha256:<content hash> of a directory, or as stated
    )
    revision_source: RevisionSource | None = None  # v2
    container_path: str | None = None  # v2: where the server sees it (baked into the image, or mounted)


class ReleaseNumber(Strict):
    """One published number, linked to the ledger result entry that measured it."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@-]*$")
    value: float
    metric: str = Field(min_length=1)
    point: int | str | None = None
    arm: str | None = None
    unit: str | None = None
    result: EntryId | None = None  # the result entry it comes from
    samples: list[float] = Field(
        default_factory=list
    )  # one per launch, from the run's measurements (content hash checked)
    tolerance: float | None = Field(None, gt=0, lt=1)  # relative band a reproduction must stay inside
    verified: bool = False  # the result entry exists, was measured, is not retracted, and says this value


class ReleasePayload(Payload):
    """A release of a lane. v2 (``ledger release publish``) adds the full pins; v1 entries (the
    imported seed) read as v2 with ``verified: false`` and the reasons why."""

    kind: ClassVar[str] = "release"
    schema_version: Literal[2] = 2
    lane: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    lane_title: str | None = None
    version: str = Field(min_length=1)
    changes: list[str] = Field(default_factory=list)
    command: str | None = None
    flags: list[str] = Field(default_factory=list)
    image: ImagePin | None = None
    model: ModelPin | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    supersedes: EntryId | None = None
    spec_sha256: ContentHash | None = None  # the release spec file it was published from
    spec: str | None = None  # v2: that file's path, relative to the repository
    argv: list[str] = Field(default_factory=list)  # v2: the server argv as launched (secrets redacted)
    env: dict[str, str] = Field(default_factory=dict)  # v2: its environment (secrets redacted)
    script_pins: dict[str, str] = Field(
        default_factory=dict
    )  # v2: path -> git blob hash of every script behind the numbers
    box: dict[str, str] = Field(
        default_factory=dict
    )  # v2: the fingerprint of the box the numbers were measured on
    numbers: list[ReleaseNumber] = Field(default_factory=list)  # v2
    verified: bool = False  # v2: every pin complete and every number backed by a verified result
    unverified: list[str] = Field(
        default_factory=list
    )  # v2: why not, one reason each; empty exactly when verified
    # v2: what a reader should know that does not unverify (a tag resolved when published)
    notes: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _say_why_unverified(cls, data: Any) -> Any:
        # A release written without `ledger release publish` (the seed import, a hand-made entry)
        # checked nothing: it never passes silently, it says so and names what is missing.
        if isinstance(data, dict) and not data.get("verified") and not data.get("unverified"):
            why = ["not published with `ledger release publish`: nothing was checked"]
            return {**data, "unverified": why + release_gaps(data)}
        return data

    @model_validator(mode="after")
    def _verified_means_no_reasons(self) -> ReleasePayload:
        if self.verified == bool(self.unverified):
            raise ValueError("a release is verified exactly when it lists no reason against it")
        return self


class RetractionPayload(Payload):
    kind: ClassVar[str] = "retraction"
    schema_version: Literal[1] = 1
    target: EntryId
    reason: str = Field(min_length=1)
    evidence: list[EntryId] = Field(default_factory=list)


class ReproductionPayload(Payload):
    kind: ClassVar[str] = "reproduction"
    schema_version: Literal[2] = 2
    target: EntryId
    outcome: Literal["reproduced", "not-reproduced", "inconclusive"]
    text: str = ""
    metrics: dict[str, float] = Field(default_factory=dict)
    # v2: the rule that decided it (releases.reproduce.RULE); None for v1, which read the verdict's
    # outcome (no-change reproduced, a win or a regression did not).
    rule: str | None = None


class NotePayload(Payload):
    kind: ClassVar[str] = "note"
    schema_version: Literal[1] = 1
    text: str = Field(min_length=1)
    title: str | None = None
    numbers: dict[str, float | str] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)


class WitnessedHead(Strict):
    seq: int = Field(ge=0)
    id: EntryId


class WitnessPayload(Payload):
    """Other writers' chain heads as this writer saw them (cross-signing, ``ledger witness``).

    Once recorded here (and signed with this writer's own head), a witnessed chain cannot be cut
    back or rewritten below that head without ``ledger verify`` naming the witness that saw it.
    """

    kind: ClassVar[str] = "witness"
    schema_version: Literal[1] = 1
    heads: dict[str, WitnessedHead] = Field(min_length=1)


SshKey = Annotated[str, Field(pattern=r"^ssh-ed25519 [A-Za-z0-9+/]+={0,2}$")]


class KeyPayload(Payload):
    """The writer's signing key from this entry on: its first key, or a rotation (signing.py).

    ``first``: the chain's first key entry (``ledger init``, the first append, ``ledger key init
    --adopt``), signed by the key itself. ``rotate``: replaces ``previous_key`` and is signed by it,
    or by a maintainer key of ``ledger/root_of_trust`` when the old key is lost. ``signature`` is
    base64 Ed25519 over ``signing.key_message(writer, previous_key, public_key)``. ``ledger verify``
    replays these entries to know each writer's key; ``ledger/allowed_signers`` must agree.
    """

    kind: ClassVar[str] = "key"
    schema_version: Literal[1] = 1
    action: Literal["first", "rotate"]
    public_key: SshKey
    previous_key: SshKey | None = None
    signed_by: SshKey
    signature: str = Field(pattern=r"^[A-Za-z0-9+/]{86}==$")  # 64 bytes

    @model_validator(mode="after")
    def _consistent(self) -> KeyPayload:
        if self.action == "first" and (self.previous_key is not None or self.signed_by != self.public_key):
            raise ValueError("a first key has no previous_key and is signed by itself")
        if self.action == "rotate" and (self.previous_key is None or self.previous_key == self.public_key):
            raise ValueError("a rotation names the previous_key it replaces, a different key")
        return self


MODELS: dict[str, type[Payload]] = {
    m.kind: m
    for m in (
        ResultPayload,
        FailurePayload,
        CalibrationPayload,
        ReleasePayload,
        RetractionPayload,
        ReproductionPayload,
        NotePayload,
        WitnessPayload,
        KeyPayload,
    )
}
assert tuple(MODELS) == KINDS, "kinds.KINDS must name exactly the payload models"


class Ref(Strict):
    rel: Relation
    id: EntryId


class GitState(Strict):
    commit: str | None
    dirty: bool
    scripts: dict[str, str] = Field(default_factory=dict)
    # Only on entries written with --allow-dirty: what differed from the commit, and its hash.
    diff_sha256: str | None = None
    dirty_files: list[str] = Field(default_factory=list)


class Envelope(Strict):
    """A whole stored entry, for readers that want types (tests, exporters); not used by verify."""

    id: EntryId
    v: Literal[1]
    seq: int = Field(ge=0)
    prev: EntryId | None
    ts: str
    writer: str
    kind: str
    refs: list[Ref]
    git: GitState | None
    payload: dict[str, Any]
    box: str | None = None  # the writer's box fingerprint (fingerprint.py); absent on older entries


# A function turning a payload dict of one version into the next one.
Upgrade = Callable[[dict[str, Any]], dict[str, Any]]

# (kind, from_version) -> the upgrade step from that version.
_UPGRADES: dict[tuple[str, int], Upgrade] = {}


def register_upgrade(kind: str, from_version: int) -> Callable[[Upgrade], Upgrade]:
    """Decorator: register the step that turns a ``kind`` payload of ``from_version`` into the next."""

    def decorate(step: Upgrade) -> Upgrade:
        _UPGRADES[(kind, from_version)] = step
        return step

    return decorate


_VERSIONS: dict[type[Payload], int] = {}  # per model class: verify asks once per entry


def current_version(kind: str) -> int:
    model = MODELS[kind]
    version = _VERSIONS.get(model)
    if version is None:
        version = _VERSIONS[model] = model.model_fields["schema_version"].default
    return version


def load_payload(kind: str, data: dict[str, Any], *, where: str = "payload") -> Payload:
    """The typed, current-version payload of a stored entry (upgrading a copy if it is older)."""
    if kind not in MODELS:
        raise StateError(
            f"unknown entry kind {kind!r}; written by a newer recipe-ledger?",
            where=where,
            hint="pip install -U recipe-ledger",
        )
    data = upgrade(kind, dict(data), where=where)
    return validate_payload(kind, data, where=where)


def upgrade(kind: str, data: dict[str, Any], *, where: str = "payload") -> dict[str, Any]:
    version, target = data.get("schema_version"), current_version(kind)
    if version == target:
        return data  # the common case: nothing to upgrade
    if not isinstance(version, int):
        raise InputError("payload has no integer schema_version", where=where)
    if version > target:
        raise StateError(
            f"{kind} payload schema_version {version} is newer than this tool reads ({target}); "
            "nothing was changed",
            where=where,
            hint="pip install -U recipe-ledger",
        )
    while version < target:
        step = _UPGRADES.get((kind, version))
        if step is None:
            raise StateError(f"no upgrade from {kind} schema_version {version}", where=where)
        data = step(data)
        version = data["schema_version"]
    return data


def validate_payload(kind: str, data: dict[str, Any] | Payload, *, where: str = "payload") -> Payload:
    """Validate ``data`` as a current-version payload of ``kind`` (an InputError names the field)."""
    model = MODELS.get(kind)
    if model is None:
        raise InputError(f"unknown entry kind {kind!r}", where=where, hint=f"one of: {', '.join(KINDS)}")
    if isinstance(data, Payload):
        data = data.model_dump(mode="json")
    try:
        return model.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "payload"
        raise InputError(f"{kind} {field}: {first['msg']}", where=where) from None


@register_upgrade("reproduction", 1)
def _reproduction_1_to_2(data: dict[str, Any]) -> dict[str, Any]:
    """v2 added the decision `rule`; a v1 reproduction keeps its recorded words and has none."""
    return {**data, "schema_version": 2}


@register_upgrade("result", 1)
def _result_1_to_2(data: dict[str, Any]) -> dict[str, Any]:
    """v2 added the optional `experiment` record and `mlflow` ids; v1 results have neither."""
    return {**data, "schema_version": 2}


@register_upgrade("result", 2)
def _result_2_to_3(data: dict[str, Any]) -> dict[str, Any]:
    """v3 added the run's `design` and each bar's launches, looks and stop; a v2 result ran the
    fixed design and has none of them."""
    return {**data, "schema_version": 3}


@register_upgrade("result", 3)
def _result_3_to_4(data: dict[str, Any]) -> dict[str, Any]:
    """v4 added quality bars (`experiment.quality`, each bar's `quality`) and the two outcomes of a
    faster candidate whose answers were not kept; a v3 result had no quality bar."""
    return {**data, "schema_version": 4}


@register_upgrade("calibration", 1)
def _calibration_1_to_2(data: dict[str, Any]) -> dict[str, Any]:
    """v2 added per-point noise (`points`), the match `fingerprint` and the `method`; a v1 calibration
    keeps its single series in `repeats`/`sigma` and matches no run automatically."""
    return {**data, "schema_version": 2}


@register_upgrade("release", 1)
def _release_1_to_2(data: dict[str, Any]) -> dict[str, Any]:
    """v2 added full pins and verification. A v1 release was never checked by this tool: it reads
    as unverified, with the reasons its own fields give."""
    reasons = ["published before releases carried pins (release schema 1)"] + release_gaps(data)
    upgraded = {**data, "schema_version": 2, "verified": False, "unverified": reasons}
    model = data.get("model") or {}
    if model.get("revision"):
        # The seed's v14 names its revision only through the mounted folder's name.
        named = model["revision"] in (model.get("path") or "")
        upgraded["model"] = {**model, "revision_source": "folder-name" if named else "stated"}
    return upgraded


def release_gaps(data: dict[str, Any]) -> list[str]:
    """What a release payload (as a dict) lacks to be verified, judged from its own fields."""
    origin = data.get("origin") or {}
    reasons = []
    if origin.get("how") == "imported":
        reasons.append(
            f"imported from {origin.get('source') or 'a document'}: no number was measured by this tool"
        )
    image = data.get("image")
    if not image:
        reasons.append("no image pinned")
    elif not image.get("pinned"):
        reasons.append(f"image {image.get('ref')} is given by tag only (unpinned)")
    model = data.get("model") or {}
    if not model.get("revision"):
        reasons.append("no model revision")
    elif model.get("revision_source") not in ("hf-snapshot", "content-hash"):
        reasons.append(
            f"model revision {model['revision'][:12]} is stated (from a folder name), not a content hash"
        )
    if data.get("metrics") and not data.get("numbers"):
        reasons.append("numbers are not linked to result entries")
    return reasons


def implied_refs(payload: Payload) -> list[tuple[str, str]]:
    """Refs that a payload's own fields imply, so folding never has to parse payloads."""
    if isinstance(payload, RetractionPayload):
        return [("retracts", payload.target)] + [("evidence", e) for e in payload.evidence]
    if isinstance(payload, ReproductionPayload):
        return [("reproduces", payload.target)]
    if isinstance(payload, ReleasePayload):
        # A release's numbers point at the results that measured them (shown by `ledger show`).
        evidence = sorted({n.result for n in payload.numbers if n.result})
        return ([("supersedes", payload.supersedes)] if payload.supersedes else []) + [
            ("evidence", e) for e in evidence
        ]
    if isinstance(payload, WitnessPayload):
        return [("see", head.id) for head in payload.heads.values()]
    if isinstance(payload, ResultPayload) and payload.experiment and payload.experiment.calibration:
        return [("evidence", payload.experiment.calibration)]
    return []
