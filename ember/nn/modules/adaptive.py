"""``AdaptiveLogSoftmaxWithLoss`` (torch.nn.AdaptiveLogSoftmaxWithLoss): the adaptive softmax of Grave et
al. for large vocabularies. The frequent classes (below ``cutoffs[0]``) and one entry per tail cluster share
a head softmax; each tail cluster has its own low-rank two-layer projection and softmax, and a class's
log-probability is its cluster's head entry plus its log-probability inside the cluster.
"""
from __future__ import annotations

import collections

from .module import Module
from .container import ModuleList, Sequential
from .linear import Linear
from .. import functional as F

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = collections.namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """``AdaptiveLogSoftmaxWithLoss(in_features, n_classes, cutoffs, div_value=4.0, head_bias=False)``."""

    def __init__(self, in_features: int, n_classes: int, cutoffs, div_value: float = 4.0, head_bias: bool = False,
                 device=None, dtype=None) -> None:
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > (n_classes - 1)
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted in an increasing "
                             "order, where each value is between 1 and n_classes-1")
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        kw = {"device": device, "dtype": dtype}
        self.head = Linear(in_features, self.head_size, bias=head_bias, **kw)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hidden, bias=False, **kw),
                                        Linear(hidden, size, bias=False, **kw)))

    def reset_parameters(self) -> None:
        self.head.reset_parameters()
        for proj, out in self.tail:
            proj.reset_parameters()
            out.reset_parameters()

    def forward(self, input_, target_):
        batched = input_.dim() == 2
        if input_.dim() not in (1, 2):
            raise RuntimeError("1D target tensor expects 2D input tensors, but found inputs with size "
                               f"{list(input_.size())}")
        if batched and (target_.dim() != 1 or input_.size(0) != target_.size(0)):
            raise RuntimeError("Input and target should have the same size in the batch dimension.")
        if not batched and target_.dim() != 0:
            raise RuntimeError("0D target tensor expects 1D input tensors, but found inputs with size "
                               f"{list(input_.size())}")
        x = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)
        n = target.size(0)
        output = x.new_zeros(n)
        head_index = target.clone()                      # the head entry each row reads
        bounds = [0] + self.cutoffs
        covered = 0
        for i in range(len(bounds) - 1):
            low, high = bounds[i], bounds[i + 1]
            mask = (target >= low) & (target < high)
            rows = mask.nonzero().reshape(-1)
            if rows.numel() == 0:
                continue
            covered += rows.numel()
            if i == 0:
                continue                                  # shortlist classes are read from the head directly
            head_index.index_fill_(0, rows, self.shortlist_size + i - 1)
            inside = F.log_softmax(self.tail[i - 1](x.index_select(0, rows)), dim=1)
            local = inside.gather(1, (target.index_select(0, rows) - low).unsqueeze(1)).squeeze(1)
            output = output.index_copy(0, rows, local)
        if covered != n:
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                               f"[{target.min().item()}, {target.max().item()}] were found. ")
        head_lp = F.log_softmax(self.head(x), dim=1)
        output = output + head_lp.gather(1, head_index.unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _full_log_prob(self, x, head_output):
        from ...ops.shape_join import cat
        head_lp = F.log_softmax(head_output, dim=1)
        parts = [head_lp[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            inside = F.log_softmax(self.tail[i](x), dim=1)
            parts.append(inside + head_lp[:, self.shortlist_size + i].unsqueeze(1))
        return cat(parts, 1)

    def log_prob(self, input):
        """Log-probabilities of every class, (N, n_classes) (or (n_classes,) for one input)."""
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        out = self._full_log_prob(x, self.head(x))
        return out if batched else out.squeeze(0)

    def predict(self, input):
        """The most likely class of each input (the argmax of ``log_prob``)."""
        return self.log_prob(input).argmax(dim=-1)
