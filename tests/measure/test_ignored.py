"""Controls the compiler said it ignored: the warnings parsed, mapped to controls, learned as constraints."""

from __future__ import annotations

from compileiq_lab.measure.ignored import ANY, IgnoreRules, find_ignored, ignored_options
from compileiq_lab.space.catalogs import get_catalog

# what ptxas 13.0 prints (measured)
CONFLICT = ("ptxas warning : Conflicting options '-O0' and '--register-usage-level' specified, ignoring "
            "'--register-usage-level' option")
TOO_BIG = "ptxas warning : Too big maxrregcount value specified 300, will be ignored"
RANGE = "ptxas warning : Value of RegUsageLevel (12) is out of valid range {0..10}, option will be ignored"
BOUNDS = ("ptxas warning : Value of threads per SM for entry _Z1kPf is out of range. .minnctapersm and .maxntid "
          "will be ignored")


def test_warnings_are_parsed() -> None:
    found = ignored_options("\n".join(["ptxas info : Used 8 registers", CONFLICT, TOO_BIG, RANGE, BOUNDS]))
    assert [(i.option, i.because) for i in found] == [("--register-usage-level", "-O0"), ("maxrregcount", None),
                                                      ("RegUsageLevel", None), ("minnctapersm", None),
                                                      ("maxntid", None)]
    assert ignored_options("ptxas info : Used 8 registers\nptxas info : Compile time = 1.2 ms") == []


def test_ignored_controls_and_the_rule_learned() -> None:
    cat = get_catalog("ptxas")
    config = {"opt_level": 0, "register_usage_level": 3, "maxrregcount": 64}
    found = find_ignored(cat, config, CONFLICT)
    assert [name for name, _ in found] == ["register_usage_level"]
    rule = found[0][1]
    assert rule.when == (("opt_level", 0),)
    rules = IgnoreRules()
    assert rules.add(rule) and not rules.add(rule)
    assert rules.reason({"opt_level": 0, "register_usage_level": 7}) is not None  # any value with -O0
    assert rules.reason({"opt_level": 1, "register_usage_level": 7}) is None
    assert rules.reason({"opt_level": 0}) is None  # nothing ignored without the control
    # an option that is ignored on its own is learned for its value only
    (name, alone), = find_ignored(cat, {"register_usage_level": 10}, RANGE)
    assert name == "register_usage_level" and alone.when == (("register_usage_level", 10),)


def test_unquoted_forms_of_ptxas_13() -> None:
    text = "\n".join([
        "ptxas warning : Conflicting options force-load-cache and def-load-cache specified, ignoring def-load-cache "
        "option",
        "ptxas warning : Conflicting options -maxrregcount and -maxntid specified, ignoring -maxntid option",
        "ptxas warning : Value of threads per SM for entry mod is out of range. .minnctapersm will be ignored",
        "ptxas warning : Command line option 'device-function-maxrregcount' not supported for 'whole program "
        "compilation', will be ignored"])
    assert [(i.option, i.because) for i in ignored_options(text)] == [
        ("def-load-cache", "force-load-cache"), ("-maxntid", "-maxrregcount"), ("minnctapersm", None),
        ("device-function-maxrregcount", None)]
    cat = get_catalog("ptxas")
    config = {"force_load_cache": "cg", "def_load_cache": "ca", "maxrregcount": 64, "maxntid": 256, "minnctapersm": 4}
    found = dict(find_ignored(cat, config, text))
    assert set(found) == {"def_load_cache", "maxntid", "minnctapersm"}
    # only the rival's name is printed: the rule holds for any of its values
    assert found["def_load_cache"].when == (("force_load_cache", ANY),)
    assert found["maxntid"].when == (("maxrregcount", ANY),)
    rules = IgnoreRules()
    rules.add(found["maxntid"])
    assert rules.reason({"maxrregcount": 128, "maxntid": 512}) is not None


def test_options_no_control_produced_are_skipped() -> None:
    assert find_ignored(get_catalog("ptxas"), {"opt_level": 3}, CONFLICT) == []
