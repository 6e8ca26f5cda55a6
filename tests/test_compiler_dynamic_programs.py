"""The training steps of the sequence and RL programs in examples/compat (char_lstm, word_lm, text_gru,
ctc_speech, seq2seq_attention's encoder, policy_gradient, dqn) under ember.compile with a length that
changes every call: no eager fallback, losses and gradients equal to eager (and to torch where the
models are torch's own layers), and at most two compiles: the first call traces the static program,
the second (a new length) the symbolic one, and every further length replays it.

What makes that possible: an nn.RNN/LSTM/GRU layer is one op per layer and direction (``rnn_layer``,
``lstm_layer``, ``gru_layer``, with their ``*_backward`` ops in the ahead-of-time backward) and
``F.ctc_loss`` is one op (``ctc_loss`` / ``ctc_loss_backward``): their time loops run inside their
kernels, never in the traced Python, and each op's shape rule (``OpDef.fake``) gives its outputs'
symbolic shapes. Not covered: a Python loop over time steps in the user's own code (makemore_rnn's
hand-written cells, timeseries_attention's and lbfgs_timeseries' LSTMCell loops, seq2seq_attention's
decoder) unrolls, so each length is its own program, as under torch's dynamo. Packed sequences made
inside the compiled step (text_gru) stay padded there, the lengths a traced tensor the layer ops read
(``nn.utils.rnn._PaddedPackedSequence``); code that reads the packed rows themselves reads the lengths.
"""
import numpy as np
import pytest
import torch

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.compiler import counters
from compile_support import _reset, _close  # noqa: F401

LENGTHS = (5, 7, 9, 11, 6)


def _check_compiles(limit=2):
    """No eager fallback and at most ``limit`` compiles (with 2: the symbolic program was trusted)."""
    assert counters["fallbacks"] == 0, counters["fallback_reasons"]
    if limit <= 2:
        assert counters["dynamic_fallbacks"] == 0, counters["dynamic_fallback_reasons"]
    assert counters["captures"] <= limit, counters["recompile_reasons"]


def _run(step, params, make, lengths=LENGTHS, limit=2, **compile_kw):
    """``step(*make(T))`` eagerly and compiled for each T: same loss and parameter gradients; no fallback
    and at most ``limit`` compiles."""
    cstep = ember.compile(step, **compile_kw)
    for T in lengths:
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
    _check_compiles(limit)


def _against_torch(cstep, step, model, tmodel, arrays, what):
    """The compiled ember step and the torch step (``step(*tensors, torch, tmodel)``) on the same arrays:
    same loss and parameter gradients."""
    got = cstep(*[ember.tensor(a) for a in arrays])
    model.zero_grad(set_to_none=True)
    got.backward()
    want = step(*[torch.tensor(a) for a in arrays], torch, tmodel)
    tmodel.zero_grad(set_to_none=True)
    want.backward()
    _close(got, want.detach().numpy(), f"loss at {what}", rtol=1e-4, atol=1e-5)
    for (name, p), tp in zip(model.named_parameters(), tmodel.parameters()):
        _close(p.grad, tp.grad.numpy(), f"grad of {name} at {what}", rtol=1e-3, atol=1e-5)


def _torch_twin(module, factory):
    """The torch module ``factory()`` with ``module``'s weights."""
    twin = factory()
    twin.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in module.state_dict().items()})
    return twin


# ---- the recurrent language models and classifiers ------------------------------------------------------------

def test_char_lstm_step_compiles_twice_and_matches_torch():
    """char_lstm: Embedding -> 2-layer LSTM (batch_first) -> Linear, next-character cross entropy; the
    compiled loss and gradients also equal torch's at every length."""
    ember.manual_seed(0)
    V, emb, hidden = 12, 8, 16
    parts = nn.ModuleList([nn.Embedding(V, emb), nn.LSTM(emb, hidden, num_layers=2, batch_first=True),
                           nn.Linear(hidden, V)])
    tparts = _torch_twin(parts, lambda: torch.nn.ModuleList([
        torch.nn.Embedding(V, emb), torch.nn.LSTM(emb, hidden, num_layers=2, batch_first=True),
        torch.nn.Linear(hidden, V)]))

    def step(x, y, lib=ember, m=parts):
        out, _ = m[1](m[0](x))
        return lib.nn.functional.cross_entropy(m[2](out).reshape(-1, V), y.reshape(-1))

    cstep = ember.compile(step)
    rng = np.random.default_rng(0)
    for T in LENGTHS:
        _against_torch(cstep, step, parts, tparts, (rng.integers(0, V, (3, T)), rng.integers(0, V, (3, T))),
                       f"length {T}")
    _check_compiles()


