"""The rule checks of kernel specs: one-line errors that show any value safely, and the bounded evaluator of the
shape and launch expressions."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from compileiq_lab.exceptions import ConfigurationError

__all__ = ["MAX_EXPR_CHARS", "eval_expr", "expr_names", "fail", "need", "one_line", "raised_in", "show_bytes",
           "show_int"]

#: Characters of one shape or launch expression (a realistic one is a few dozen; longer ones nest too deep).
MAX_EXPR_CHARS = 500
#: Every literal, name and intermediate value of an expression fits a signed 64-bit int (what C gets).
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 63) - 1
#: Integers up to this many bits are shown as they are in messages; larger ones by their digit count only.
_SHOWN_BITS = 128
_LOG10_2 = 0.30102999566398120
_QUOTE = 200
_BINOPS: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}


class _Shown:
    """Stands for a value in a message by a text of its own (a huge int by its digit count)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _safe(got: Any, depth: int = 0) -> Any:
    """``got`` with every int too large to print replaced by its digit count (containers walked a few levels)."""
    if type(got) is int and got.bit_length() > _SHOWN_BITS:
        return _Shown(show_int(got))
    if depth > 4:
        return got
    if isinstance(got, (list, tuple)):
        return type(got)(_safe(x, depth + 1) for x in got)
    if isinstance(got, dict):
        return {k: _safe(v, depth + 1) for k, v in got.items()}
    return got


def fail(who: str, rule: str, got: Any, fix: str) -> ConfigurationError:
    """The ConfigurationError stating the rule, the value received (huge ints by their digit count, long values
    cut) and the fix."""
    shown = repr(_safe(got))
    if len(shown) > 2 * _QUOTE:
        shown = shown[:2 * _QUOTE] + "..."
    return ConfigurationError(f"{who}: `{rule}` must hold, but got {shown}. {fix}")


def need(ok: Any, who: str, rule: str, got: Any, fix: str) -> None:
    """Raise the ConfigurationError stating the rule, the value received and the fix unless ``ok``."""
    if not ok:
        raise fail(who, rule, got, fix)


def show_int(value: int) -> str:
    """An int for a message: as it is when small, else ``"a 6021-digit number"`` (never converted to decimal, which
    Python refuses beyond 4300 digits and which takes quadratic time)."""
    if value.bit_length() <= _SHOWN_BITS:
        return str(value)
    digits = int((value.bit_length() - 1) * _LOG10_2) + 1  # 10**(digits-1) <= 2**(bits-1) <= |value|
    sign = "negative " if value < 0 else ""
    if value.bit_length() > 100_000:  # the exact count costs a power of ten that size
        return f"a {sign}number of about {digits} digits"
    if abs(value) >= 10 ** digits:
        digits += 1
    return f"a {sign}{digits}-digit number"


def show_bytes(n: int) -> str:
    """A byte count for a message: ``"186.3 GiB"``, ``"4 GiB"``, ``"512 bytes"``."""
    if n.bit_length() > 80:
        return f"{show_int(n)} of bytes"
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f}".removesuffix(".0") + f" {unit}"
    return f"{n} bytes"


def _quote(text: str) -> str:
    return repr(text if len(text) <= _QUOTE else text[:_QUOTE] + "...")


def _too_big(expr: str, what: str, value: str) -> ConfigurationError:
    return ConfigurationError(
        f"expression {_quote(expr)}: `every value in it fits a signed 64-bit int (int64)` must hold, but {what} is "
        f"{value}. Use smaller values; a buffer or launch dim is far below that.")


def _in_range(value: int, expr: str, what: str) -> int:
    if not _INT_MIN <= value <= _INT_MAX:
        raise _too_big(expr, what, show_int(value))
    return value


