"""ember.optim: optimizers and learning-rate schedulers with torch's update rules and state layout."""
import importlib as _il
import importlib.util as _ilu

from .optimizer import Optimizer  # noqa: F401
from .sgd import SGD  # noqa: F401
from .adam import Adam  # noqa: F401
from .adamw import AdamW  # noqa: F401

for _name, _cls in [("rmsprop", "RMSprop"), ("adagrad", "Adagrad"), ("adadelta", "Adadelta"),
                    ("lbfgs", "LBFGS"), ("adamax", "Adamax"), ("nadam", "NAdam"), ("radam", "RAdam"),
                    ("asgd", "ASGD"), ("rprop", "Rprop"), ("_adafactor", "Adafactor"),
                    ("sparse_adam", "SparseAdam")]:
    if _ilu.find_spec(f"{__name__}.{_name}") is not None:
        globals()[_cls] = getattr(_il.import_module(f"{__name__}.{_name}"), _cls)
if _ilu.find_spec(f"{__name__}.lr_scheduler") is not None:
    lr_scheduler = _il.import_module(f"{__name__}.lr_scheduler")
if _ilu.find_spec(f"{__name__}.swa_utils") is not None:
    swa_utils = _il.import_module(f"{__name__}.swa_utils")
