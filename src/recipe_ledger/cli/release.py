"""`ledger release publish|list|show|diff`: a thin layer over recipe_ledger.releases.

Exit codes: 0 done (a reproduction that does not confirm is still a recorded result: its outcome is
printed and exit is 1); 2 bad input; 3 a pin cannot be met here, the machine is not ready, or a file
that feeds the measurement differs from the commit (without --allow-dirty); 5 a re-run failed (a
failure entry was written); 130 interrupted.
"""

from __future__ import annotations

from pathlib import Path

import click

from recipe_ledger.cli.options import allow_dirty_option, json_option, root_option, writer_option
from recipe_ledger.cli.output import (
    Cell,
    Column,
    cell_len,
    echo_line,
    free,
    print_json,
    print_json_line,
    print_table,
    text,
    width,
)
from recipe_ledger.ledger.models import ReleasePayload
from recipe_ledger.ledger.store import Ledger
from recipe_ledger.ledger.views import allowed_dirty_text
from recipe_ledger.releases import catalog
from recipe_ledger.releases import diff as diffing
from recipe_ledger.releases import publish as publishing


def _repo(root: Path) -> Path:
    return root.resolve()


@click.group("release")
def release() -> None:
    """Published lanes: publish a release with full pins, list, show and diff them."""


@release.command("publish")
@click.argument("lane")
@click.argument("version")
@click.option(
    "--from",
    "spec_path",
    required=True,
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="The release spec (recipes/releases/<lane>/<version>.yaml).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Show the pins and every reason against verifying, and write nothing "
    "(a published release can only be retracted).",
)
@allow_dirty_option("Publish")
@root_option
@writer_option
def publish_cmd(
    lane: str,
    version: str,
    spec_path: Path,
    dry_run: bool,
    allow_dirty: bool,
    root: Path,
    writer: str,
) -> None:
    """Publish LANE VERSION from a spec: pin image digest, model revision, argv/env, scripts, box, numbers."""
    repo = _repo(root)
    if dry_run:
        _print_preview(publishing.preview(Ledger.open(repo), repo, spec_path, lane, version), lane, version)
        return
    entry = publishing.publish(
        Ledger.open(repo),
        repo,
        spec_path,
        lane,
        version,
        writer=writer,
        allow_dirty=allow_dirty,
    )
    payload = entry["payload"]
    state = "verified" if payload["verified"] else "UNVERIFIED"
    echo_line(
        f"release {payload['lane']}@{payload['version']} published as {entry['id'][:12]}: ", text(state)
    )
    for reason in payload.get("unverified", []):
        echo_line(f"  unverified: {reason}")
    for note in payload.get("notes", []):
        echo_line(f"  note: {note}")
    summary = allowed_dirty_text(entry.get("git"))
    if summary:
        echo_line(f"  {summary}")
    echo_line(f"next: ledger reproduce {payload['lane']}@{payload['version']}")


def _print_preview(preview: publishing.Preview, lane: str, version: str) -> None:
    p = preview.payload
    state = "verified" if p.verified else "UNVERIFIED"
    echo_line(
        f"dry run: release {p.lane}@{p.version} would be published ", text(state), "; nothing was written"
    )
    for reason in p.unverified:
        echo_line(f"  unverified: {reason}")
    for note in p.notes:
        echo_line(f"  note: {note}")
    _print_pins(p)
    if preview.tree_refusal:
        echo_line(f"  refused without --allow-dirty: {preview.tree_refusal}")
    echo_line(f"next: ledger release publish {lane} {version} --from ... (without --dry-run)")


@release.command("list")
@json_option("One JSON object per release: lane, version, status, pins.")
@root_option
def list_cmd(as_json: bool, root: Path) -> None:
    """Every release, oldest first, with its verification and ledger status."""
    found = catalog.releases(Ledger.open(_repo(root)))
    if as_json:
        for item in found:
            print_json_line(catalog.summary(item))
        return
    rows = [
        [
            r.ref,
            r.id[:12],
            r.payload.lane_title or "",
            r.verification,
            r.status,
            _image_cell(r),
            len(r.payload.numbers) or len(r.payload.metrics),
        ]
        for r in found
    ]
    headers: list[str | Column] = [Column("release", key=True), Column("id", key=True), free("lane")]
    print_table([*headers, "verification", "ledger", "image", "numbers"], rows)
    if not found:
        click.echo("(no releases)")


def _image_cell(release: catalog.Release) -> str:
    """The whole image reference: its digest is what tells two releases apart."""
    image = release.payload.image
    return diffing.image_text(image.model_dump() if image else None)


@release.command("show")
@click.argument("ref", metavar="LANE@VERSION")
@json_option("The release summary and the full payload as JSON.")
@root_option
def show_cmd(ref: str, as_json: bool, root: Path) -> None:
    """One release with every pin, its numbers and why it is (not) verified."""
    found = catalog.find(Ledger.open(_repo(root)), ref)
    if as_json:
        print_json(
            {**catalog.summary(found), "payload": found.payload.model_dump(mode="json", exclude_none=True)}
        )
        return
    _print_release(found)


