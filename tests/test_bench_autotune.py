"""The bench's ``autotune`` suite (ember/bench/autotune.py): both variants train the same model from the
same weights to the same losses (tuning never changes results), on a private cache, and the report
names the tuned program's choice. Speed is what the suite measures, never asserted here."""
import os

import numpy as np

from ember.bench import SUITES
from ember.bench import autotune as suite
from ember.bench.harness import run_case


def test_the_suite_compares_the_default_with_max_autotune(tmp_path, monkeypatch):
    assert "autotune" in SUITES
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(suite, "SPECS", [("mlp", 64, "sgd")])
    cases = suite.cases()
    assert os.environ["EMBER_CACHE_DIR"] == str(tmp_path)         # the user's cache is given back
    assert not any(p.name == "autotune" for p in tmp_path.iterdir())  # tuning ran on the suite's own cache
    (case,) = cases
    assert case.name == "mlp_b64_sgd" and set(case.variants) == {"ember.compile", "max-autotune"}
    losses = {k: [float(fn()) for _ in range(3)] for k, fn in case.variants.items()}
    np.testing.assert_allclose(losses["max-autotune"], losses["ember.compile"], rtol=1e-5)
    assert losses["ember.compile"][2] < losses["ember.compile"][0]     # it trains
    results = run_case(case, repeat=2, warmup=0)
    out = suite.report(results)
    row = out["mlp_b64_sgd"]
    assert row["default_ms"] > 0 and row["tuned_ms"] > 0
    (prog, chosen), = row["choices"]
    assert prog == "mlp_step" and isinstance(chosen, dict)
