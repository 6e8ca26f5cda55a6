"""The thread-count report of the compile/train benchmarks (ember/bench/threads.py): each variant's
speed over its own one-thread run, and what the machine gives two threads right now."""
import types

import pytest

from ember.bench import threads as T


def _result(variant, seconds):
    return types.SimpleNamespace(suite="compile", name="mlp_b512_sgd", variant=variant, median=seconds)


@pytest.fixture
def two_counts():
    before = T.counts()
    T.configure([1, 2])
    yield
    T.configure(before)


def test_report_ratios_and_machine_scaling(two_counts, capsys):
    out = T.report([_result("ember.compile@1t", 0.012), _result("ember.compile@2t", 0.008)], "compile")
    assert out["mlp_b512_sgd/ember.compile@1t"]["vs_1t"] == pytest.approx(1.0)
    assert out["mlp_b512_sgd/ember.compile@2t"]["vs_1t"] == pytest.approx(1.5)
    text = capsys.readouterr().out
    ratio = out["fma_loop/@2t"]["vs_1t"]
    # two threads sharing a deadline: at least a third of one core's work each second (a whole extra core
    # at most, plus timing slack); the printed line names the figure
    assert 0.3 < ratio < 2.3
    assert f"{ratio:.2f}x the work per second of one thread" in text


def test_report_without_two_thread_runs_measures_nothing(two_counts, capsys):
    out = T.report([_result("ember.compile@1t", 0.012)], "compile")
    assert list(out) == ["mlp_b512_sgd/ember.compile@1t"]
    assert "FMA loop" not in capsys.readouterr().out
