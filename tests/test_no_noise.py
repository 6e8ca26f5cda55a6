"""No noise: NumPy's floating-point warnings never reach the user (torch returns inf/nan silently), the
user's NumPy state and warnings are left alone, and progress bars stay on one line on a terminal and
become one line per epoch (or nothing) in a log."""
import io
import re
import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember._progress import Progress


def _fp_cases():
    z, o, big = ember.zeros(3), ember.ones(3), ember.full((3,), 1e30)
    ninf = ember.full((2, 3), float("-inf"))
    return {
        "log(0)": lambda: ember.log(z),
        "1/0": lambda: o / z,
        "0/0": lambda: z / z,
        "exp overflow": lambda: ember.exp(big),
        "sqrt(-1)": lambda: ember.sqrt(-o),
        "0 ** -1": lambda: z ** -1,
        "rsqrt(0)": lambda: ember.rsqrt(z),
        "overflowing product": lambda: big * big,
        "inf - inf": lambda: ember.full((2,), float("inf")) - ember.full((2,), float("inf")),
        "nan to long": lambda: ember.tensor([float("inf"), float("nan")]).long(),
        "to half": lambda: big.half(),
        "tensor(1e40)": lambda: ember.tensor([1e40]),
        "mean of nothing": lambda: ember.zeros(0).mean(),
        "prod overflow": lambda: big.prod(),
        "cumprod overflow": lambda: ember.cumprod(big, 0),
        "floor_divide by 0": lambda: ember.floor_divide(o, z),
        "atanh(2)": lambda: ember.atanh(ember.full((2,), 2.0)),
        "lgamma(0)": lambda: ember.lgamma(z),
        "logit(1)": lambda: ember.logit(o),
        "sigmoid(-1e5)": lambda: ember.sigmoid(ember.tensor([-1e5])),
        "softplus(1e5)": lambda: F.softplus(ember.tensor([1e5])),
        "softmax of -inf rows": lambda: ember.softmax(ninf, 1),
        "cross_entropy of -inf": lambda: F.cross_entropy(ninf, ember.tensor([0, 1])),
        "layer_norm of inf": lambda: F.layer_norm(ember.full((2, 3), float("inf")), (3,)),
        "bce at 1": lambda: F.binary_cross_entropy(o, o),
        "inf @ 0": lambda: ember.full((2, 2), float("inf")) @ ember.zeros(2, 2),
        "grad of log(0)": lambda: ember.log(ember.zeros(2, requires_grad=True)).sum().backward(),
        "grad of sqrt(0)": lambda: ember.sqrt(ember.zeros(2, requires_grad=True)).sum().backward(),
        "grad of norm(0)": lambda: ember.zeros(2, requires_grad=True).norm().backward(),
        "x[0] = 1e6 in half": lambda: ember.zeros(2, dtype=ember.half).__setitem__(0, 1e6),
        "x[[0]] = 1e6 in half": lambda: ember.zeros(2, dtype=ember.half).__setitem__([0], 1e6),
        "print inf": lambda: str(ember.tensor([float("inf"), float("nan"), 1e30])),
    }


CASES = _fp_cases()


@pytest.mark.parametrize("action", ["always", "error", "default"])
def test_fp_warnings_never_reach_the_user(action):
    """Under any filter the user sets (pytest's ``-W error``, ``simplefilter("always")``), ember's kernels
    emit no floating-point RuntimeWarning, as torch emits none for the same calls."""
    before = np.geterr()
    leaked = {}
    for name, fn in CASES.items():
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter(action)
            try:
                fn()
            except RuntimeWarning as e:  # "error" turns a warning into this exception
                leaked[name] = str(e)
                continue
        fp = [str(x.message) for x in w if issubclass(x.category, RuntimeWarning)]
        if fp:
            leaked[name] = fp
    assert not leaked, leaked
    assert np.geterr() == before  # the user's NumPy error state is never changed


def test_values_are_torchs():
    assert ember.log(ember.zeros(1)).item() == float("-inf")
    assert np.isnan(ember.zeros(0).mean().item())
    assert ember.tensor([1e40]).item() == float("inf")
    assert ember.exp(ember.tensor([1000.0])).item() == float("inf")


def test_users_own_numpy_warnings_are_untouched():
    """Only warnings from ember's frames are filtered: the user's NumPy code warns as before, and
    ember's filter goes back in front without removing the user's."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ember.log(ember.zeros(1))            # puts ember's filter back in front inside this block
        np.log(np.zeros(1))                  # the user's own call still warns
        ember.log(ember.zeros(1))
    msgs = [str(x.message) for x in w]
    assert msgs == ["divide by zero encountered in log"], msgs
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ember.sqrt(-ember.ones(1))
        with pytest.raises(RuntimeWarning):
            np.sqrt(-np.ones(1))


def test_filters_restored_after_catch_warnings():
    """ember's reinstated filter lives in the block's copy of the filter list; outside it, the user's
    list is as it was."""
    outer = list(warnings.filters)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ember.log(ember.zeros(1))
    assert warnings.filters == outer


class _FakeTTY(io.StringIO):
    def isatty(self):
        return True


def _segments(text):
    return [s for s in re.split(r"[\r\n]", text) if s]


def test_progress_bar_is_one_line_on_a_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "50")
    out = _FakeTTY()
    with Progress(200, "  a long description", file=out) as bar:
        for i in range(200):
            bar.update(1, f"loss={i / 7:.6f} and a postfix much longer than the terminal is wide")
    text = out.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n")  # the bar's line ends once, at close
    assert max(len(s) for s in _segments(text)) <= 49
    assert "200/200" in text


def test_demo_training_progress_on_a_terminal_and_in_a_log(monkeypatch, capsys):
    pytest.importorskip("sklearn", reason="scikit-learn provides the bundled digits data set")
    pytest.importorskip("tqdm")
    from ember import demo
    data = demo.load_digits()
    monkeypatch.setenv("COLUMNS", "60")
    tty = _FakeTTY()
    monkeypatch.setattr("sys.stdout", tty)
    ember.manual_seed(0)
    demo.train(demo.MLP(hidden=16), data, epochs=2)
    text = tty.getvalue()
    assert text.count("\n") == 1 and max(len(s) for s in _segments(text)) <= 59 and "loss=" in text
    monkeypatch.undo()
    capsys.readouterr()
    ember.manual_seed(0)
    demo.train(demo.MLP(hidden=16), data, epochs=3)  # stdout captured: not a terminal
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split(" epoch ")[1].split()[0] for ln in lines] == ["1/3", "2/3", "3/3"], lines
    assert all("\r" not in ln and "loss" in ln for ln in lines)


def test_bench_progress_is_silent_in_a_log():
    log = io.StringIO()
    with Progress(5, "bench", unit="case", per_epoch=False, file=log) as bar:
        for i in range(5):
            bar.update(0, f"suite/case{i}")
            bar.update(1)
            bar.epoch_end(i, 5)
    assert log.getvalue() == ""
    forced = io.StringIO()
    with Progress(3, "bench", unit="case", per_epoch=False, file=forced, force=True) as bar:
        for i in range(3):
            bar.update(1)
    assert "3/3" in forced.getvalue()
