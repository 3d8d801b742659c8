"""The GPU lane's scripts (docs/gpu-lane.md): the random MoE's shape, the tree check that lets a box
without git state its commit, and the ingest that only lets the ledger grow."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from helpers.scripts import load_script

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts"


@pytest.fixture(scope="module")
def moe():
    yield load_script("scripts/make_random_moe.py")
    sys.modules.pop("make_tiny_model", None)


def test_the_random_moe_has_qwen3_30b_a3b_layers(moe, tmp_path):
    args = moe.parse_args([str(tmp_path / "m")])
    assert (args.hidden, args.heads, args.kv_heads, args.head_dim) == (2048, 32, 4, 128)
    assert (args.experts, args.experts_per_token, args.moe_intermediate) == (128, 8, 768)
    assert args.layers == 4 and args.device == "cuda"
    margs = moe.model_args(args)
    # Everything the bytes depend on is in the manifest's arguments, and which script made them.
    assert margs["generator"] == "scripts/make_random_moe.py"
    assert {"layers", "seed", "vocab", "experts", "hidden", "max_position"} <= set(margs)
    assert moe.model_args(moe.parse_args([str(tmp_path / "m"), "--layers", "2"]))["layers"] == 2


@pytest.mark.parametrize("bad", [["--layers", "0"], ["--max-position", "8"]])
def test_impossible_sizes_are_a_usage_error(moe, tmp_path, bad):
    with pytest.raises(SystemExit) as caught:
        moe.parse_args([str(tmp_path / "m"), *bad])
    assert caught.value.code == 2


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def shipped(tmp_path: Path) -> Path:
    """A committed repository, its manifest written as prepare.sh writes it, then .git removed (the
    box has none)."""
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "a.py").write_text("print('a')\n")
    (repo / "README.md").write_text("hello\n")
    (repo / "link").symlink_to("README.md")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    (repo / ".whl").mkdir()
    (repo / ".whl" / "tree.manifest").write_text(
        f"commit {git(repo, 'rev-parse', 'HEAD')}" + git(repo, "ls-files", "-s")
    )
    shutil.rmtree(repo / ".git")
    return repo


def verify(repo: Path) -> subprocess.CompletedProcess:
    script = SCRIPTS / "gpu_lane" / "verify_tree.py"
    return subprocess.run(
        [sys.executable, str(script), ".whl/tree.manifest"], cwd=repo, capture_output=True, text=True
    )


def test_the_tree_check_states_the_commit_of_an_unchanged_copy(shipped):
    done = verify(shipped)
    manifest = (shipped / ".whl" / "tree.manifest").read_text()
    assert done.returncode == 0 and done.stdout.strip() == manifest.split()[1]


@pytest.mark.parametrize("change", ["edit", "delete", "relink"])
def test_the_tree_check_refuses_a_copy_that_differs(shipped, change):
    if change == "edit":
        (shipped / "src" / "a.py").write_text("print('b')\n")
    elif change == "delete":
        (shipped / "README.md").unlink()
    else:
        (shipped / "link").unlink()
        (shipped / "link").symlink_to("src/a.py")
    done = verify(shipped)
    assert done.returncode == 3 and "differ from" in done.stderr and done.stdout == ""


def ingest_layout(tmp_path: Path, here: dict[str, str], there: dict[str, str]) -> tuple[Path, Path]:
    """A repository with ingest.sh and a ledger as ``here``; a returned ledger.tgz as ``there``."""
    repo = tmp_path / "repo"
    (repo / "scripts" / "gpu_lane").mkdir(parents=True)
    shutil.copy(SCRIPTS / "gpu_lane" / "ingest.sh", repo / "scripts" / "gpu_lane" / "ingest.sh")
    for root, files in ((repo, here), (tmp_path / "box", there)):
        (root / "ledger").mkdir(parents=True)
        for name, text in files.items():
            (root / "ledger" / name).write_text(text)
    back = tmp_path / "back"
    back.mkdir()
    with tarfile.open(back / "ledger.tgz", "w:gz") as tar:
        tar.add(tmp_path / "box" / "ledger", arcname="ledger")
    return repo, back


def ingest(repo: Path, back: Path) -> subprocess.CompletedProcess:
    script = repo / "scripts" / "gpu_lane" / "ingest.sh"
    return subprocess.run(["bash", str(script), str(back), "evidence/x"], capture_output=True, text=True)


def test_ingest_takes_what_the_box_appended(tmp_path):
    here = {"a.jsonl": "1\n", "allowed_signers": "a key\n"}
    there = {"a.jsonl": "1\n2\n", "allowed_signers": "a key\nbox key\n", "box.jsonl": "k\n"}
    repo, back = ingest_layout(tmp_path, here, there)
    done = ingest(repo, back)
    assert done.returncode == 0, done.stderr
    assert {p.name: p.read_text() for p in (repo / "ledger").iterdir()} == there


def test_ingest_refuses_a_ledger_the_box_rewrote_and_copies_nothing(tmp_path):
    here = {"a.jsonl": "1\n2\n", "allowed_signers": "a key\n"}
    there = {"a.jsonl": "1\nX\n3\n", "allowed_signers": "a key\n", "box.jsonl": "k\n"}
    repo, back = ingest_layout(tmp_path, here, there)
    done = ingest(repo, back)
    assert done.returncode == 3 and "not a prefix" in done.stderr
    assert sorted(p.name for p in (repo / "ledger").iterdir()) == ["a.jsonl", "allowed_signers"]
    assert (repo / "ledger" / "a.jsonl").read_text() == "1\n2\n"
