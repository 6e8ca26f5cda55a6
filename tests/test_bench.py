"""ember.bench: harness results, --json files, compare tables and plots, and the train suite's work."""
import json

import numpy as np
import pytest

from ember.bench import SUITES
from ember.bench.__main__ import main
from ember.bench.harness import Case, Result, run_case, print_results, save_results, load_results
from ember.bench.plot import compare_files, plot_versus, compare

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _fake(scale):
    out = []
    for name, base in (("add16", 1.2e-6), ("matmul256_fwd_bwd", 9e-4), ("chain10000_bwd", 0.3)):
        unit = "ms" if base > 0.1 else "us"
        out.append(Result(name, "overhead", "ember", [base * scale * f for f in (0.9, 1.0, 1.1)], unit))
        out.append(Result(name, "overhead", "torch", [base * f for f in (0.9, 1.0, 1.1)], unit))
    return out


def test_compare_two_saved_files_prints_table_and_png(tmp_path, capsys):
    old, new, png = tmp_path / "old.json", tmp_path / "new.json", tmp_path / "rel.png"
    save_results(str(old), _fake(2.0))
    save_results(str(new), _fake(1.0))                  # twice as fast
    assert main(["compare", str(old), str(new), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "relative" in out and "overhead/add16" in out and "overhead/chain10000_bwd" in out
    assert "2.00x" in out and "-50.0%" in out
    assert "geometric mean" in out
    data = png.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 5000


def test_compare_relative_is_inverse_time_ratio(tmp_path):
    rows = compare(_fake(1.0), _fake(4.0))
    assert [round(r[3], 6) for r in rows] == [0.25] * 3
    rows = compare(_fake(1.0), _fake(1.0), variant="torch")
    assert [r[3] for r in rows] == [1.0] * 3


def test_compare_without_common_benchmarks(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    save_results(str(a), _fake(1.0))
    save_results(str(b), [Result("other", "train", "ember", [1.0])])
    assert compare_files(str(a), str(b)) == 1
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="not an ember benchmark file"):
        load_results(str(bad))


def test_plot_versus_png(tmp_path):
    png = tmp_path / "vs.png"
    plot_versus(_fake(1.5), str(png))
    assert png.read_bytes().startswith(PNG_MAGIC)
    with pytest.raises(ValueError, match="no case"):
        plot_versus([Result("x", "s", "ember", [1.0])], str(png))


def test_run_case_interleaves_and_reports_rate(capsys):
    calls = []
    case = Case("tiny", "test", {"ember": lambda: calls.append("e"), "torch": lambda: calls.append("t")},
                number=3, unit="us", per="step")
    res = run_case(case, repeat=4, warmup=1)
    assert [r.variant for r in res] == ["ember", "torch"]
    assert all(len(r.samples) == 4 for r in res)
    assert calls.count("e") == calls.count("t") == 1 + 4 * 3
    print_results(res)
    out = capsys.readouterr().out
    assert "step/s" in out and "vs torch" in out


def test_run_saves_json_with_machine_info_and_plot(tmp_path, capsys):
    js, png = tmp_path / "run.json", tmp_path / "run.png"
    assert main(["overhead", "--filter", "add16", "--repeat", "3", "--json", str(js), "--plot", str(png)]) == 0
    doc = json.loads(js.read_text())
    for key in ("python", "numpy", "ember", "torch", "platform", "machine", "cpus", "time"):
        assert key in doc["machine"]
    assert doc["suites"] == ["overhead"]
    names = {(r["name"], r["variant"]) for r in doc["results"]}
    assert ("add16", "ember") in names and ("add16", "torch") in names
    assert all(len(r["samples"]) == 3 and r["median"] > 0 for r in doc["results"])
    assert png.read_bytes().startswith(PNG_MAGIC)
    assert main(["nosuch"]) == 2


def test_suites_listed():
    assert "overhead" in SUITES and "train" in SUITES


@pytest.mark.parametrize("spec", [("mlp", 64, "sgd"), ("mlp", 64, "adam"), ("cnn", 64, "adam"), ("gpt", 2, "adamw")])
def test_train_suite_does_the_same_work_in_both_libraries(spec):
    torch = pytest.importorskip("torch")
    from ember.bench import train
    case = train.make_case(*spec, torch=torch)
    assert case.name == train.case_name(*spec) and case.per == "step"
    steps = case.variants
    for fn in steps.values():
        fn.keep_losses = True
        for _ in range(2):
            fn()
    np.testing.assert_allclose(steps["ember"].losses, steps["torch"].losses, rtol=1e-4, atol=1e-5)
    assert steps["ember"].losses[0] != steps["ember"].losses[-1]      # the optimizer moved the weights


def test_train_suite_cases():
    pytest.importorskip("torch")
    from ember.bench import train
    names = [train.case_name(*s) for s in train.SPECS]
    assert names == ["mlp_b64_sgd", "mlp_b64_adam", "mlp_b512_sgd", "mlp_b512_adam", "cnn_b64_sgd",
                     "cnn_b64_adam", "gpt_b16_adamw"]


def test_eager_suite_cases_run_every_variant():
    pytest.importorskip("torch")
    from ember.bench import eager
    cases = eager.cases()
    assert [c.name for c in cases] == [f"{op}_{k}" for op in eager.OPS for k in ("fwd", "fwd_bwd")]
    for c in cases:
        assert "ember" in c.variants and "torch" in c.variants
        for fn in c.variants.values():
            fn()


def test_device_suite_quick_smoke(tmp_path, capsys):
    from ember.devices import opencl
    from ember.bench import device
    if not opencl.is_available():
        assert device.results(repeat=2, quick=True) == []
        pytest.skip(f"no OpenCL platform: {opencl.unavailable_reason()}")
    assert "device" in SUITES
    res = device.results(repeat=2, name_filter="add_1k", quick=True)
    assert {r.variant for r in res} >= {"ember.opencl", "ember.opencl sync", "cl launch", "ember"}
    assert all(r.name == "add_1k_launch" and r.per == "op" and len(r.samples) == 2 and r.median > 0 for r in res)
    res = device.results(repeat=2, name_filter="64KiB", quick=True)
    assert sorted({(r.name, r.variant) for r in res}) == [("d2h_64KiB", "ember.opencl"), ("d2h_64KiB", "host memcpy"),
                                                          ("h2d_64KiB", "ember.opencl"), ("h2d_64KiB", "host memcpy")]
    bw = device.report(res)["bandwidth_MBps"]
    assert set(bw) == {"h2d_64KiB", "d2h_64KiB"} and all(v["ember.opencl"] > 0 for v in bw.values())
    res = device.results(repeat=2, name_filter="lstm", quick=True)
    assert {(r.name, r.variant) for r in res} >= {("lstm_t8_b4_h16_fwd_bwd", "ember.opencl"),
                                                  ("lstm_t8_b4_h16_fwd_bwd", "ember")}
    assert device.report(res)["rnn"]["lstm_t8_b4_h16_fwd_bwd"]["ember.opencl"] > 0
    js = tmp_path / "device.json"
    assert main(["device", "--quick", "--repeat", "2", "--filter", "mlp", "--json", str(js)]) == 0
    out = capsys.readouterr().out
    assert "device/mlp_b16_sgd_step" in out and "opencl/cpu" in out
    doc = json.loads(js.read_text())
    assert {(r["name"], r["variant"]) for r in doc["results"]} >= {("mlp_b16_sgd_step", "ember.opencl"),
                                                                   ("mlp_b16_sgd_step", "ember")}
    rep = doc["reports"]["device"]
    step = rep["steps"]["mlp_b16_sgd_step"]
    assert step["ms"]["ember.opencl"] > 0 and step["opencl_vs_cpu"] > 0 and step["launches"] > 0
    assert step["fallbacks_total"] == sum(step["fallbacks"].values())
    assert step["copies"]["h2d"]["count"] >= 0 and rep["device"]["compute_units"] >= 1
    assert not [n for n in rep["notes"] if "WARNING" in n]        # device and CPU losses agree
