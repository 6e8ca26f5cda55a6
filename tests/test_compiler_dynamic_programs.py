"""The training steps of the sequence programs in examples/compat (char LSTM, text GRU, CTC speech, policy
gradient) under ember.compile with a length that changes every call: no eager fallbacks, losses and
gradients equal to eager. A Python loop over time steps (the RNN layers, CTC's recursion) unrolls, so
those compile once per length (as torch's dynamo does); a step without one goes dynamic after one
recompile and replays every further length."""
import numpy as np
import pytest
import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.compiler import counters
from compile_support import _reset, _close  # noqa: F401

LENGTHS = (5, 7, 9, 11)


def _run(step, params, make):
    cstep = ember.compile(step)
    for T in LENGTHS:
        args = make(T)
        for p in params:
            p.grad = None
        eager = step(*args)
        eager.backward()
        want = [p.grad.numpy().copy() for p in params]
        for p in params:
            p.grad = None
        got = cstep(*args)
        got.backward()
        _close(got, eager, f"loss at length {T}", rtol=1e-4, atol=1e-5)
        for p, w in zip(params, want):
            _close(p.grad, w, f"grad at length {T}", rtol=1e-4, atol=1e-5)
    assert counters["fallbacks"] == 0, counters["fallback_reasons"]


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_rnn_step_no_fallback(kind):
    ember.manual_seed(0)
    rnn = (nn.LSTM if kind == "lstm" else nn.GRU)(4, 8, batch_first=True)
    head = nn.Linear(8, 5)

    def step(x, y):
        out, _ = rnn(x)
        return F.cross_entropy(head(out).reshape(-1, 5), y.reshape(-1))

    _run(step, list(rnn.parameters()) + list(head.parameters()),
         lambda T: (ember.randn(2, T, 4), ember.randint(0, 5, (2, T))))
    assert counters["captures"] <= len(LENGTHS)


def test_ctc_step_no_fallback():
    ember.manual_seed(0)
    proj = nn.Linear(6, 5)

    def step(x, tg, il, tl):
        return F.ctc_loss(proj(x).log_softmax(-1), tg, il, tl)

    _run(step, list(proj.parameters()),
         lambda T: (ember.randn(T, 2, 6), ember.randint(1, 5, (2, 3)), ember.tensor([T, T - 1]),
                    ember.tensor([3, 2])))
    assert counters["captures"] <= len(LENGTHS)


def test_policy_gradient_episode_lengths_compile_at_most_twice():
    ember.manual_seed(0)
    policy = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))

    def step(obs, actions, returns):
        logp = F.log_softmax(policy(obs), -1).gather(1, actions[:, None])[:, 0]
        ret = (returns - returns.mean()) / (returns.std() + 1e-8)
        return -(logp * ret).sum() / obs.shape[0]

    _run(step, list(policy.parameters()),
         lambda T: (ember.randn(T, 4), ember.randint(0, 2, (T,)), ember.randn(T)))
    assert counters["captures"] <= 2, counters["recompile_reasons"]
