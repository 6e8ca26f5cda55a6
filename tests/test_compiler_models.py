"""ember.compile on real models: compiled training matches eager training step for step.

The benchmark models (``ember.bench.models``): the MLP with SGD and Adam, and the small GPT with AdamW
(batch 4, context 32), trained for 20 steps compiled and eagerly from the same weights and data, for
backend="aot_eager" and the default backend (native C where the code generator supports the program,
the interpreter otherwise). Also: no eager fallbacks for these models, the default backend really runs
native code (once ``ember.compiler.native`` exists), and a second process compiling the same step loads its kernels from the disk cache.
"""
import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import ember
from ember.bench import models as M
from ember.bench.compile import step_function
from ember.compiler import counters

STEPS = 20
RTOL = 1e-4             # float32: compiled code may reassociate sums, so losses drift by a few ulps
BACKENDS = ["aot_eager", "inductor"]

try:
    import ember.compiler.native as _native      # noqa: F401
    HAVE_NATIVE = True
except ImportError:
    HAVE_NATIVE = False


@pytest.fixture(autouse=True)
def _reset():
    ember.compiler.reset()
    yield
    ember.compiler.reset()


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    # one private kernel cache for this module: tests never write to the user's ~/.cache/ember
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ember-cache"))


# the benchmark's training steps (forward, loss, backward, optimizer step; the loss detached)
mlp_step = step_function(ember, "mlp")
gpt_step = step_function(ember, "gpt")


def _pair(make):
    """Two models with identical weights: one to train compiled, one eagerly."""
    ember.manual_seed(0)
    a = make()
    b = M.copy_weights(a, make(), ember)
    return a, b


def _train_both(step, model, ref, opt_name, batch, backend):
    opt, opt_ref = M.optimizer(ember, opt_name, model.parameters()), M.optimizer(ember, opt_name, ref.parameters())
    cstep = ember.compile(step, backend=backend)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = [cstep(model, opt, *batch).item() for _ in range(STEPS)]
    eager = [step(ref, opt_ref, *batch).item() for _ in range(STEPS)]
    return cstep, np.array(compiled), np.array(eager), caught


def _check(compiled, eager, model, ref, noise=None):
    """Losses agree to RTOL at every step; parameters agree at the end.

    ``noise(name, array) -> (tight, loose)`` splits a parameter into entries compared tightly and entries
    whose gradient is zero in exact arithmetic (rounding noise), which Adam-type optimizers blow up to
    steps of about lr in either direction: those are only checked to stay within 2 * lr * STEPS.
    """
    drift = np.max(np.abs(compiled - eager) / np.abs(eager))
    np.testing.assert_allclose(compiled, eager, rtol=RTOL,
                               err_msg=f"compiled vs eager losses (max relative drift {drift:.2e})")
    assert eager[-1] < eager[0], "the model did not train"
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        a, b = p.detach().numpy(), q.detach().numpy()
        if noise is not None:
            (a, a_loose), (b, b_loose) = noise(name, a), noise(name, b)
            np.testing.assert_allclose(a_loose, b_loose, atol=2 * 3e-4 * STEPS, err_msg=name)
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5, err_msg=name)
    assert counters["fallbacks"] == 0 and counters["fallback_reasons"] == [], counters["fallback_reasons"]
    assert counters["graph_breaks"] == 0
    # the first call finds every .grad None and the optimizer state empty: one retrace after it
    assert counters["captures"] <= 2, counters["recompile_reasons"]


def _key_bias(name, a):
    """The key third of an attention's qkv bias has zero gradient (softmax ignores a shift that is the
    same for every key): AdamW turns its rounding noise into +-lr steps, so it is compared loosely."""
    if name.endswith("attn.qkv.bias"):
        c = a.shape[0] // 3
        return np.concatenate([a[:c], a[2 * c:]]), a[c:2 * c]
    return a, a[:0]


def _native_used(cstep) -> bool:
    return any(getattr(e.runner, "native", None) is not None for e in cstep.entries if e.kind == "compiled")


def _check_native(cstep, backend, caught):
    """The default backend must run these models as generated C, not in the interpreter fallback."""
    if backend != "inductor" or not HAVE_NATIVE:
        return
    failed = [str(w.message) for w in caught if "native" in str(w.message)]
    assert not failed, failed
    assert _native_used(cstep), "the default backend ran the interpreter, not native code"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("opt_name", ["sgd", "adam"])
