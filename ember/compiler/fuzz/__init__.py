"""A compile fuzzer: random small programs run eagerly and through ``ember.compile``, compared.

A :class:`Program` is data: input specs (shape, dtype, requires_grad, index bound, non-contiguous) and a
list of :class:`Step` s, each one Python statement over named values (``v3 = ember.matmul(v1, x2)``, or
an in-place statement ``v3.add_(x4)``). ``program.source()`` is the function as text; running a program
executes that same text, and :func:`repro` prints it as a standalone script, so what fails is exactly
what is printed.

The generator (:func:`generate`) tracks shapes, dtypes, value magnitudes, aliasing and which values are
"exact" (computed only with correctly rounded IEEE operations, so eager and compiled code agree bit for
bit, which is what comparisons, casts to int, floor and argmax may read) while it builds a program, and
runs every step on sample values as it goes, so every program it returns is well typed and runs eagerly
forward and backward. It covers elementwise chains with broadcasting (diamonds included), reductions over
random dims with and without keepdim, views (transpose, permute, slices, select, expand, reshape,
squeeze/unsqueeze, flip, repeat, pad) feeding matmuls, einsum and linear layers (often with an operand the
BLAS cannot read in place), softmax, log_softmax, layer_norm, losses, casts and comparisons, indexing
(index tensors, index_select, gather, embedding, constant index lists, masked_fill, boolean masks),
in-place ops and slice assignment on intermediates and on arguments, graph breaks (a branch on a value,
``float(t)``), float32, float64, int32 and int64, non-contiguous arguments, sizes including 0, 1 and odd
SIMD tails (7, 9, 17, 33), and now and then sizes past the generated code's thresholds (a 1M+
multiply-add float32 GEMM, 64K+ element loops).

:func:`check` runs a program eagerly and compiled on the first call (the capture) and on replays with new
values of the same shapes, computes the gradients of every input that requires grad through a random
cotangent, and compares outputs, gradients and the arguments after the call with a tolerance that
respects the dtype (:func:`compare`: integers and booleans exactly, NaN and inf positions equal, floats
relative to the roughest dtype the value went through, growing with its accumulation length).
:func:`minimise` greedily drops programs of a batch, outputs and steps, turns values into inputs, bypasses
steps, shrinks sizes and drops requires_grad while the program still differs. Command line::

    python -m ember.compiler.fuzz --seed 7 --count 200          # fuzz, print minimised repros
    python -m ember.compiler.fuzz --seed 7 --only 12 --show      # program 12 of seed 7, checked alone
    python -m ember.compiler.fuzz --seed 7 --count 600 --opt=-O0 # more programs per minute

Several programs are compiled together as one function (``batch``): their inputs are disjoint so the
results are independent, and one C build serves them all (the C build dominates the cost). A batch that
differs is split; each differing program is minimised on its own, or the batch when only the batch
differs (a memory-planning bug needs the other programs' temporaries).

It found bug 1 (issue 9): on the tree before the fix (8cdc8ab; fixed in c988420), every one of seeds 0-3
x 90 programs had 1-3 differing batches, minimised to repros such as::

    def f(x2, x3):                         # x2 (2, 2, 2) float32, x3 (2, 2, 2) float32 requiring grad
        v4 = x2.permute(2, 0, 1)
        v5 = x3 @ v4
        v6 = v5.mean(dim=(-3, 1))
        return (v6, )                      # x3.grad wrong from the second call on

    def f(p2_x2, p5_x1, x4, x5):           # x5 (4,) float64 requiring grad
        p2_v3 = p2_x2.expand(5, 4, 7)
        p2_v4 = x5 @ p2_v3
        p5_v3 = p5_x1.permute(2, 0, 1)
        p5_v5 = p5_v3 @ x4
        return (p2_v4, p5_v5, )

(a GEMM operand the BLAS cannot read in place is laid out in an arena buffer; when the backward reads
it, a later temporary of the forward had reused that buffer). Known exclusions (compiled-vs-eager
differences the generator avoids, each with the reason and a repro) are listed in ``EXCLUDED``.

The package: ``harness`` (the inputs and the run, as text shared with the repros), ``program`` (programs as
data), ``values`` and ``generator`` (the generator), ``runner`` (running and comparing), ``minimiser``,
``repro_script`` (the standalone repro), ``driver`` (a fuzz run in batches) and ``__main__`` (the command line).
"""

from __future__ import annotations

from .driver import Stats, fuzz, program_seed
from .generator import EXCLUDED, GenerationError, Generator, generate
from .harness import _H, HARNESS  # noqa: F401  (_H: the executed harness, which tests run programs with)
from .minimiser import minimise
from .program import Program, Step, combine
from .repro_script import repro
from .runner import Result, c_opt_level, check, compare
from .values import FLOATS, INTS, MAX_NUMEL, V

__all__ = ["EXCLUDED", "FLOATS", "HARNESS", "INTS", "MAX_NUMEL", "GenerationError", "Generator", "Program",
           "Result", "Stats", "Step", "V", "c_opt_level", "check", "combine", "compare", "fuzz", "generate",
           "minimise", "program_seed", "repro"]