def test_word_lm_bptt_windows_with_carried_hidden_state():
    """word_lm: time-major 2-layer LSTM fed the previous window's detached (h, c); the windows have
    different lengths (the corpus' last window is shorter)."""
    ember.manual_seed(0)
    V, ninp, nhid = 20, 8, 8
    enc, rnn, dec = nn.Embedding(V, ninp), nn.LSTM(ninp, nhid, 2), nn.Linear(nhid, V)
    params = list(enc.parameters()) + list(rnn.parameters()) + list(dec.parameters())

    def step(x, y, h, c):
        out, _ = rnn(enc(x), (h, c))
        return F.cross_entropy(dec(out).view(-1, V), y.reshape(-1))

    state = (ember.randn(2, 4, nhid), ember.randn(2, 4, nhid))
    _run(step, params, lambda T: (ember.randint(0, V, (T, 4)), ember.randint(0, V, (T, 4))) + state,
         lengths=(7, 7, 3, 5, 7))


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn"])
def test_rnn_layer_step_no_fallback(kind):
    ember.manual_seed(0)
    layer = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[kind](4, 8, batch_first=True)
    head = nn.Linear(8, 5)

    def step(x, y):
        out, _ = layer(x)
        return F.cross_entropy(head(out).reshape(-1, 5), y.reshape(-1))

    _run(step, list(layer.parameters()) + list(head.parameters()),
         lambda T: (ember.randn(2, T, 4), ember.randint(0, 5, (2, T))))


def _text_batch(rng, B, T, V=20):
    """A padded batch of token rows whose longest is ``T`` long (text_gru's collate) and their lengths."""
    lengths = rng.integers(2, T + 1, B)
    lengths[rng.integers(0, B)] = T
    x = np.zeros((B, T), np.int64)
    for b, n in enumerate(lengths):
        x[b, :n] = rng.integers(1, V, n)
    return ember.tensor(x), ember.tensor(lengths)


