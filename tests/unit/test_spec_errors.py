"""Bad spec files give one error naming the file, the line and the field."""

import textwrap

import pytest

from recipe_ledger.errors import SpecError
from recipe_ledger.recipes.models import Recipe
from recipe_ledger.spec.validate import validate_doc
from recipe_ledger.spec.yamlfile import load_yaml, parse_yaml_text

GOOD = textwrap.dedent(
    """\
    meta:
      title: "Tiny"
      slug: "tiny"
      provider: "Us"
      description: "a tiny model"
    model:
      model_id: "us/tiny"
    variants:
      default:
        precision: bf16
        vram_minimum_gb: 1
    """
)


def write(tmp_path, text, name="x.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_good_recipe_validates(tmp_path):
    recipe = validate_doc(load_yaml(write(tmp_path, GOOD)), Recipe)
    assert recipe.variants["default"].vram_minimum_gb == 1


def test_wrong_type_names_file_line_and_field(tmp_path):
    path = write(tmp_path, GOOD.replace("vram_minimum_gb: 1", 'vram_minimum_gb: "lots"'))
    with pytest.raises(SpecError) as info:
        validate_doc(load_yaml(path), Recipe)
    assert str(info.value) == f'{path}:11: variants.default.vram_minimum_gb: expected a number, got "lots"'
    assert info.value.exit_code == 2


def test_missing_field_points_at_its_parent(tmp_path):
    path = write(tmp_path, GOOD.replace('  model_id: "us/tiny"\n', "  architecture: dense\n"))
    with pytest.raises(SpecError, match=r"x\.yaml:6: model\.model_id: required field is missing"):
        validate_doc(load_yaml(path), Recipe)


def test_malformed_yaml_names_the_line(tmp_path):
    path = write(tmp_path, GOOD.replace('  slug: "tiny"', "  slug: [unclosed"))
    with pytest.raises(SpecError, match=r"x\.yaml:\d+: malformed YAML"):
        load_yaml(path)


def test_missing_file(tmp_path):
    with pytest.raises(SpecError, match="no such file"):
        load_yaml(tmp_path / "nope.yaml")


def test_a_list_where_a_mapping_belongs(tmp_path):
    path = write(tmp_path, "- just\n- a list\n")
    with pytest.raises(SpecError, match="expected a mapping at the top level"):
        validate_doc(load_yaml(path), Recipe)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("on", "on"),  # YAML 1.1 would say True; js-yaml 4 (YAML 1.2 core) says "on"
        ("yes", "yes"),
        ("0755", 755),  # js-yaml 4: a decimal int, not an octal
        ("0o17", 15),
        ("true", True),
        ("1e3", 1000.0),
        ("~", None),
    ],
)
def test_scalars_resolve_like_js_yaml(text, expected):
    value = parse_yaml_text(f"v: {text}\n", "t.yaml")["v"]
    assert value == expected and type(value) is type(expected)


def test_unknown_upstream_fields_are_kept(tmp_path):
    path = write(tmp_path, GOOD + "future_field:\n  anything: 1\n")
    recipe = validate_doc(load_yaml(path), Recipe)
    assert recipe.model_extra["future_field"] == {"anything": 1}
