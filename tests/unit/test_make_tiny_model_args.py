"""scripts/make_tiny_model.py: argument parsing and the idempotency manifest, without torch."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers.scripts import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "make_tiny_model.py"


@pytest.fixture(scope="module")
def mtm():
    return load_script("scripts/make_tiny_model.py")


def test_module_imports_without_torch(mtm):
    assert "torch" not in vars(mtm)
    assert "transformers" not in vars(mtm)


def test_defaults(mtm, tmp_path):
    args = mtm.parse_args([str(tmp_path / "m")])
    assert mtm.model_args(args) == {
        "hidden": 512,
        "layers": 4,
        "heads": 8,
        "vocab": 1024,
        "intermediate": 1024,
        "max_position": 2048,
        "seed": 0,
    }


def test_overrides_and_derived_intermediate(mtm, tmp_path):
    args = mtm.parse_args(
        [str(tmp_path), "--hidden", "128", "--layers", "2", "--heads", "4", "--vocab", "512", "--seed", "7"]
    )
    assert (args.hidden, args.layers, args.heads, args.vocab, args.seed) == (128, 2, 4, 512, 7)
    assert args.intermediate == 256


@pytest.mark.parametrize(
    "bad",
    [
        ["--hidden", "100", "--heads", "8"],  # not a multiple
        ["--vocab", "200"],  # below the byte alphabet
        ["--layers", "0"],
    ],
)
def test_rejects_bad_arguments(mtm, tmp_path, bad):
    with pytest.raises(SystemExit):
        mtm.parse_args([str(tmp_path)] + bad)


def _fake_model_dir(mtm, path: Path, margs: dict) -> None:
    path.mkdir()
    (path / "config.json").write_text("{}")
    (path / "model.safetensors").write_bytes(b"weights")
    mtm.write_manifest(path, margs)


def test_manifest_round_trip_and_staleness(mtm, tmp_path):
    margs = mtm.model_args(mtm.parse_args([str(tmp_path)]))
    d = tmp_path / "m"
    _fake_model_dir(mtm, d, margs)

    manifest = json.loads((d / mtm.MANIFEST).read_text())
    assert manifest["args"] == margs
    assert set(manifest["files"]) == {"config.json", "model.safetensors"}
    assert mtm.is_up_to_date(d, margs)

    assert not mtm.is_up_to_date(d, {**margs, "seed": 1})  # other arguments
    (d / "model.safetensors").write_bytes(b"tampered")
    assert not mtm.is_up_to_date(d, margs)  # changed file
    (d / "model.safetensors").unlink()
    assert not mtm.is_up_to_date(d, margs)  # missing file
    assert not mtm.is_up_to_date(tmp_path / "absent", margs)  # no directory


def test_manifest_is_deterministic(mtm, tmp_path):
    margs = mtm.model_args(mtm.parse_args([str(tmp_path)]))
    _fake_model_dir(mtm, tmp_path / "a", margs)
    _fake_model_dir(mtm, tmp_path / "b", margs)
    assert (tmp_path / "a" / mtm.MANIFEST).read_bytes() == (tmp_path / "b" / mtm.MANIFEST).read_bytes()


def test_up_to_date_run_does_not_import_torch(mtm, tmp_path, capsys, monkeypatch):
    d = tmp_path / "m"
    margs = mtm.model_args(mtm.parse_args([str(d)]))
    _fake_model_dir(mtm, d, margs)
    monkeypatch.setitem(sys.modules, "torch", None)  # any import of torch would now fail
    assert mtm.main([str(d)]) == 0
    assert "up to date" in capsys.readouterr().out


def test_refuses_foreign_non_empty_directory(mtm, tmp_path, monkeypatch):
    d = tmp_path / "m"
    d.mkdir()
    (d / "precious.txt").write_text("keep me")
    monkeypatch.setitem(sys.modules, "torch", None)
    assert mtm.main([str(d)]) == 2
    assert (d / "precious.txt").read_text() == "keep me"


def test_corpus_is_deterministic(mtm):
    assert mtm.corpus(0, lines=50) == mtm.corpus(0, lines=50)
    assert mtm.corpus(0, lines=50) != mtm.corpus(1, lines=50)
