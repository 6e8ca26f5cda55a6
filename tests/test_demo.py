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


def test_device_demo_matches_cpu_training_and_summarises_the_profile(capsys):
    pytest.importorskip("sklearn", reason="scikit-learn provides the bundled digits data set")
    from ember.devices import opencl
    if not opencl.is_available():
        assert demo.device_demo(demo.load_digits(), epochs=1, progress=False) is None
        assert "skipped" in capsys.readouterr().out
        pytest.skip(f"no OpenCL platform: {opencl.unavailable_reason()}")
    import ember
    data = demo.load_digits()
    ember.manual_seed(0)
    cpu_acc = demo.train(demo.MLP(), data, epochs=2, progress=False)
    res = demo.device_demo(data, epochs=2, cpu_accuracy=cpu_acc, progress=False)
    n_test = len(data[3])
    # the same weights and batches as on the CPU: the same accuracy up to a sample or two of rounding
    assert res["accuracy"] > 0.8 and abs(res["accuracy"] - cpu_acc) <= 2.0 / n_test
    s = res["summary"]
    names = [k[0] for k in s["kernels"]]
    assert s["launches"] == sum(k[1] for k in s["kernels"]) > 0 and s["kernel_time_us"] > 0
    assert any(n.startswith(("eager_matmul", "eager_linear", "eager_addmm")) for n in names)
    assert [k[2] for k in s["kernels"]] == sorted((k[2] for k in s["kernels"]), reverse=True)
    copies = {c[0]: c for c in s["copies"]}
    x_train, y_train = data[0], data[1]
    moved = 2 * (x_train.numpy().nbytes + y_train.numpy().nbytes)          # every batch, both epochs
    assert copies["HtoD"][2] >= moved and copies["DtoH"][1] > 0
    assert all(count > 0 and reason for op, count, reason in s["fallbacks"])
    out = capsys.readouterr().out
    assert f"(CPU: {cpu_acc * 100:.1f}%)" in out and "device kernels:" in out and "copies HtoD" in out
