"""SearchSpace: flattening, decode/encode, canonical keys, size, specs and bad definitions."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import compileiq_lab.space as ss
from compileiq_lab.exceptions import SpaceDefinitionError
from compileiq_lab.space.space import GENE_KNOCKOUT


def _nested() -> ss.SearchSpace:
    return ss.SearchSpace({
        "opt": ss.choice(["-O1", "-O2", "-O3"]),
        "nvcc": {
            "maxrregcount": ss.range(32, 128, 32, knockout_prob=0.5),
            "fast_math": ss.flag("--use_fast_math"),
            "ptxas": {"level": ss.range(0, 3), "verbose": ss.flag("-v", knockout_prob=0.3)},
        },
        "tile": ss.log_sampling(8, 64, 4),
        "arch": ss.literal("sm_90"),
    })


def _all_genomes(space: ss.SearchSpace) -> np.ndarray:
    grids = [range(lo, hi + 1) for lo, hi in zip(space.xl, space.xu)]
    return np.array(list(itertools.product(*grids)), dtype=np.int64).reshape(-1, space.n_genes)


def _genome(space: ss.SearchSpace, **genes: int) -> np.ndarray:
    """Genome with every param present and value index 0, then named overrides.

    Keys are "<dotted name>" for the value gene or "<dotted name>:on" for the knockout gene.
    """
    x = np.zeros(space.n_genes, dtype=np.int64)
    x[space.gene_kind == GENE_KNOCKOUT] = 1
    for key, v in genes.items():
        name, _, knock = key.replace("__", ".").partition(":")
        i = space.names.index(name)
        g = space.knock_gene[i] if knock else space.value_gene[i]
        assert g >= 0
        x[g] = v
    return x


# -- structure --------------------------------------------------------------------------------


def test_nested_dict_flattens_to_dotted_names_in_order() -> None:
    assert _nested().names == ["opt", "nvcc.maxrregcount", "nvcc.fast_math", "nvcc.ptxas.level",
                               "nvcc.ptxas.verbose", "tile", "arch"]


def test_getitem_by_dotted_name_and_unknown_name() -> None:
    space = _nested()
    assert space["nvcc.ptxas.level"] == ss.range(0, 3)
    with pytest.raises(KeyError, match="valid names"):
        space["nvcc.nope"]


def test_gene_layout_counts() -> None:
    space = _nested()
    # value genes: opt, maxrregcount, level, tile; knockout genes: maxrregcount, fast_math, verbose
    assert space.n_genes == 7
    assert int((space.gene_kind == GENE_KNOCKOUT).sum()) == 3
    assert space.value_gene[space.names.index("arch")] == -1
    assert space.knock_gene[space.names.index("arch")] == -1


def test_decode_gives_nested_dict() -> None:
    space = _nested()
    x = _genome(space, opt=2, nvcc__maxrregcount=1, nvcc__ptxas__level=3, tile=3)
    assert space.decode(x) == {
        "opt": "-O3",
        "nvcc": {"maxrregcount": 64, "fast_math": "--use_fast_math",
                 "ptxas": {"level": 3, "verbose": "-v"}},
        "tile": 64,
        "arch": "sm_90",
    }


def test_decode_omits_knocked_out_params() -> None:
    space = _nested()
    x = _genome(space, **{"nvcc__maxrregcount:on": 0, "nvcc__fast_math:on": 0})
    cfg = space.decode(x)
    assert "maxrregcount" not in cfg["nvcc"]
    assert "fast_math" not in cfg["nvcc"]
    assert cfg["nvcc"]["ptxas"] == {"level": 0, "verbose": "-v"}


def test_fully_knocked_out_group_disappears() -> None:
    space = ss.SearchSpace({"a": ss.range(0, 2),
                            "g": {"f": ss.flag("-f"), "h": {"k": ss.flag("-k")}}})
    x = _genome(space, **{"g__f:on": 0, "g__h__k:on": 0})
    assert space.decode(x) == {"a": 0}
    x = _genome(space, **{"g__h__k:on": 0})
    assert space.decode(x) == {"a": 0, "g": {"f": "-f"}}


# -- encode -----------------------------------------------------------------------------------


def test_encode_decode_round_trip_on_sampled_genomes() -> None:
    space = _nested()
    X = space.sample(np.random.default_rng(7), 500)
    back = np.array([space.encode(space.decode(x)) for x in X])
    np.testing.assert_array_equal(space.canonical(back), space.canonical(X))
    # and decoding the re-encoded genomes yields the same configs
    assert [space.decode(x) for x in back] == [space.decode(x) for x in X]


def test_encode_known_config() -> None:
    space = ss.SearchSpace({"a": ss.range(0, 10, 2), "f": ss.flag("-f"), "c": ss.choice(["x", "y"])})
    x = space.encode({"a": 6, "c": "y"})
    assert space.decode(x) == {"a": 6, "c": "y"}
    assert x[space.value_gene[0]] == 3
    assert x[space.knock_gene[1]] == 0


def test_encode_rejects_unknown_names_listing_valid_ones() -> None:
    space = ss.SearchSpace({"a": ss.range(0, 3), "g": {"b": ss.flag("-b")}})
    with pytest.raises(SpaceDefinitionError, match=r"\['g.zz'\] are not in the space") as info:
        space.encode({"a": 1, "g": {"zz": 1}})
    assert "valid names: ['a', 'g.b']" in str(info.value)


def test_encode_rejects_missing_param_without_knockout() -> None:
    space = ss.SearchSpace({"a": ss.range(0, 3), "f": ss.flag("-f")})
    with pytest.raises(SpaceDefinitionError, match="'a' has no knockout_prob, so it must be present"):
        space.encode({"f": "-f"})


def test_encode_rejects_value_outside_domain() -> None:
    space = ss.SearchSpace({"a": ss.range(0, 3)})
    with pytest.raises(SpaceDefinitionError, match="not in the domain"):
        space.encode({"a": 7})


# -- keys -------------------------------------------------------------------------------------


def test_keys_ignore_value_gene_of_knocked_out_param() -> None:
    space = ss.SearchSpace({"a": ss.range(0, 5, knockout_prob=0.5), "b": ss.choice(["x", "y"])})
    x1 = _genome(space, a=1, **{"a:on": 0})
    x2 = _genome(space, a=4, **{"a:on": 0})
    assert not np.array_equal(x1, x2)
    k1, k2 = space.keys(np.stack([x1, x2]))
    assert k1 == k2


def test_keys_differ_when_present_values_differ() -> None:
    space = ss.SearchSpace({"a": ss.range(0, 5, knockout_prob=0.5)})
    k1, k2 = space.keys(np.stack([_genome(space, a=1), _genome(space, a=4)]))
    assert k1 != k2


def test_keys_identify_configs_exactly_over_full_enumeration() -> None:
    space = ss.SearchSpace({
        "a": ss.range(0, 2, knockout_prob=0.5),
        "b": ss.choice(["x", "y"]),
        "g": {"f": ss.flag("-f"), "l": ss.literal(3, knockout_prob=0.2)},
        "c": ss.literal("const"),
    })
    X = _all_genomes(space)
    keys = space.keys(X)
    configs = [ss.config_key(space.decode(x)) for x in X]
    assert len(set(keys)) == space.size
    assert len(set(configs)) == space.size
    # same key <=> same config
    key_to_cfg: dict[bytes, str] = {}
    for k, c in zip(keys, configs):
        assert key_to_cfg.setdefault(k, c) == c
    assert len(set(key_to_cfg.values())) == len(key_to_cfg)


def test_canonical_masks_only_knocked_out_value_genes() -> None:
    space = ss.SearchSpace({"a": ss.range(0, 5, knockout_prob=0.5), "b": ss.range(0, 5)})
    x = _genome(space, a=3, b=2, **{"a:on": 0})
    c = space.canonical(x)[0]
    assert c[space.value_gene[0]] == -1
    assert c[space.value_gene[1]] == 2
    # input is not modified
    assert x[space.value_gene[0]] == 3


# -- size -------------------------------------------------------------------------------------


def test_size_matches_brute_force_enumeration() -> None:
    space = ss.SearchSpace({
        "r": ss.range(0, 6, 3, knockout_prob=0.1),
        "c": ss.choice(["p", "q", "s"]),
        "g": {"f": ss.flag("-f"), "lit": ss.literal(1)},
        "log": ss.log_sampling(1, 8, 4, knockout_prob=0.5),
    })
    configs = {ss.config_key(space.decode(x)) for x in _all_genomes(space)}
    assert space.size == len(configs)
    assert space.size == 4 * 3 * 2 * 5


# -- specs and diff ---------------------------------------------------------------------------


def test_to_spec_from_spec_round_trip() -> None:
    space = _nested()
    spec = space.to_spec()
    rebuilt = ss.SearchSpace.from_spec(spec)
    assert rebuilt == space
    assert rebuilt.names == space.names
    assert rebuilt.to_spec() == spec
    assert set(spec["nvcc"]["ptxas"]) == {"level", "verbose"}


def test_from_spec_with_param_named_kind() -> None:
    space = ss.SearchSpace({"g": {"kind": ss.choice(["a", "b"]), "x": ss.range(0, 2)}})
    assert ss.SearchSpace.from_spec(space.to_spec()) == space


def test_space_inequality_and_diff_names_parameter() -> None:
    a = ss.SearchSpace({"x": ss.range(0, 10), "y": ss.choice(["a", "b"])})
    b = ss.SearchSpace({"x": ss.range(0, 12), "y": ss.choice(["a", "b"])})
    assert a != b
    d = a.diff(b)
    assert "'x'" in d and "end=10" in d and "end=12" in d
    assert "'y'" not in d


def test_diff_reports_absent_parameter() -> None:
    a = ss.SearchSpace({"x": ss.range(0, 10)})
    b = ss.SearchSpace({"x": ss.range(0, 10), "z": ss.flag("-z")})
    assert a.diff(b) == "'z': (absent) vs flag(name_or_value='-z', knockout_prob=0.5)"


def test_space_from_space_copies_definition() -> None:
    a = _nested()
    assert ss.SearchSpace(a) == a


# -- bad definitions --------------------------------------------------------------------------


def test_empty_space_rejected() -> None:
    with pytest.raises(SpaceDefinitionError, match="the search space is empty"):
        ss.SearchSpace({})


def test_empty_group_rejected_with_its_name() -> None:
    with pytest.raises(SpaceDefinitionError, match="group 'a.b' is empty"):
        ss.SearchSpace({"x": ss.range(0, 1), "a": {"b": {}}})


def test_non_param_value_suggests_literal() -> None:
    with pytest.raises(SpaceDefinitionError, match=r"'g.n' must be a parameter.*int 5.*ss.literal\(5\)"):
        ss.SearchSpace({"g": {"n": 5}})


def test_dotted_name_rejected() -> None:
    with pytest.raises(SpaceDefinitionError, match=r"without '\.'.*'a\.b'"):
        ss.SearchSpace({"a.b": ss.range(0, 1)})


@pytest.mark.parametrize("name", ["", 3])
def test_empty_or_non_str_name_rejected(name) -> None:
    with pytest.raises(SpaceDefinitionError, match="parameter names must be non-empty strings"):
        ss.SearchSpace({name: ss.range(0, 1)})


@pytest.mark.parametrize("definition", [[("a", 1)], "a", 5])
def test_non_dict_space_rejected(definition) -> None:
    with pytest.raises(SpaceDefinitionError, match=r"must be a dict of parameters.*Build it as"):
        ss.SearchSpace(definition)
