"""``ember.utils.tensorboard``: log scalars, histograms, images, text, hyperparameters and model graphs
for TensorBoard, with ``torch.utils.tensorboard``'s API::

    from ember.utils.tensorboard import SummaryWriter

    with SummaryWriter("runs/exp1") as w:
        for step in range(100):
            w.add_scalar("loss", loss.item(), step)

The event files are written by the ``tensorboard`` package's own writer and protos
(``pip install tensorboard``); this module only builds the summaries. Importing it works without the
package; creating a writer without it raises an ImportError that says what to install.
"""
from .writer import SummaryWriter, FileWriter  # noqa: F401

__all__ = ["SummaryWriter", "FileWriter"]
