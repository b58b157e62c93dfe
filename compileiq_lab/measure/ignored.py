"""Controls the compiler ignored: its "ignoring ..." warnings read per candidate, and the rule each one teaches."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from compileiq_lab.space.catalogs.base import Catalog, Control, controls_of

__all__ = ["ANY", "UNSET", "IgnoreRule", "Ignored", "find_ignored", "ignored_options"]

#: In a rule's condition: the control is set, whatever its value (ptxas ignores -maxntid with any -maxrregcount).
ANY: Any = type("AnyValue", (), {"__repr__": lambda self: "any value"})()
#: In a rule's condition: the control is not set (the kernel's own value holds: a __launch_bounds__ block).
UNSET: Any = type("Unset", (), {"__repr__": lambda self: "unset"})()

#: (pattern, groups naming the ignored options, group naming the option it lost against or None)
_PATTERNS: tuple[tuple[re.Pattern[str], tuple[str, ...], str | None], ...] = (
    # ptxas: Conflicting options '-O0' and '--register-usage-level' specified, ignoring '--register-usage-level' option
    # ptxas: Conflicting options force-load-cache and def-load-cache specified, ignoring def-load-cache option
    (re.compile(r"Conflicting options '?(?P<a>[^' ]+)'? and '?(?P<b>[^' ]+)'? specified, ignoring '?(?P<x>[^' ]+)'?"),
     ("x",), "ab"),
    # ptxas: Command line option 'device-function-maxrregcount' not supported for '...', will be ignored
    (re.compile(r"[Oo]ption '(?P<x>[^']+)' not supported[^\n]*will be ignored"), ("x",), None),
    # ptxas: Too big maxrregcount value specified 300, will be ignored
    (re.compile(r"Too big (?P<x>[\w-]+) value specified \S+, will be ignored"), ("x",), None),
    # ptxas: Value of RegUsageLevel (12) is out of valid range {0..10}, option will be ignored
    (re.compile(r"Value of (?P<x>[\w-]+) \([^)]*\) is out of valid range[^\n]*will be ignored"), ("x",), None),
    # ptxas: Value of threads per SM for entry k is out of range. .minnctapersm and .maxntid will be ignored
    (re.compile(r"\.(?P<x>\w+) and \.(?P<y>\w+) will be ignored"), ("x", "y"), None),
    # ptxas: Value of threads per SM for entry mod is out of range. .minnctapersm will be ignored
    (re.compile(r"out of range\. \.(?P<x>\w+) will be ignored"), ("x",), None),
    # generic: ignoring option '-x' / option '-x' is ignored / '-x' ignored
    (re.compile(r"ignoring (?:unknown |unsupported )?(?:option )?'(?P<x>-[^']+)'(?! option)"), ("x",), None),
    (re.compile(r"[Oo]ption '(?P<x>-[^']+)' (?:is|will be|has been) ignored"), ("x",), None),
)
#: ptxas spells some options by their internal names in warnings
_ALIASES = {"regusagelevel": "registerusagelevel", "threadspersm": "maxntid"}
#: Warnings whose verdict rests on several options together: what they teach holds only at all their values (the
#: threads per SM are .maxntid's threads times .minnctapersm, so 4 blocks are out of range at 1024 threads, not 256)
_TOGETHER: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"threads per SM"), ("minnctapersm", "maxntid")),
)


@dataclass(frozen=True)
class Ignored:
    """One option a compiler said it ignored.

    Attributes:
        option: As printed (e.g. "--register-usage-level", "maxrregcount", ".maxntid").
        because: The option it lost against (e.g. "-O0"), or None when it was ignored on its own.
        message: The warning line.
    """

    option: str
    because: str | None
    message: str


def ignored_options(text: str) -> list[Ignored]:
    """Every "ignoring ..." warning in a compiler's output, in order (each option once)."""
    out: list[Ignored] = []
    seen: set[tuple[str, str | None]] = set()
    for line in text.splitlines():
        for pattern, groups, rival in _PATTERNS:
            m = pattern.search(line)
            if not m:
                continue
            for g in groups:
                option = m.group(g)
                because = None
                if rival:
                    pair = [m.group(r) for r in rival]
                    because = next((o for o in pair if o != option), None)
                if (option, because) not in seen:
                    seen.add((option, because))
                    out.append(Ignored(option, because, line.strip()))
            break
    return out


def _norm(option: str) -> str:
    key = re.sub(r"[-_.]", "", option.split("=", 1)[0]).lower()
    return _ALIASES.get(key, key)


def _control_for(catalog: Catalog, config: Mapping[str, Any], option: str, exact: bool) -> Control | None:
    """The control of ``config`` that produced ``option``: by its exact argument (``exact``: "-O0" is
    opt_level=0), else by the option's name (its --help spelling or its argument's name)."""
    for c in catalog.controls:
        if c.name not in config:
            continue
        tokens = c.argv(config[c.name])
        if exact and option in tokens:
            return c
        if not exact and _norm(option) in {_norm(c.option), *(_norm(t) for t in tokens if t.startswith("-"))}:
            return c
    return None


@dataclass(frozen=True)
class IgnoreRule:
    """Learned: when the controls in ``when`` have these values, the compiler ignores ``control``."""

    when: tuple[tuple[str, Any], ...]
    control: str
    message: str

    def record(self) -> dict[str, Any]:
        """The rule as a row of the run keeps it (JSON), for the search to learn it with the conflicts it reads from
        failed compiles (``compileiq_lab.search.conflicts``): ``{"control": name, "when": [{"control": name,
        "value": v}, {"control": name, "any": true} or {"control": name, "absent": true}, ...], "message": text}``."""
        when = [{"control": k, "any": True} if v is ANY else {"control": k, "absent": True} if v is UNSET
                else {"control": k, "value": v} for k, v in self.when]
        return {"control": self.control, "when": when, "message": self.message}


def find_ignored(catalog: Catalog, config: Mapping[str, Any], text: str) -> list[tuple[str, IgnoreRule]]:
    """The controls of ``config`` that the compiler output ``text`` says were ignored, each with the rule to learn:
    (control name, rule). Options that no control of the config produced (e.g. from the build context) are
    skipped."""
    flat = controls_of(config)
    found: list[tuple[str, IgnoreRule]] = []
    for item in ignored_options(text):
        control = _control_for(catalog, flat, item.option, exact=False)
        if control is None or any(name == control.name for name, _ in found):
            continue
        rival = _control_for(catalog, flat, item.because, exact=True) if item.because else None
        value: Any = None
        if rival is not None:  # the rival's exact argument ("-O0"): at that value
            value = flat[rival.name]
        elif item.because:  # only its name ("-maxrregcount"): at any value
            rival, value = _control_for(catalog, flat, item.because, exact=False), ANY
        when: tuple[tuple[str, Any], ...] = ((rival.name, value),) \
            if rival is not None and rival.name != control.name else ((control.name, flat[control.name]),)
        together = next((names for pattern, names in _TOGETHER if pattern.search(item.message)), ())
        joint = [c for c in catalog.controls if _norm(c.option) in together]
        if joint:  # (one the config leaves unset holds at the kernel's own value: its __launch_bounds__)
            when = tuple((c.name, flat.get(c.name, UNSET)) for c in sorted(joint, key=lambda c: c.name != control.name))
        found.append((control.name, IgnoreRule(when, control.name, item.message)))
    return found
