"""Real PyTorch-style programs (examples/compat/*.py) run under torch and under ember.

Each program is written once as ``run(torch, nn, F, init=None, deterministic=False, ...)``. The
comparison runs both libraries with ``deterministic=True`` (no shuffling, dropout off, library-RNG
draws replaced by NumPy draws where they would change the numbers) and with ember starting from
torch's initial weights (``init``), so the training losses must agree step by step: the first steps
tightly, the rest within a looser bound that allows float32 rounding to compound. Every other
returned quantity is compared as listed in ``SPECS``. A second set of runs checks that ember also
trains with the random paths switched on (shuffling, dropout, sampling, random_split, workers,
autocast), where the two libraries' random streams differ and only the learning is comparable.
"""
import importlib
import math
import os
import sys
import warnings

import numpy as np
import pytest
import torch
import ember


HERE = os.path.dirname(os.path.abspath(__file__))
COMPAT = os.path.join(os.path.dirname(HERE), "examples", "compat")
if COMPAT not in sys.path:
    sys.path.insert(0, COMPAT)

from _common import load_lib  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """One BLAS / torch thread: these programs multiply small matrices, where a second thread only adds
    contention (on a loaded 2-core machine multi-threaded small GEMMs run ~50x slower)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        import threadpoolctl
        limiter = threadpoolctl.threadpool_limits(limits=1, user_api="blas")
    except ImportError:
        limiter = None
    yield
    torch.set_num_threads(n)
    if limiter is not None:
        limiter.restore_original_limits()


# program -> (tight steps, loose rtol/atol for the remaining losses, {key: how to compare})
#   "close": np.allclose(rtol=1e-3, atol=1e-4)   "equal": ==   "loose": allclose(rtol=5e-2, atol=5e-3)
SPECS = {
    "digits_cnn": (10, 1e-3, {"accs": "equal", "resumed": "close", "lr": "close"}),
    "regression_mlp": (10, 1e-3, {"val_losses": "close", "lrs": "equal", "test_mse": "close", "r2": "close"}),
    "char_lstm": (10, 1e-3, {"grad_norms": "close", "ppl": "close"}),
    "mingpt": (10, 1e-3, {"lrs": "close", "acc": "equal", "generated": "equal"}),
    "vae": (10, 1e-3, {"klds": "close", "recon_err": "close"}),
    "diffusion_unet": (10, 1e-3, {"lrs": "close", "sample_mean": "close"}),
    "llama_block": (10, 1e-3, {"lrs": "close", "generated": "equal", "ema_norm": "close"}),
    "hf_gpt2": (10, 1e-3, {"lrs": "close", "generated": "equal", "cached_same": "equal", "reload_same": "equal",
                           "missing": "equal", "buffers": "equal"}),
    "audio_spectrogram": (10, 5e-3, {"acc": "close", "channels_last": "equal", "amp_dtypes": "equal"}),
    "gan_2d": (10, 1e-3, {"g_losses": "close", "radius": "close"}),
    "seq2seq_transformer": (10, 1e-3, {"decoded": "equal"}),
    "resnet_small": (8, 5e-3, {"lrs": "close", "running_mean": "loose", "running_var": "loose"}),
    "gnn": (10, 1e-3, {"val_accs": "equal"}),
    "gcn_sparse": (10, 1e-3, {"edge_losses": "close", "accs": "equal", "sym_err": "close", "reload_same": "equal",
                              "same_product": "close", "nnz": "equal", "deg": "equal", "edge_grad_norm": "close"}),
    "idioms": (10, 1e-3, {"acc": "equal", "same_after_reload": "equal", "trainable": "equal", "stats": "equal"}),
    "text_gru": (10, 1e-3, {"lrs": "close", "confusion": "equal"}),
    "pinn_autograd": (10, 1e-3, {"ste": "equal", "gp": "close", "gp_grad_ok": "equal", "hooks": "equal",
                                 "jac": "close", "err": "loose"}),
    "tabular_binary": (10, 1e-3, {"lrs": "close", "acc": "equal", "auc": "close", "hist": "equal", "edges": "close"}),
    "contrastive_amp": (10, 1e-3, {"probe_loss": "loose", "acc": "equal"}),
    "policy_gradient": (10, 1e-3, {"lengths": "equal", "kls": "loose", "ref": "close"}),
    "legacy_style": (10, 1e-3, {"correct": "equal", "summed": "close", "per_sample": "close", "shapes": "equal",
                                "grads": "close", "first": "close", "dout": "close"}),
    "unet_segmentation": (10, 1e-3, {"iou": "close", "patches": "equal", "roundtrip": "equal"}),
    "timeseries_attention": (9, 1e-3, {"errs": "close", "wn_params": "equal"}),
    "metric_learning": (10, 1e-3, {"parts": "close", "recall1": "equal", "recall5": "equal"}),
    "custom_optim": (10, 1e-3, {"per_model": "close", "lrs": "close", "same_state": "equal", "sharp": "loose",
                                "n_groups": "equal"}),
    "module_api": (10, 1e-3, {"repr": "equal", "info": "equal", "outer": "close"}),
    "data_pipeline": (10, 1e-3, {"collated": "equal", "n_chain": "equal", "n_batches": "equal", "acc": "equal",
                                 "stream_seen": "equal"}),
    "numerics": (10, 1e-3, {"kmeans_counts": "equal", "kmeans_inertia": "close", "explained": "close",
                            "proj_var": "close", "ridge": "close", "lstsq_vs_pinv": "equal", "gp_logdet": "close",
                            "gp_det_inv": "close", "newton_w": "close", "laplacian_evals": "close",
                            "n_components": "equal", "matrix_exp": "close", "matrix_power": "close"}),
    "ctc_speech": (10, 1e-3, {"cer": "equal", "decoded": "equal"}),
    "lbfgs_timeseries": (12, 1e-6, {"step_losses": "close", "test_loss": "close", "future": "close", "dtype": "equal",
                                    "n_evals": "equal", "state_keys": "equal"}),
    "makemore_rnn": (10, 1e-3, {"evals": "close", "samples": "equal"}),
    "word_lm": (10, 1e-3, {"ppl": "close", "tied": "equal", "lrs": "equal"}),
    "cifar_resnet": (4, 5e-3, {"lrs": "close", "accs": "loose", "running_mean": "loose", "running_var": "loose",
                               "num_batches": "equal"}),
    "whole_model_io": (10, 1e-3, {"same_whole": "equal", "same_safe": "equal", "refused": "equal", "ref": "close",
                                  "stats": "equal", "running_mean": "close"}),
    "tensorboard_logging": (10, 1e-3, {"scalars": "close", "steps": "equal", "hist_counts": "equal", "hist_sums": "loose",
                                       "image_size": "equal", "n_digit_images": "equal", "has_text": "equal",
                                       "curve_runs": "equal", "val_curve": "close", "n_hparam_runs": "equal",
                                       "log_dir_named": "equal"}),
    "onnx_export": (10, 1e-3, {"names": "equal", "matches": "equal", "onnx_out": "loose"}),
    "dcgan": (10, 1e-3, {"g_losses": "close", "d_x": "close", "sample_mean": "close", "grid_shape": "equal",
                         "grid_dtype": "equal"}),
    "style_superres": (10, 1e-3, {"sr_losses": "close", "psnr": "close", "parts": "close", "img_sum": "loose"}),
    "dqn": (10, 1e-3, {"lengths": "equal", "returns": "equal", "greedy": "equal", "q": "close"}),
    "mixup_classifier": (10, 1e-3, {"lrs": "close", "val": "close", "plateau_lrs": "close", "missing": "equal",
                                    "unexpected": "equal"}),
    "flows_mdn": (10, 1e-3, {"mdn_losses": "close", "sample_stats": "close", "mdn_mean": "close", "mdn_var": "close",
                             "checks": "close"}),
    "siamese_tabular": (10, 1e-3, {"tab_losses": "close", "pair_acc": "equal", "val_acc": "equal", "cos": "close"}),
    "seq2seq_attention": (10, 1e-3, {"greedy": "equal", "beam_seqs": "equal", "beam_scores": "close",
                                     "attn_sum": "close", "exact": "equal"}),
    "ode_physics": (10, 1e-6, {"params": "close", "newton_iters": "equal", "implicit_end": "close", "evals": "close",
                               "vjp": "close", "jvp": "close", "per_sample": "close", "norms": "close",
                               "drift": "close"}),
    "prune_deploy": (10, 1e-3, {"sparsity": "equal", "mask_names": "equal", "acc": "equal", "profiled": "equal",
                                "ref_out": "close", "fused_out": "close"}),
    "meta_materialize": (10, 1e-3, {"accs": "equal", "meta_report": "equal", "meta_out": "equal", "conv_cl": "equal",
                                    "same_copy": "equal", "layout": "equal", "x_mean": "close", "x_bicubic": "close",
                                    "copy_is_meta": "equal"}),
    "orthogonal_rnn": (10, 1e-3, {"keys": "equal", "orth_ok": "equal", "sym_err": "close", "same_after_remove": "equal",
                                  "plain_class": "equal", "pred": "close"}),
    "glow_lu_flow": (10, 1e-3, {"recon_ok": "equal", "inv_ok": "equal", "checks": "close"}),
    "bayes_sparse_regression": (10, 1e-3, {"w_mean": "close", "small": "equal", "s2": "close", "spread": "close"}),
    "vi_gamma": (10, 1e-3, {"rate_err": "close", "dir_err": "close", "cdf": "close", "same_cdf": "close",
                            "means": "close"}),
    "gcn_csr": (10, 1e-3, {"sgc_losses": "close", "accs": "equal", "degrees": "equal", "same_as_dense": "close",
                           "two_hop_nnz": "equal", "reload_same": "equal", "layouts": "equal",
                           "w_grad_norm": "close"}),
}

# per-program keyword arguments for the torch side only: torch.compile's inductor backend spends ~70 s
# generating code for mixup_classifier, so torch runs it through its "eager" backend (ember compiles).
TORCH_KW = {"mixup_classifier": {"compile_backend": "eager"}}


def _quiet(*args, **kwargs):
    pass


def _run(name, lib, **kw):
    mod = importlib.import_module(name)
    # torch.compile turns torch.distributions' argument validation off for the whole process on its first
    # call (torch._dynamo.eval_frame); restore it so later tests see torch's default
    # and the backend flags a program sets (mixup_classifier: cudnn.deterministic) go back for both libraries
    validate = torch.distributions.Distribution._validate_args
    flags = [(m.backends.cudnn, a, getattr(m.backends.cudnn, a)) for m in (torch, ember) for a in _CUDNN_FLAGS]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return mod.run(*load_lib(lib), log=_quiet, **kw)
    finally:
        torch.distributions.Distribution.set_default_validate_args(validate)
        for ns, a, v in flags:
            setattr(ns, a, v)


_CUDNN_FLAGS = ("enabled", "benchmark", "deterministic", "allow_tf32")


def _compare(key, a, b, how):
    if how == "equal":
        assert a == b, f"{key}: torch {a!r} != ember {b!r}"
        return
    if isinstance(a, dict):
        assert a.keys() == b.keys(), key
        for k in a:
            _compare(f"{key}.{k}", a[k], b[k], how)
        return
    rtol, atol = (1e-3, 1e-4) if how == "close" else (5e-2, 5e-3)
    if isinstance(a, (list, tuple)) and a and isinstance(a[0], (list, tuple)) and len({len(x) for x in a}) > 1:
        assert len(a) == len(b), f"{key}: lengths {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):      # ragged: compare row by row
            _compare(f"{key}[{i}]", x, y, how)
        return
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert a.shape == b.shape, f"{key}: shapes {a.shape} vs {b.shape}"
    assert np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True), \
        f"{key}: max abs diff {np.nanmax(np.abs(a - b))}\n torch {a}\n ember {b}"


@pytest.mark.parametrize("name", sorted(SPECS))
def test_program_tracks_torch(name):
    tight, loose, keys = SPECS[name]
    ref = _run(name, "torch", deterministic=True, **TORCH_KW.get(name, {}))
    out = _run(name, "ember", deterministic=True, init=ref["init"])
    la, lb = np.asarray(ref["losses"]), np.asarray(out["losses"])
    assert la.shape == lb.shape, f"{len(la)} torch steps vs {len(lb)} ember steps"
    assert np.all(np.isfinite(lb))
    assert np.allclose(la[:tight], lb[:tight], rtol=1e-4, atol=1e-5), \
        f"first steps differ: max {np.abs(la[:tight] - lb[:tight]).max()}\n torch {la[:tight]}\n ember {lb[:tight]}"
    assert np.allclose(la, lb, rtol=loose, atol=loose), \
        f"losses drift apart: max {np.abs(la - lb).max()}\n torch {la}\n ember {lb}"
    missing = set(ref) - set(out)
    assert not missing, f"ember run did not return {missing}"
    for key, how in keys.items():
        _compare(key, ref[key], out[key], how)


def _learns(losses, frac=0.9):
    """The mean loss over the last third is below ``frac`` times the mean over the first third."""
    n = max(1, len(losses) // 3)
    return np.mean(losses[-n:]) < frac * np.mean(losses[:n])


# programs whose random paths are worth running under ember on their own: name -> (run kwargs, required
# ratio of the last third's mean loss to the first third's)
RANDOM_RUNS = {"digits_cnn": ({}, 0.9), "char_lstm": ({}, 0.9), "mingpt": ({}, 0.9), "vae": ({}, 0.9),
               "regression_mlp": ({}, 0.9), "text_gru": ({}, 0.9), "contrastive_amp": ({}, 0.9),
               "tabular_binary": ({}, 0.9), "idioms": ({}, 0.9), "seq2seq_transformer": ({}, 0.9),
               "resnet_small": ({"epochs": 4}, 0.95), "gnn": ({}, 0.9), "gcn_sparse": ({}, 0.9), "pinn_autograd": ({}, 0.9),
               "unet_segmentation": ({}, 0.9), "legacy_style": ({}, 0.9), "data_pipeline": ({}, 0.9),
               "timeseries_attention": ({}, 0.95), "metric_learning": ({}, 0.97),
               "makemore_rnn": ({}, 0.9), "cifar_resnet": ({"epochs": 4}, 0.95),
               "style_superres": ({}, 0.95), "mixup_classifier": ({}, 0.95), "flows_mdn": ({}, 0.97),
               "siamese_tabular": ({}, 0.9), "seq2seq_attention": ({}, 0.9), "prune_deploy": ({}, 0.9),
               "meta_materialize": ({}, 0.9), "orthogonal_rnn": ({}, 0.9), "glow_lu_flow": ({}, 0.9),
               "vi_gamma": ({}, 0.9), "bayes_sparse_regression": ({}, 0.9), "gcn_csr": ({}, 0.9), "llama_block": ({}, 0.9), "hf_gpt2": ({}, 0.9),
               "audio_spectrogram": ({}, 0.95), "diffusion_unet": ({}, 0.9)}


@pytest.mark.parametrize("name", sorted(RANDOM_RUNS))
def test_program_trains_with_randomness(name):
    kwargs, frac = RANDOM_RUNS[name]
    out = _run(name, "ember", deterministic=False, **kwargs)
    losses = np.asarray(out["losses"])
    assert np.all(np.isfinite(losses))
    assert _learns(losses, frac), f"{name} did not learn: {losses}"


def test_random_paths_differ_between_runs_but_learn():
    """char_lstm's sample text comes from multinomial draws: two seeds give different text, both
    made of the training alphabet."""
    a = _run("char_lstm", "ember", deterministic=False, steps=5)
    from char_lstm import TEXT
    assert set(a["sample"]) <= set(TEXT)
    assert len(a["sample"]) == 44


def test_policy_gradient_samples_actions():
    out = _run("policy_gradient", "ember", deterministic=False, episodes=4)
    assert all(1 <= n <= 200 for n in out["lengths"])
    assert all(math.isfinite(k) and k >= -1e-6 for k in out["kls"])
