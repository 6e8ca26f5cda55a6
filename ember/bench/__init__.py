"""``python -m ember.bench [suite ...]``: ember against torch, interleaved in one process.

Suites are modules in this package exposing ``cases() -> list[harness.Case]``:

- ``overhead``: what one op call costs from Python (eager dispatch, autograd recording, deep graphs);
- ``train``: training steps of an MLP (batch 64/512) and a small CNN with SGD and Adam, and of the small
  GPT (batch 16) with AdamW;
- ``eager``: the GPT step's exp-bound ops (gelu, softmax, layer_norm, cross_entropy) forward and
  forward+backward at its shapes, with ember's native eager kernels and without them;
- ``compile``: whole training steps (MLP, small GPT) under ``ember.compile`` against ember eager, torch
  and ``torch.compile``, plus the time to the first compiled step with a cold and a warm kernel cache.
- ``distributed``: ``ember.distributed`` in processes started by mpiexec: all-reduce bandwidth by
  message size, and MLP/GPT training steps/s on 1 and 2 processes with the share of the gradient
  all-reduce hidden behind backward (such a suite exposes ``results(repeat, name_filter, threads)``
  instead of cases).
- ``device``: the OpenCL device eager: per-op launch overhead, host<->device copy bandwidth, and MLP,
  CNN and small GPT training steps on the device against ember on the CPU and torch, with the CPU
  fallbacks, kernel launches and copies per step (``--quick``: small sizes, for CI).
- ``custom_kernels``: a Softshrink custom op with a hand-written OpenCL kernel against the same op
  falling back to the CPU (one op forward+backward, and MLP training steps on the device).
- ``gemm``: ember's float32 GEMM in GFLOP/s on the training steps' shapes, per thread count, against the
  FMA peak measured on this machine and NumPy's BLAS.
- ``autotune``: the compile suite's steps under the default ``ember.compile`` and ``mode="max-autotune"``
  (each on a fresh kernel cache), with the variant tuning chose per program.

A suite may also expose ``report(results) -> dict``: called after the results table to print more
(``compile`` prints speed-ups and first-step times); what it returns is saved by ``--json``.

``--json out.json`` saves results with machine and version information; ``--plot vs.png`` draws ember
against torch per case; ``compare old.json new.json --plot rel.png`` prints and plots relative
performance ((new/old)^-1 per benchmark, > 1 is faster).
"""
SUITES = ["overhead", "train", "eager", "compile", "distributed", "device", "custom_kernels", "gemm", "autotune"]
