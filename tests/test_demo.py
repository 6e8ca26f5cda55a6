"""The demo's pieces, smaller and faster: regression converges; digits training reaches its accuracy."""
import pytest

from ember import demo


def test_regression_loss_falls():
    losses = demo.regression_demo(steps=120, verbose=False)
    assert losses[-1] < 0.05 * losses[0]
    assert losses[-1] < 0.05


def test_digits_mlp_reaches_95_percent_and_checkpoint_roundtrips():
    pytest.importorskip("sklearn", reason="scikit-learn provides the bundled digits data set")
    import ember
    data = demo.load_digits()
    ember.manual_seed(0)
    model = demo.MLP(hidden=64)
    acc = demo.train(model, data, epochs=8, batch_size=64, lr=3e-3, progress=False)
    assert acc > 0.95, f"test accuracy {acc:.3f}"
    assert demo.checkpoint_roundtrip(model, lambda: demo.MLP(hidden=64), data[2])


def test_digits_cnn_learns():
    pytest.importorskip("sklearn", reason="scikit-learn provides the bundled digits data set")
    import ember
    data = demo.load_digits()
    ember.manual_seed(0)
    model = demo.SmallCNN()
    acc = demo.train(model, data, epochs=3, batch_size=64, lr=3e-3, progress=False)
    assert acc > 0.9, f"test accuracy {acc:.3f}"
