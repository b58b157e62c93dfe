"""`tune --max-evals N --time-budget 10m`: durations in seconds or with a unit, bad ones refused before anything runs,
and a run a budget ended continues with a larger one."""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compileiq_lab import load_results
from compileiq_lab.cli import tune
from compileiq_lab.cli.main import _parser, main
from compileiq_lab.cli.options import duration

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "compileiq_lab.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


@pytest.mark.parametrize("text,seconds", [("600", 600.0), ("2.5", 2.5), ("90s", 90.0), ("10m", 600.0),
                                          ("1.5h", 5400.0), ("2H", 7200.0), (" 45s ", 45.0), ("1e3", 1000.0),
                                          ("5min", 300.0), ("30 sec", 30.0)])
def test_durations_in_seconds_or_with_a_unit(text, seconds):
    assert duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "m", "0", "0s", "-5m", "ten", "10x", "10mins", "inf", "nan", "1e400h", "5ms"])
def test_bad_durations_name_the_rule_the_value_and_the_fix(text):
    with pytest.raises(argparse.ArgumentTypeError, match="must hold") as info:
        duration(text)
    assert repr(text) in str(info.value) and "10m" in str(info.value)


def test_tune_parses_the_budgets_and_leaves_them_off_by_default():
    args = _parser().parse_args(["tune", "stencil_c", "--max-evals", "40", "--time-budget", "10m"])
    assert args.max_evals == 40 and args.time_budget == 600.0 and args.generations == 10
    plain = _parser().parse_args(["tune", "stencil_c"])
    assert plain.max_evals is None and plain.time_budget is None


def test_tune_help_documents_the_budgets():
    text = " ".join(_parser()._subparsers._group_actions[0].choices["tune"].format_help().split())  # type: ignore
    assert "--max-evals N" in text and "--time-budget DURATION" in text and "10m" in text


@pytest.mark.parametrize("option,value", [("--time-budget", "10x"), ("--time-budget", "0"), ("--time-budget", "-1h"),
                                          ("--max-evals", "0"), ("--max-evals", "many")])
@pytest.mark.parametrize("joined", [True, False])
def test_bad_budgets_are_usage_errors_before_anything_runs(tmp_path, option, value, joined):
    given = [f"{option}={value}"] if joined else [option, value]  # "--time-budget -1h" too: not taken for an option
    out = cli("tune", "stencil_c", *given, "--store", "x.db", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert option in out.stderr and "must hold" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "x.db").exists()


def test_only_a_value_with_one_dash_is_joined_to_its_option():
    from compileiq_lab.cli.main import attach_signed_values

    assert attach_signed_values(["tune", "k", "--time-budget", "-1h", "--timeout", "-5", "-v"]) == \
        ["tune", "k", "--time-budget=-1h", "--timeout=-5", "-v"]
    assert attach_signed_values(["tune", "k", "--time-budget", "--max-evals", "3"]) == \
        ["tune", "k", "--time-budget", "--max-evals", "3"]  # a missing value stays argparse's error


@needs_gcc
def test_a_run_ended_by_max_evals_continues_with_a_larger_one(tmp_path):
    base = ["tune", "stencil_c", "--objectives", "text_bytes", "--pool-size", "4", "--generations", "50",
            "--warm-start", "none", "--store", "r.db"]
    first = cli(*base, "--max-evals", "6", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "6 evaluations, statuses {'ok': 6}, run finished, ended by its budget: max_evaluations" in first.stdout
    res = load_results(str(tmp_path / "r.db"))
    assert len(res) == 6 and res.status == "finished" and res.header.stop_reason == "max_evaluations"
    shown = cli("show", "r.db", cwd=tmp_path)
    assert "ended by its budget: max_evaluations" in shown.stdout, shown.stdout
    again = cli(*base, "--max-evals", "9", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    counts = [int(line.split("] ")[1].split(" evaluations")[0]) for line in again.stderr.splitlines()
              if line.startswith("generation ")]
    assert counts[0] == 6 and counts == sorted(counts) and counts[-1] <= 9, again.stderr  # from the stored rows on
    assert re.search(r"failed, best \d+ bytes, ", again.stderr), again.stderr  # the best with its unit
    res = load_results(str(tmp_path / "r.db"))
    assert len(res) == 9 and len({r.config_key for r in res.records}) == 9
    assert res.header.config["max_evaluations"] == 9 and res.header.stop_reason == "max_evaluations"


def _slow_canary(seconds: float):
    """A canary that takes ``seconds`` (its result is not what these tests claim; its time is)."""
    def check(run: object) -> None:
        time.sleep(seconds)
    return check


@needs_gcc
def test_the_time_budget_counts_the_canary(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tune, "check_canary", _slow_canary(1.5))
    code = main(["tune", "stencil_c", "--objectives", "text_bytes", "--pool-size", "4", "--generations", "2",
                 "--warm-start", "none", "--store", "r.db", "--time-budget", "1h", "--validate", "0"])
    assert code == 0
    res = load_results(str(tmp_path / "r.db"))
    assert res.header.run_time_s >= 1.5, res.header.run_time_s  # the canary's 1.5 s, then the search's own time
    assert len(res) > 1 and res.status == "finished"


@needs_gcc
def test_a_budget_the_canary_spends_is_refused_with_the_fix(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tune, "check_canary", _slow_canary(1.2))
    code = main(["tune", "stencil_c", "--objectives", "text_bytes", "--warm-start", "none", "--store", "r.db",
                 "--time-budget", "1s"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "--time-budget counts the canary's builds" in err and "of the 1 s given" in err
    assert "larger --time-budget" in err and "--no-canary" in err
    assert not (tmp_path / "r.db").exists()  # nothing was started
