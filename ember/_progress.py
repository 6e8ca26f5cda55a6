"""Progress display for the demo and the benchmarks: one line that redraws itself on a terminal, one
line per epoch (or nothing) when the output is a file or a pipe.

On a terminal the bar is tqdm's, written to stdout (where the demo's and the benchmark's own lines go,
so they never interleave with it on another stream), fitted to the terminal's width so it never wraps
into a second line, its postfix (loss, case name) cut to fit. Elsewhere a redrawing bar would leave
one line per redraw in the log: the display then prints one summary line per epoch (``epoch_end``),
or stays silent (``per_epoch=False``, the benchmarks' case list).
"""
from __future__ import annotations

import shutil
import sys
import time


class Progress:
    """``Progress(total, desc, unit="step", file=None, per_epoch=True, force=False)``.

    ``update(n, postfix="")`` advances the bar; ``epoch_end(epoch, epochs, **values)`` prints the epoch's
    line when there is no bar (and ``per_epoch``); ``close()`` ends the bar's line. ``force`` shows the
    bar even when ``file`` is not a terminal (the benchmarks' ``--progress``).
    """

    def __init__(self, total: int, desc: str, unit: str = "step", file=None, per_epoch: bool = True,
                 force: bool = False):
        self.file = file if file is not None else sys.stdout
        self.desc = desc
        self.per_epoch = per_epoch
        self.bar = None
        self._t0 = time.perf_counter()
        tty = bool(getattr(self.file, "isatty", lambda: False)())
        if tty or force:
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self.bar = tqdm(total=total, desc=desc, unit=unit, file=self.file, leave=True,
                                ncols=self.width(), dynamic_ncols=False, mininterval=0.2)

    @staticmethod
    def width() -> int:
        """The terminal's width (``COLUMNS`` when set), at most 100 columns, less one so the cursor never wraps."""
        return max(20, min(shutil.get_terminal_size((80, 24)).columns, 100) - 1)

    def update(self, n: int = 1, postfix: str = "") -> None:
        """Advance by ``n`` (0: only show ``postfix``, e.g. the case about to run)."""
        if self.bar is not None:
            if postfix:
                self.bar.set_postfix_str(postfix, refresh=n == 0)
            if n:
                self.bar.update(n)

    def epoch_end(self, epoch: int, epochs: int, **values) -> None:
        """One line ``desc epoch e/E  k v ...  (elapsed)`` when no bar redraws (and ``per_epoch``)."""
        if self.bar is not None or not self.per_epoch:
            return
        shown = "  ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in values.items())
        print(f"{self.desc} epoch {epoch}/{epochs}  {shown}  ({time.perf_counter() - self._t0:.1f}s)",
              file=self.file, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
