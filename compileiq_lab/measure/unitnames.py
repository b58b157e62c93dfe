"""The parts of a mangled kernel symbol that nvcc makes unique per compile, and the symbol without them."""

from __future__ import annotations

import re

__all__ = ["stable_symbol"]

#: The namespaces nvcc names per translation unit, inside a mangled symbol as ``<length><name>``: an anonymous
#: namespace (``_GLOBAL__N__<hash>_<n>_<file>_<hash>``, with a ``_<number>`` that changes on every compile where a
#: template is instantiated with one of its types) and the internal-linkage namespace of ``static`` entities
#: (``_INTERNAL_<hash>_...``). Both hold hashes of the file's path.
_UNIT_NAMESPACE = re.compile(r"(\d+)(_GLOBAL__N_|_INTERNAL_)")
_UNIT_NAME = re.compile(r"(?:_GLOBAL__N_|_INTERNAL_)_?[0-9a-f]{8}_\d+_\w+_[0-9a-f]{8}(?:_\d+)?")
#: The prefix ``-rdc=true`` gives a static kernel: ``__nv_static_<n>_``, n characters of the file's hashes, ``_``, and
#: then the kernel's own symbol.
_RDC_STATIC = re.compile(r"__nv_static_(\d+)_")
_STABLE = {"_GLOBAL__N_": "12_GLOBAL__N_1", "_INTERNAL_": "10_INTERNAL_"}


def stable_symbol(symbol: str) -> str:
    """``symbol`` with every per-compile part nvcc puts in it replaced by a fixed one, so that the same kernel
    compiled from another path, or compiled again, reads the same: ``_ZN36_GLOBAL__N__e2ddefa3_4_n_cu_d589cb604anonEPf``
    (from ``namespace { __global__ void anon(float*); }``) -> ``_ZN12_GLOBAL__N_14anonEPf`` (which demangles to
    ``(anonymous namespace)::anon(float*)``, as g++ names it). A symbol without such parts is returned as it is."""
    if "_GLOBAL__N_" not in symbol and "_INTERNAL_" not in symbol and "__nv_static_" not in symbol:
        return symbol
    out, at = [], 0
    rdc = _RDC_STATIC.match(symbol)
    if rdc:
        end = rdc.end() + int(rdc.group(1)) + 1
        if end <= len(symbol) and symbol[end - 1] == "_":
            out.append("__nv_static_0_")
            at = end
    for found in _UNIT_NAMESPACE.finditer(symbol, at):
        if found.start() < at:
            continue
        digits, start = found.group(1), found.start(2)
        for cut in range(len(digits)):  # the longest length that spans one such name (a digit before it is another's)
            if digits[cut] == "0":
                continue
            length = int(digits[cut:])
            if _UNIT_NAME.fullmatch(symbol, start, start + length) and start + length <= len(symbol):
                out.append(symbol[at:found.start(1) + cut] + _STABLE[found.group(2)])
                at = start + length
                break
    out.append(symbol[at:])
    return "".join(out)
