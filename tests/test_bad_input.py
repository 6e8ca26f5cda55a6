"""Bad input gets torch's answer: a table of calls with wrong dtypes, mismatched shapes, out-of-range dims
and indices, NaN/inf arguments, empty tensors, negative and non-integer sizes and wrong argument types.

Each row is ``fn(m)`` with ``m`` either ``torch`` or ``ember``. A row matches when both libraries raise and
ember's exception is an instance of the builtin class torch's exception derives from (and, for torch's own
classes such as ``LinAlgError``, carries the same name), or when both return the same thing (values with
NaN positions, shapes, dtypes; sequences of tensors element by element). In-place rows built with
``inplace`` also require that a failing call leaves its tensor untouched.

Only the rows named in ``KNOWN_DIFFERENCES`` may differ, and each of them must still differ, so the list
stays honest. ``test_bad_input_table`` prints the match rate (rows matching / rows).
"""
from __future__ import annotations

import bad_input_rows_linalg_nn  # noqa: F401 - registers its rows
import bad_input_rows_tensor  # noqa: F401 - registers its rows
from bad_input_support import ROWS, run_table


# ---- rows that still differ, with the reason ------------------------------------------------------------

KNOWN_DIFFERENCES: dict[str, str] = {
    "from_numpy(uint32)": "ember has no uint16/uint32/uint64 dtypes",
    "take_along_dim(oob)": "torch's CPU take_along_dim does not bounds-check this broadcast index and returns "
                           "values from other columns; ember raises an out-of-bounds error",
    "inv_ex(singular)": "for a singular matrix torch returns what LAPACK's getri leaves behind (infs here); "
                        "ember returns NaN (info is the same; the values are undefined either way)",
}


def test_bad_input_table():
    diffs = run_table()
    matched = sum(d is None for d in diffs.values())
    print(f"\nbad-input table: {matched}/{len(diffs)} rows match torch ({100 * matched / len(diffs):.1f}%)")
    new = {k: d for k, d in diffs.items() if d is not None and k not in KNOWN_DIFFERENCES}
    fixed = [k for k in KNOWN_DIFFERENCES if k in diffs and diffs[k] is None]
    stale = [k for k in KNOWN_DIFFERENCES if k not in ROWS]
    msg = [f"{k}: {d}" for k, d in new.items()]
    msg += [f"{k}: now matches torch; drop it from KNOWN_DIFFERENCES" for k in fixed]
    msg += [f"{k}: in KNOWN_DIFFERENCES but not a row" for k in stale]
    assert not msg, f"{len(new)} rows differ from torch, {len(fixed)} known differences now match:\n" + "\n".join(msg)


def test_table_is_large_enough():
    assert len(ROWS) >= 300


if __name__ == "__main__":
    for k, d in run_table().items():
        if d is not None:
            print(f"{k!r}: {d}")
