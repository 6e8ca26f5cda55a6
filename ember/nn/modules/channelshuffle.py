"""``ChannelShuffle`` (torch.nn.modules.channelshuffle): interleave channel groups, as ShuffleNet does."""
from __future__ import annotations

from .module import Module
from .. import functional as F

__all__ = ["ChannelShuffle"]


class ChannelShuffle(Module):
    """Split the channels into ``groups`` and interleave them: (N, g*k, *) -> (N, k*g, *) transposed."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
