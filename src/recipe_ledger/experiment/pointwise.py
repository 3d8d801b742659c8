"""Values that depend on the sweep point: ``{point}`` in server arguments and instrument options.

InferenceX's benchmark matrix scales its workload with the concurrency (``num_prompts = 10 x conc``,
``num_warmups = 2 x conc``) and sets server flags from it (``--cuda-graph-max-bs $CONC``). An
experiment says the same with ``{point}``:

```yaml
instruments:
  - name: bench
    kind: vllm_bench_serve
    options: {num_prompts: "{point} * 10", num_warmups: "{point} * 2"}
control:
  argv: [vllm, serve, MODEL, --max-num-seqs, "{point}"]
```

An option whose value holds ``{point}`` becomes, at each point, the text with the point put in;
when that text is arithmetic (integers, ``+ - * / // %``, parentheses) it is evaluated, and a whole
result is an integer (``"{point} * 10"`` at 8 is ``80``, not ``"8 * 10"``). Server arguments and
environment values get the same value as text (``--max-num-batched-tokens "{point} * 512"``). An
arm whose command depends on the point is launched once per point, as a launch-flag sweep is
(``RunPlan.launches_per_point``).

Only ``{name}`` with a plain identifier inside is a placeholder, so JSON arguments
(``'{"method": "mtp"}'``) pass untouched, and ``{point}`` may sit inside them. A placeholder other
than ``{point}``, or an expression that does not evaluate at some point, is refused when the
experiment loads, naming the field and the point (``--plan`` exits 2). Pure: no I/O.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

KNOWN = ("point",)
# A plain identifier between braces; JSON's braces hold quoted keys, so they never match.
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ARITHMETIC = re.compile(r"[0-9+\-*/%().\s]+")
_OPERATORS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_MAX_RESULT = 10**12  # "{point} ** 99" is not arithmetic here, and no count needs more than this


class PointwiseError(ValueError):
    """A placeholder or an expression that cannot be filled in (a ValueError: the spec's validators
    turn it into the file's error line)."""


def placeholders(text: str) -> list[str]:
    return _PLACEHOLDER.findall(text)


def names_in(value: object) -> set[str]:
    """The placeholder names ``value`` (a string, or a list or mapping of them) holds anywhere."""
    if isinstance(value, str):
        return set(placeholders(value))
    items = (
        value.values() if isinstance(value, Mapping) else value if isinstance(value, (list, tuple)) else ()
    )
    return set().union(*(names_in(item) for item in items))


def depends_on_point(value: object) -> bool:
    """Whether ``value`` names ``{point}`` anywhere."""
    return "point" in names_in(value)


def fill(text: str, point: int) -> str:
    """``text`` with every ``{point}`` replaced (a PointwiseError for any other placeholder)."""
    unknown = [name for name in placeholders(text) if name not in KNOWN]
    if unknown:
        raise PointwiseError(f"{{{unknown[0]}}} is not a placeholder (known: {{point}})")
    return _PLACEHOLDER.sub(lambda _: str(point), text)


def _evaluate(node: ast.AST) -> int | float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
    ):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        result = _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
        if abs(result) > _MAX_RESULT:
            raise PointwiseError(f"the value exceeds {_MAX_RESULT:.0e}")
        return result
    raise PointwiseError("only numbers, + - * / // % and parentheses are allowed")


def value_at(value: str, point: int) -> str | int | float:
    """An option's value at ``point``: the filled text, evaluated when it is arithmetic."""
    text = fill(value, point)
    if not placeholders(value) or not _ARITHMETIC.fullmatch(text):
        return text
    try:
        result = _evaluate(ast.parse(text.strip(), mode="eval"))
    except SyntaxError:
        raise PointwiseError(f"{text!r} is not an expression") from None
    except ZeroDivisionError:
        raise PointwiseError(f"{text!r} divides by zero") from None
    return int(result) if isinstance(result, float) and result.is_integer() else result


def options_at(options: Mapping[str, Any], point: int) -> dict[str, Any]:
    """Instrument options at ``point``: every string value filled (and evaluated), nested too."""
    return {key: _option_at(value, point) for key, value in options.items()}


def _option_at(value: Any, point: int) -> Any:
    if isinstance(value, str):
        return value_at(value, point)
    if isinstance(value, Mapping):
        return options_at(value, point)
    if isinstance(value, list):
        return [_option_at(item, point) for item in value]
    return value


def arg_at(arg: str, point: int) -> str:
    """A server argument or environment value at ``point``: as an option's, as text."""
    return str(value_at(arg, point))


def args_at(args: Sequence[str], point: int) -> list[str]:
    return [arg_at(arg, point) for arg in args]


def env_at(env: Mapping[str, str], point: int) -> dict[str, str]:
    return {name: arg_at(value, point) for name, value in env.items()}


def check(fields: Mapping[str, object], points: Sequence[int]) -> None:
    """Every field (``"instruments[bench].options.num_prompts"`` -> its value) fills and evaluates at
    every point; the first that does not is a PointwiseError naming the field and the point."""
    for where, value in fields.items():
        for point in points:
            try:
                _option_at(value, point)
            except PointwiseError as error:
                raise PointwiseError(f"{where} at point {point}: {value!r}: {error}") from None