def _print_release(found: catalog.Release) -> None:
    from recipe_ledger import metrics

    p = found.payload
    echo_line(
        f"{p.lane_title or p.lane} {p.version} ({found.ref}) — {found.id[:12]}, ",
        text(found.verification),
        ", ledger status ",
        text(found.status),
        ", imported" if found.imported else "",
    )
    for change in p.changes:
        echo_line(f"  change: {change}")
    for reason in p.unverified:
        echo_line(f"  unverified: {reason}")
    for note in p.notes:
        echo_line(f"  note: {note}")
    _print_pins(p)
    for number in p.numbers:
        link = f" (result {number.result[:12]}, {len(number.samples)} samples)" if number.result else ""
        echo_line(
            f"  number: {number.name} = {number.value:.6g}{' ' + number.unit if number.unit else ''}{link}"
        )
    for name, value in p.metrics.items():
        if name not in {n.name for n in p.numbers}:
            echo_line(f"  number: {name} = {value:.6g} {metrics.unit(name)}".rstrip() + " (no result entry)")


def _print_pins(p: ReleasePayload) -> None:
    """Image, model, scripts, box, k-schedule and command: what a release pins."""
    pins = catalog.pins_summary(catalog.Release({}, p, "draft"))
    echo_line(f"  image: {diffing.image_text(pins['image'])}")
    for line in local_registry_lines(p.image.ref if p.image else ""):
        echo_line(f"  {line}")
    echo_line(f"  model: {diffing._model(pins['model'])}")
    for path, blob in pins["scripts"].items():
        echo_line(f"  script: {path} {blob}")
    if p.box:
        echo_line("  box: " + ", ".join(f"{k}={v}" for k, v in p.box.items()))
    echo_line(f"  k-schedule: {diffing.k_schedule(p)}")
    if p.command:
        echo_line(f"  command: {p.command}")


# Images this repository builds, by repository (the IMAGE_REPO default of each script; a unit test
# holds them equal): how a box that cannot pull a local registry's image makes its own.
IMAGE_BUILDERS = {
    "recipe-ledger/vllm-cpu": ("scripts/build_cpu_image.sh", 'docs/releases.md, "The verified CPU lane"'),
}
_LOOPBACK_HOSTS = ("localhost", "127.", "[::1]", "::1")


def local_registry(image_ref: str) -> str | None:
    """The registry of ``image_ref`` (``host[:port]``) when it is this box's own loopback address,
    which no other box can pull from; None for a hub image, another registry or no registry."""
    first, slash, _ = image_ref.partition("/")
    if not slash or not any(mark in first for mark in (".", ":", "localhost")):
        return None  # "org/name": a hub repository, not a registry host
    host = first.rsplit(":", 1)[0] if first.count(":") == 1 else first
    return first if host == "localhost" or host.startswith(_LOOPBACK_HOSTS) else None


def local_registry_lines(image_ref: str) -> list[str]:
    """What `ledger release show` says of an image pinned to a loopback registry: that only the
    box that published it can pull it, and how to rebuild it from this repository."""
    registry = local_registry(image_ref)
    if registry is None:
        return []
    repository = image_ref.split("/", 1)[1].split("@", 1)[0].rsplit(":", 1)[0]
    builder = IMAGE_BUILDERS.get(repository)
    how = (
        f"{builder[0]} builds it from this repository ({builder[1]})"
        if builder
        else "build it from its Dockerfile in this repository (docs/releases.md)"
    )
    return [
        f"registry: {registry} is local to the box that published this release; no other box can pull it",
        f"rebuild: {how}; a rebuild has another digest (or bring the image over: docker save / docker load)",
    ]


@release.command("diff")
@click.argument("a", metavar="LANE@A")
@click.argument("b", metavar="LANE@B")
@click.option("--changes", "only_changes", is_flag=True, help="Only the rows that differ.")
@json_option("One JSON object per row.")
@root_option
def diff_cmd(a: str, b: str, only_changes: bool, as_json: bool, root: Path) -> None:
    """Two releases side by side: flags, pins, k-schedule and numbers."""
    ledger = Ledger.open(_repo(root))
    ra, rb = catalog.find(ledger, a), catalog.find(ledger, b)
    rows = diffing.diff(ra, rb, only_changes=only_changes)
    if as_json:
        for row in rows:
            print_json_line(
                {
                    "section": row.section,
                    "name": row.name,
                    "a": row.a,
                    "b": row.b,
                    "same": row.same,
                    "change": row.change,
                }
            )
        return
    _print_diff(ra.ref, rb.ref, rows)


def _print_diff(a: str, b: str, rows: list[diffing.Row]) -> None:
    """Section by section, one line per row: ``name  A`` when both sides agree, ``name  A -> B
    change`` when they differ and it fits, else the two values on lines of their own (whole:
    references and digests are what differ, and they are long)."""
    echo_line(Cell("A ", "bold"), a, Cell("   B ", "bold"), b)
    name_width = max((len(r.name) for r in rows), default=0)
    section = None
    for row in rows:
        if row.section != section:
            section = row.section
            echo_line(Cell(section, "bold"))
        name = f"  {row.name:<{name_width}}  "
        if row.same:
            echo_line(name, text(row.a, "dim"))
            continue
        change = [Cell("  "), text(row.change, _change_style(row))] if row.change else []
        line: list[str | Cell] = [name, row.a, " -> ", text(row.b, "bold"), *change]
        if cell_len("".join(p if isinstance(p, str) else p.plain for p in line)) <= width():
            echo_line(*line)
        else:
            echo_line(name.rstrip(), Cell("  differs", "yellow"), *change)
            echo_line(Cell("    A ", "bold"), row.a)
            echo_line(Cell("    B ", "bold"), row.b)


def _change_style(row: diffing.Row) -> str:
    """Green when B is better than A by its metric's direction, red when worse, else plain."""
    from recipe_ledger import metrics

    better = metrics.direction(row.name) if row.section == "numbers" else None
    if not row.change or better is None:
        return ""
    up = row.change.startswith("+")
    return "green" if up == (better == "higher") else "red"
