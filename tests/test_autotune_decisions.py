"""max-autotune's decision rule (compiler/autotune.py): a variant replaces the default only when faster by
the margin in the median of its per-round ratios to the default *and* in more rounds than chance explains;
variants that differ from the default only in a BLAS setting the program never reaches are not timed as
programs of their own. Speed itself is measured by ``python -m ember.bench autotune``."""
import numpy as np
import pytest

from ember.compiler import autotune


def _rounds(base, ratios):
    return [b * r for b, r in zip(base, ratios)]


BASE = [1.0, 3.0, 1.2, 0.9, 5.0, 1.1, 2.0]         # a loaded machine: round times spread 5x


def test_the_sign_test_tail():
    assert autotune._sign_test_p(7, 7) == pytest.approx(1 / 128)
    assert autotune._sign_test_p(0, 7) == pytest.approx(1.0)
    assert autotune._sign_test_p(6, 7) == pytest.approx(8 / 128)


def test_a_variant_faster_in_every_round_by_the_margin_wins():
    times = {0: BASE, 3: _rounds(BASE, [0.8] * 7)}
    assert autotune.clear_winner(times) == 3


def test_a_median_win_from_a_few_rounds_is_noise():
    # faster by 20% in the median, but in only 4 of 7 rounds: chance does that half the time
    times = {0: BASE, 2: _rounds(BASE, [0.8, 0.8, 0.8, 0.8, 1.3, 1.4, 1.2])}
    assert autotune.clear_winner(times) == 0


def test_a_win_below_the_margin_keeps_the_default():
    times = {0: BASE, 1: _rounds(BASE, [0.98] * 7)}
    assert autotune.clear_winner(times) == 0


def test_of_two_clear_winners_the_faster_one():
    times = {0: BASE, 1: _rounds(BASE, [0.9] * 7), 4: _rounds(BASE, [0.7] * 7), 5: _rounds(BASE, [1.2] * 7)}
    assert autotune.clear_winner(times) == 4


def test_more_rounds_let_a_steady_but_not_unanimous_win_count():
    n = 41
    rng = np.random.default_rng(0)
    base = list(rng.uniform(1.0, 5.0, n))
    ratios = [0.85] * 33 + [1.1] * 8              # faster in 33 of 41 rounds: p ~ 5e-5
    assert autotune.clear_winner({0: base, 6: _rounds(base, ratios)}) == 6
    assert autotune.clear_winner({0: base, 6: _rounds(base, ratios[:5] + [1.1] * 36)}) == 0


def test_a_blas_thread_count_behind_embers_gemm_is_the_same_program():
    def src(threads, direct):
        lines = ["#define cblas_sgemm scipy_cblas_sgemm",
                 "static void kern0(float *p0, float *p1, float *p2) {",
                 "  EM_SGEMM_NT_OR(cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 64, 256, 784, 1.0f, p0, 784, "
                 "p1, 784, 0.0f, p2, 256), 1L, 0, 1, 64L, 256L, 784L, p0, 784L, 0L, p1, 784L, 0L, p2, 256L, 16384L);"]
        if direct:
            lines.append("  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 4, 4, 4, 1.0f, p0, 4, p1, 4, 0.0f, p2, 4);")
        lines += ["}", "void entry(void) {", f"  openblas_set_num_threads({threads});", "}"]
        return "\n".join(lines)
    eff = autotune._effective_source
    assert eff(src(1, False)) == eff(src(2, False))
    assert eff(src(1, True)) != eff(src(2, True))      # a direct BLAS call: the count matters
    assert eff(src(1, True)) == src(1, True)


def test_a_program_counts_once_towards_the_learned_defaults(tmp_path, monkeypatch):
    """A tuned program's choice, read back from the cache by later processes, is one win, not one per
    process; a program tuned again counts with its latest choice."""
    from ember.compiler.render_c import Options
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    never = Options(**dict(parallel_min=1 << 62))
    for _ in range(3):
        autotune.record_choice(never, "prog-a")
    assert autotune.learned_defaults() == {}                  # one program: not enough
    autotune.record_choice(never, "prog-b")
    assert autotune.learned_defaults() == dict(parallel_min=1 << 62)
    autotune.record_choice(Options(), "prog-b")               # prog-b tuned again: the default won
    autotune.record_choice(Options(), "prog-c")
    assert autotune.learned_defaults() == {}