def _eval_node(node: ast.AST, names: Mapping[str, int], expr: str) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return _in_range(node.value, expr, "a literal")
    if isinstance(node, ast.Name) and node.id in names:
        return _in_range(names[node.id], expr, node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = (-1 if isinstance(node.op, ast.USub) else 1) * _eval_node(node.operand, names, expr)
        return _in_range(value, expr, ast.unparse(node))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        a, b = _eval_node(node.left, names, expr), _eval_node(node.right, names, expr)
        bad_pow = isinstance(node.op, ast.Pow) and not 0 <= b <= 64
        if bad_pow or (isinstance(node.op, (ast.FloorDiv, ast.Mod)) and b == 0):
            raise fail(f"expression {_quote(expr)}", "divisors are non-zero and exponents within 0..64",
                       f"{ast.unparse(node)} with operands {a} and {b}", "Fix the expression or the values it uses.")
        if isinstance(node.op, ast.Pow) and abs(a) > 1 and (abs(a).bit_length() - 1) * b > 64:
            # |a|**b >= 2**((bits - 1) * b): past int64 for sure; refused before it is computed
            raise _too_big(expr, f"{ast.unparse(node)} (operands {a} and {b})",
                           f"at least 2**{(abs(a).bit_length() - 1) * b}")
        return _in_range(_BINOPS[type(node.op)](a, b), expr, ast.unparse(node))
    div = isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
    raise ConfigurationError(f"expression {_quote(expr)}: `it is int literals and names in {sorted(names)} combined by "
                             f"+ - * // % ** and parentheses` must hold, but got {type(node).__name__} "
                             f"{ast.unparse(node)!r}. {'Use // for division.' if div else 'Rewrite that part.'}")


def expr_names(expr: int | str) -> set[str]:
    """The names an expression uses (none for an int, or for an expression ``eval_expr`` would refuse unread)."""
    if not isinstance(expr, str) or len(expr) > MAX_EXPR_CHARS:
        return set()
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


def eval_expr(expr: int | str, names: Mapping[str, int]) -> int:
    """Evaluate a safe integer expression such as ``"n // (2 * BLOCK)"``.

    Args:
        expr: An int, or a string of int literals, names, ``+ - * // % **`` and parentheses.
        names: Values of the names the expression may use.

    Raises:
        ConfigurationError: The expression is not integer arithmetic over ``names``, is longer than
            ``MAX_EXPR_CHARS``, or a value in it (a literal, a name, an intermediate result) does not fit int64.
    """
    if type(expr) is int:
        if not _INT_MIN <= expr <= _INT_MAX:
            raise fail("a value", "it fits a signed 64-bit int (int64)", show_int(expr), "Use a smaller value.")
        return expr
    if not isinstance(expr, str):
        raise fail("an expression", "it is an int or a str", type(expr).__name__,
                   'Write an int or a string such as "n // 256".')
    if len(expr) > MAX_EXPR_CHARS:
        raise ConfigurationError(f"expression {_quote(expr)}: `it has at most {MAX_EXPR_CHARS} characters` must "
                                 f"hold, but got {len(expr)} characters. Write it shorter, e.g. with a param.")
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        why = exc.msg if isinstance(exc, SyntaxError) else type(exc).__name__
        raise ConfigurationError(f"expression {_quote(expr)}: `it is valid syntax` must hold, but got a syntax "
                                 f"error ({why[:_QUOTE]}). Write arithmetic such as \"n // (2 * BLOCK)\".") from None
    return _eval_node(tree.body, names, expr)


def one_line(exc: BaseException) -> str:
    """An exception's message on one line, cut to a length a message can quote."""
    text = " ".join(str(exc).split())
    return text if len(text) <= _QUOTE else text[:_QUOTE] + "..."


def raised_in(path: Path, exc: BaseException) -> str:
    """What a user's Python file raised (or how it exited), in one line, with the line of that file it came from:
    "RuntimeError: boom (line 3)"."""
    if isinstance(exc, SyntaxError) and exc.lineno is not None:
        line: int | None = exc.lineno
        text = exc.msg
    else:
        frames = [tb for tb in _frames(exc.__traceback__) if Path(tb.tb_frame.f_code.co_filename) == path]
        line = frames[-1].tb_lineno if frames else None
        text = one_line(exc) if not isinstance(exc, SystemExit) else f"exit code {exc.code!r}"
    where = f" (line {line})" if line is not None else ""
    return (f"{type(exc).__name__}: {text}" if text else type(exc).__name__) + where


def _frames(tb: TracebackType | None) -> list[TracebackType]:
    out = []
    while tb is not None:
        out.append(tb)
        tb = tb.tb_next
    return out