def test_text_gru_packed_classifier():
    """text_gru's model as written: pack_padded_sequence(enforce_sorted=False) -> bidirectional GRU ->
    pad_packed_sequence (and its lengths checked against the input's) -> both directions' final states.
    Inside the compiled step the packed batch stays padded (the lengths are a traced tensor), so new
    lengths and a new longest length replay one program."""
    ember.manual_seed(0)
    V, emb, hidden = 20, 8, 12
    embed, gru, fc = nn.Embedding(V, emb, padding_idx=0), nn.GRU(emb, hidden, batch_first=True,
                                                                  bidirectional=True), nn.Linear(2 * hidden, 3)
    params = list(embed.parameters()) + list(gru.parameters()) + list(fc.parameters())
    rnn_utils = nn.utils.rnn
    crit = nn.CrossEntropyLoss(weight=ember.tensor([1.0, 0.5, 2.0]))

    def step(x, lengths, y):
        packed = rnn_utils.pack_padded_sequence(embed(x), lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, h = gru(packed)
        out, out_lens = rnn_utils.pad_packed_sequence(out, batch_first=True)
        assert ember.equal(out_lens, lengths)
        return crit(fc(ember.cat([h[-2], h[-1]], dim=1)), y) + out.pow(2).mean()

    rng = np.random.default_rng(0)
    _run(step, params, lambda T: _text_batch(rng, 6, T) + (ember.randint(0, 3, (6,)),),
         lengths=(5, 7, 7, 9, 11, 6, 9))


@pytest.mark.parametrize("read_rows", [False, True])
def test_packed_lstm_variants_match_eager(read_rows):
    """A sorted packed batch into a 2-layer bidirectional LSTM with initial states, unpacked time-major
    to a fixed total_length; with ``read_rows`` the step also reads the packed rows (``.data``: the eager
    layout, whose shape depends on the lengths' values, so each set of lengths is its own program)."""
    ember.manual_seed(0)
    lstm = nn.LSTM(3, 5, num_layers=2, bidirectional=True)
    rnn_utils = nn.utils.rnn
    h0, c0 = ember.randn(4, 3, 5), ember.randn(4, 3, 5)

    def step(x, lengths):
        packed = rnn_utils.pack_padded_sequence(x, lengths)
        out, (h, c) = lstm(packed, (h0, c0))
        padded, _ = rnn_utils.pad_packed_sequence(out, total_length=14, padding_value=-1.0)
        loss = padded.tanh().sum() + h.pow(2).sum() + c.mean()
        return loss + out.data.sum() if read_rows else loss

    def make(T):
        lengths = ember.tensor(sorted(np.random.default_rng(T).integers(1, T + 1, 3).tolist(), reverse=True))
        return ember.randn(T, 3, 3), lengths

    lengths = (5, 5, 9, 12)
    _run(step, list(lstm.parameters()), make, lengths=lengths, limit=len(lengths) if read_rows else 2)


def test_variants_bidirectional_projection_layers_unbatched():
    """Two bidirectional LSTM layers with projections and initial states, then an unbatched GRU and a
    relu RNN, in one step."""
    ember.manual_seed(0)
    lstm = nn.LSTM(3, 6, num_layers=2, bidirectional=True, proj_size=4)
    gru = nn.GRU(8, 5)
    rnn = nn.RNN(5, 4, nonlinearity="relu", bias=False)
    params = list(lstm.parameters()) + list(gru.parameters()) + list(rnn.parameters())
    h0, c0 = ember.randn(4, 2, 4), ember.randn(4, 2, 6)

    def step(x):
        out, (h, c) = lstm(x, (h0, c0))
        seq, hg = gru(out[:, 0])                     # (T, 8) unbatched
        top, _ = rnn(seq)
        return out.pow(2).mean() + h.sum() + c.mean() + hg.sum() + top.sum()

    _run(step, params, lambda T: (ember.randn(T, 2, 3),))


def test_seq2seq_attention_encoder_over_changing_input_lengths():
    """seq2seq_attention's encoder (Embedding + batch_first GRU) and an attention read-out of its states."""
    ember.manual_seed(0)
    emb, gru, query = nn.Embedding(10, 8), nn.GRU(8, 8, batch_first=True), nn.Linear(8, 8)
    params = list(emb.parameters()) + list(gru.parameters()) + list(query.parameters())

    def step(src):
        outs, hidden = gru(emb(src))
        scores = ember.bmm(query(hidden.transpose(0, 1)), outs.transpose(1, 2))      # (B, 1, T)
        ctx = ember.bmm(F.softmax(scores, -1), outs)
        return (ctx.squeeze(1) - hidden[0]).pow(2).sum()

    _run(step, params, lambda T: (ember.randint(0, 10, (3, T)),))


def test_rnn_layer_fullgraph():
    """fullgraph=True: the layer is one node of the one graph, at every length."""
    ember.manual_seed(0)
    lstm = nn.LSTM(4, 6, batch_first=True, bidirectional=True)

    def step(x):
        out, (h, c) = lstm(x)
        return out.tanh().sum() + h.pow(2).sum()

    _run(step, list(lstm.parameters()), lambda T: (ember.randn(2, T, 4),), fullgraph=True)
    assert counters["graph_breaks"] == 0


def test_explain_names_the_layer_and_ctc_ops():
    lstm = nn.LSTM(4, 6)

    def step(x, tg, il, tl):
        out, _ = lstm(x)
        return F.ctc_loss(out.log_softmax(-1), tg, il, tl)

    rep = ember.compiler.explain(step)(ember.randn(7, 2, 4), ember.tensor([[1, 2], [3, 3]]), ember.tensor([7, 5]),
                                       ember.tensor([2, 1]))
    ops = [op for graph in rep.ops_per_graph for op in graph]
    assert rep.graph_break_count == 0 and "lstm_layer" in ops and "ctc_loss" in ops, ops
    # the native program runs them as extern calls the profiler names like the eager ops
    cstep = ember.compile(step)
    for T in (7, 9, 8, 8):          # (a size seen the second time gets the native build: profile that)
        args = (ember.randn(T, 2, 4), ember.tensor([[1, 2], [3, 3]]), ember.tensor([T, 5]), ember.tensor([2, 1]))
        with ember.profiler.profile() as prof:
            cstep(*args).backward()
    names = {e.key for e in prof.key_averages()}
    assert {"ember::lstm_layer", "ember::ctc_loss", "ember::lstm_layer_backward", "ember::ctc_loss_backward"} <= names, \
        names


# ---- CTC ------------------------------------------------------------------------------------------------------

def test_ctc_padded_targets_no_fallback():
    ember.manual_seed(0)
    proj = nn.Linear(6, 5)

    def step(x, tg, il, tl):
        return F.ctc_loss(proj(x).log_softmax(-1), tg, il, tl)

    _run(step, list(proj.parameters()),
         lambda T: (ember.randn(T, 2, 6), ember.randint(1, 5, (2, 3)), ember.tensor([T, T - 1]),
                    ember.tensor([3, T % 3])))


def test_ctc_speech_step_matches_torch():
    """ctc_speech: Conv1d front end + bidirectional GRU + Linear + log_softmax, CTCLoss(zero_infinity)
    on concatenated targets whose number changes with every batch, and the frame count T too; loss and
    gradients equal torch's."""
    C, hidden = 5, 8
    ember.manual_seed(0)

    def build(lib):
        return lib.nn.ModuleList([lib.nn.Conv1d(C, hidden, 3, padding=1),
                                  lib.nn.GRU(hidden, hidden, batch_first=True, bidirectional=True),
                                  lib.nn.Linear(2 * hidden, C)])
    model = build(ember)
    tmodel = _torch_twin(model, lambda: build(torch))
    ctc = {ember: nn.CTCLoss(blank=0, zero_infinity=True), torch: torch.nn.CTCLoss(blank=0, zero_infinity=True)}

    def step(feats, flat, il, tl, lib=ember, m=model):
        Fn = lib.nn.functional
        h = Fn.relu(m[0](feats.transpose(1, 2))).transpose(1, 2)
        h, _ = m[1](h)
        lp = m[2](h).log_softmax(-1).transpose(0, 1)
        return ctc[lib](lp, flat, il, tl)

    cstep = ember.compile(step)
    rng = np.random.default_rng(1)
    for T in (12, 14, 10, 16, 12):
        N = 4
        tl = rng.integers(1, 5, N)
        il = np.minimum(T, rng.integers(2 * 4, T + 1, N))
        feats = rng.standard_normal((N, T, C)).astype(np.float32)
        _against_torch(cstep, step, model, tmodel, (feats, rng.integers(1, C, tl.sum()), il, tl), f"T={T}")
    _check_compiles()


# ---- RL -------------------------------------------------------------------------------------------------------

def test_policy_gradient_ppo_epochs_over_episodes_of_changing_length():
    """policy_gradient's PPO-clip loss (Categorical policy, value head, smooth L1, entropy bonus) over
    episodes of different lengths."""
    ember.manual_seed(0)
    body, pi, v = nn.Sequential(nn.Linear(4, 16), nn.Tanh()), nn.Linear(16, 2), nn.Linear(16, 1)
    params = list(body.parameters()) + list(pi.parameters()) + list(v.parameters())

    def step(obs, act, returns, old_logp):
        h = body(obs)
        dist = ember.distributions.Categorical(logits=pi(h))
        values = v(h).squeeze(-1)
        logp = dist.log_prob(act)
        adv = (returns - values).detach()
        ratio = ember.exp(logp - old_logp)
        surr = ember.min(ratio * adv, ember.clamp(ratio, 0.8, 1.2) * adv)
        return -surr.mean() + 0.5 * F.smooth_l1_loss(values, returns) - 0.01 * dist.entropy().mean()

    def make(T):
        ret = ember.randn(T)
        return (ember.randn(T, 4), ember.randint(0, 2, (T,)), (ret - ret.mean()) / (ret.std() + 1e-8),
                ember.randn(T) * 0.1 - 0.7)

    _run(step, params, make, lengths=(12, 30, 9, 41, 17))


def test_dqn_step_with_changing_number_of_final_states():
    """dqn's optimize_model: Q(s, a) by gather, the target network on the non-final next states (their
    number changes from batch to batch) scattered by a boolean mask, Huber loss."""
    ember.manual_seed(0)

    def net():
        return nn.Sequential(nn.Linear(7, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2))
    policy_net, target_net = net(), net()
    criterion = nn.SmoothL1Loss()

    def step(states, actions, rewards, mask, finals):
        q = policy_net(states).gather(1, actions)
        nxt = ember.zeros(16)
        with ember.no_grad():
            nxt[mask] = target_net(finals).max(1).values
        return criterion(q, (nxt * 0.9 + rewards).unsqueeze(1))

    rng = np.random.default_rng(0)

    def make(k):
        mask = np.zeros(16, bool)
        mask[rng.choice(16, k, replace=False)] = True
        return (ember.randn(16, 7), ember.randint(0, 2, (16, 1)), ember.randn(16), ember.tensor(mask),
                ember.randn(k, 7))

    _run(step, list(policy_net.parameters()), make, lengths=(12, 14, 9, 15, 11))


@pytest.mark.parametrize("lengths, enforce_sorted, message", [
    ([3, 0, 2], False, "Length of all samples has to be greater than 0"),
    ([2, 3, 1], True, "must be sorted in decreasing order"),
    ([5, 3, 1], True, "exceeds the padded length"),
])
def test_packed_lengths_checked_under_compile_as_eagerly(lengths, enforce_sorted, message):
    gru = nn.GRU(3, 4)

    def step(x, lens):
        _, h = gru(nn.utils.rnn.pack_padded_sequence(x, lens, enforce_sorted=enforce_sorted))
        return h.sum()

    for fn in (step, ember.compile(step)):
        with pytest.raises(RuntimeError, match=message):
            fn(ember.randn(4, 3, 3), ember.tensor(lengths))