def test_mlp_training_matches_eager(backend, opt_name):
    model, ref = _pair(lambda: M.mlp(ember))
    batch = M.mlp_batch(ember, 64)
    cstep, compiled, eager, caught = _train_both(mlp_step, model, ref, opt_name, batch, backend)
    _check(compiled, eager, model, ref)
    _check_native(cstep, backend, caught)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gpt_training_matches_eager(backend):
    cfg = M.GPTConfig(block_size=32)
    model, ref = _pair(lambda: M.gpt(ember, cfg))
    assert model.lm_head.weight is model.tok_emb.weight        # tying survives load_state_dict
    batch = M.gpt_batch(ember, batch=4, block_size=32)
    cstep, compiled, eager, caught = _train_both(gpt_step, model, ref, "adamw", batch, backend)
    _check(compiled, eager, model, ref, noise=_key_bias)
    _check_native(cstep, backend, caught)
    assert model.lm_head.weight is model.tok_emb.weight


SCRIPT = textwrap.dedent("""
    import json, sys
    import ember
    from ember.bench import models as M
    from ember.compiler import build, counters

    from ember.bench.compile import step_function
    from ember.compiler.prebuild import support_libraries
    support_libraries()   # (the traced first step runs eagerly: both processes on the same eager kernels)

    step = step_function(ember, "mlp")
    ember.manual_seed(0)
    model = M.mlp(ember)
    opt = M.optimizer(ember, "sgd", model.parameters())
    cstep = ember.compile(step)
    x, y = M.mlp_batch(ember, 64)
    losses = [cstep(model, opt, x, y).item() for _ in range(3)]
    native = any(getattr(e.runner, "native", None) is not None for e in cstep.entries)
    print(json.dumps({"stats": build.STATS, "losses": losses, "native": native,
                      "fallbacks": counters["fallbacks"]}))
""")


@pytest.mark.skipif(not HAVE_NATIVE, reason="ember.compiler.native (the C backend, which writes the disk "
                                            "cache) is not there yet")
def test_second_process_hits_the_disk_cache(tmp_path):
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path / "cache"), OMP_WAIT_POLICY="PASSIVE")

    def run():
        p = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        return json.loads(p.stdout.strip().splitlines()[-1])
    cold = run()
    assert cold["native"], "the MLP step did not compile natively"
    assert cold["stats"]["disk_misses"] >= 1 and cold["stats"]["compiles"] >= 1
    warm = run()
    assert warm["native"] and warm["fallbacks"] == 0
    assert warm["stats"]["compiles"] == 0 and warm["stats"]["disk_misses"] == 0, warm["stats"]
    assert warm["stats"]["disk_hits"] >= 1
    assert warm["losses"] == cold["losses"]            # same kernels, same numbers


def test_demo_compile_section():
    """``make demo``'s compile part: same losses as eager, native code, a warm compile from disk."""
    pytest.importorskip("sklearn", reason="scikit-learn provides the bundled digits data set")
    from ember import demo
    res = demo.compile_demo(demo.load_digits(), epochs=2, hidden=32, verbose=False)
    assert res["max_loss_diff"] < RTOL
    assert res["accuracy"] > 0.5
    assert counters["fallbacks"] == 0
    if HAVE_NATIVE:
        assert res["native"] and res["disk_hits"] >= 1


def test_compile_suite_case_and_report(capsys):
    """``python -m ember.bench compile``'s pieces, ember-only (torch.compile takes too long for a test)."""
    from ember.bench import compile as suite
    from ember.bench.harness import run_case
    from ember.bench import jax_steps
    case = suite.make_case("mlp", 64, "sgd", torch=None)
    # jax.jit joins as a baseline only where JAX is installed (never a dependency of ember)
    assert set(case.variants) == {"ember", "ember.compile"} | ({"jax.jit"} if jax_steps.available() else set())
    results = run_case(case, repeat=2, warmup=1)
    suite._STATE["first_step"] = [{"case": "mlp_b64_sgd", "library": "ember.compile",
                                   "cold": {"first": 0.5, "three": 1.0, "steady": 1e-3, "disk_hits": 0,
                                            "disk_misses": 2},
                                   "warm": {"first": 0.1, "three": 0.2, "steady": 1e-3, "disk_hits": 2,
                                            "disk_misses": 0}}]
    rep = suite.report(results)
    out = capsys.readouterr().out
    assert "mlp_b64_sgd" in out and "cold 1st" in out and "2 loaded, 0 built" in out
    assert rep["speedups"]["mlp_b64_sgd"]["compiled_vs_ember"] > 0
    assert not any("WARNING" in n for n in rep["notes"]), rep["notes"]
