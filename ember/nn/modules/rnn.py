"""Recurrent layers: RNN (tanh/relu), LSTM (with optional projection), GRU, and their single-step cells.

The computation is in ``ember.nn.functional.recurrent`` (one registered op per layer and direction, with
a hand-written backpropagation through time). Parameter names, shapes, gate order (LSTM: i, f, g, o;
GRU: r, z, n) and default initialisation (uniform(-1/sqrt(hidden), 1/sqrt(hidden))) follow torch, so
state dicts move between the two.
"""
from __future__ import annotations

import math
import numbers
import warnings

import ember as _ember
from ...tensor import Tensor
from ..parameter import Parameter
from ..functional.recurrent import run_layer as _run_layer, packed_to_padded as _packed_to_padded, \
    padded_to_packed as _padded_to_packed
from .module import Module
from ..utils.rnn import PackedSequence

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


# ---- shared helpers ------------------------------------------------------------------------------------

def _new_param(shape, dtype, device):
    return Parameter(_ember.empty(shape, dtype=dtype, device=device))


def _uniform_init(module, bound):
    with _ember.no_grad():
        for p in module.parameters():
            p.uniform_(-bound, bound)


# ---- modules ----------------------------------------------------------------------------------------

class RNNBase(Module):
    """Base class of RNN, LSTM and GRU: parameters per layer and direction, argument checks, the loop
    over layers (with dropout between them) and directions."""

    __constants__ = ["mode", "input_size", "hidden_size", "num_layers", "bias", "batch_first",
                     "dropout", "bidirectional", "proj_size"]

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device=None, dtype=None) -> None:
        super().__init__()
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout) if isinstance(dropout, numbers.Number) else dropout
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        num_directions = 2 if bidirectional else 1
        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={num_layers}", stacklevel=2)
        if not isinstance(bias, bool):
            raise TypeError(f"bias should be of type bool, got: {type(bias).__name__}")
        if not isinstance(batch_first, bool):
            raise TypeError(f"batch_first should be of type bool, got: {type(batch_first).__name__}")
        if not isinstance(input_size, int):
            raise TypeError(f"input_size should be of type int, got: {type(input_size).__name__}")
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        if not isinstance(hidden_size, int):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        gate_size = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}.get(mode)
        if gate_size is None:
            raise ValueError("Unrecognized RNN mode: " + mode)
        gate_size *= hidden_size

        self._flat_weights_names = []
        self._all_weights = []
        real_hidden = proj_size if proj_size > 0 else hidden_size
        for layer in range(num_layers):
            for direction in range(num_directions):
                layer_input = input_size if layer == 0 else real_hidden * num_directions
                suffix = "_reverse" if direction == 1 else ""
                params = [(f"weight_ih_l{layer}{suffix}", (gate_size, layer_input)),
                          (f"weight_hh_l{layer}{suffix}", (gate_size, real_hidden))]
                if bias:
                    params += [(f"bias_ih_l{layer}{suffix}", (gate_size,)),
                               (f"bias_hh_l{layer}{suffix}", (gate_size,))]
                if proj_size > 0:
                    params.append((f"weight_hr_l{layer}{suffix}", (proj_size, hidden_size)))
                for name, shape in params:
                    setattr(self, name, _new_param(shape, dtype, device))
                names = [n for n, _ in params]
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _flat_weights(self):
        return [getattr(self, n, None) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        """Parameters per layer and direction: ``[[w_ih, w_hh, b_ih, b_hh(, w_hr)], ...]``."""
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self) -> None:
        """No-op: ember keeps each weight as its own array (torch packs them for cuDNN)."""

    def reset_parameters(self) -> None:
        """Every weight and bias ~ U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        _uniform_init(self, 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0)

    # ---- checks (torch's messages) -----------------------------------------------------------
    def check_input(self, input: Tensor, batch_sizes=None) -> None:
        w = self._flat_weights[0]
        if input.dtype is not w.dtype:
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype ({w.dtype}). "
                             f"Convert input: input.to({w.dtype}), or convert model: model.to({input.dtype})")
        expected = 2 if batch_sizes is not None else 3
        if input.dim() != expected:
            raise RuntimeError(f"input must have {expected} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.size(-1)}")

    def get_expected_hidden_size(self, input: Tensor, batch_sizes=None) -> tuple:
        mini_batch = _mini_batch(self, input, batch_sizes)
        num_directions = 2 if self.bidirectional else 1
        h = self.proj_size if self.proj_size > 0 else self.hidden_size
        return (self.num_layers * num_directions, mini_batch, h)

    def check_hidden_size(self, hx: Tensor, expected_hidden_size: tuple,
                          msg: str = "Expected hidden size {}, got {}") -> None:
        if tuple(hx.size()) != tuple(expected_hidden_size):
            raise RuntimeError(msg.format(tuple(expected_hidden_size), list(hx.size())))

    def check_forward_args(self, input: Tensor, hidden: Tensor, batch_sizes=None) -> None:
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def permute_hidden(self, hx, permutation):
        if permutation is None:
            return hx
        return hx.index_select(1, permutation)

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    # ---- the computation -----------------------------------------------------------------------
    def _layer_weights(self, idx):
        ws = [getattr(self, n) for n in self._all_weights[idx]]
        w_ih, w_hh = ws[0], ws[1]
        b_ih, b_hh = (ws[2], ws[3]) if self.bias else (None, None)
        w_hr = ws[-1] if self.proj_size > 0 else None
        return w_ih, w_hh, b_ih, b_hh, w_hr

    def _run(self, x, hx, cx, batch_sizes=None):
        """x: time-major (T, B, I); hx/cx: (layers * directions, B, *). Returns output, h_n, c_n."""
        if x.size(0) == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        num_directions = 2 if self.bidirectional else 1
        layer_input = x
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for direction in range(num_directions):
                idx = layer * num_directions + direction
                w_ih, w_hh, b_ih, b_hh, w_hr = self._layer_weights(idx)
                out, h, c = _run_layer(self.mode, layer_input, hx[idx], None if cx is None else cx[idx],
                                       w_ih, w_hh, b_ih, b_hh, w_hr, direction == 1, batch_sizes)
                outs.append(out)
                h_n.append(h)
                c_n.append(c)
            layer_input = outs[0] if num_directions == 1 else _ember.cat(outs, 2)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                from ..functional.dropout import dropout as _dropout
                layer_input = _dropout(layer_input, p=self.dropout, training=True)
        return layer_input, _ember.stack(h_n), (None if cx is None else _ember.stack(c_n))

    def _forward_common(self, input, hx, name):
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: expected input to be a Tensor or PackedSequence, got {type(input).__name__}")
        if input.dim() not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D "
                             + ("tensor instead" if name == "RNN" else "instead"))
        is_batched = input.dim() == 3
        batch_dim = 0 if self.batch_first else 1
        if not is_batched:
            input = input.unsqueeze(batch_dim)
        return input, is_batched, batch_dim

    def _forward_packed(self, packed, hx):
        """A PackedSequence: run on the padded (T, B, *) layout with per-step batch sizes, repack."""
        from ..utils.rnn import PackedSequence, _PaddedPackedSequence
        if type(packed) is _PaddedPackedSequence:
            return self._forward_padded_packed(packed, hx)
        data, batch_sizes, sorted_indices, unsorted_indices = packed
        bs = tuple(int(b) for b in batch_sizes.tolist())
        is_lstm = self.mode == "LSTM"
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        num_directions = 2 if self.bidirectional else 1
        if hx is None:
            n = self.num_layers * num_directions
            hx = _ember.zeros(n, bs[0], real_hidden, dtype=data.dtype, device=data.device)
            if is_lstm:
                hx = (hx, _ember.zeros(n, bs[0], self.hidden_size, dtype=data.dtype, device=data.device))
        else:
            hx = self.permute_hidden(hx, sorted_indices)
        self.check_forward_args(data, hx, batch_sizes)
        h0, c0 = hx if is_lstm else (hx, None)
        for s in (h0, c0):
            if s is not None:
                _check_hidden_dtype(data, s)
        out, h_n, c_n = self._run(_packed_to_padded(data, bs), h0, c0, bs)
        out = PackedSequence(_padded_to_packed(out, bs), batch_sizes, sorted_indices, unsorted_indices)
        return out, self.permute_hidden((h_n, c_n) if is_lstm else h_n, unsorted_indices)

    def _forward_padded_packed(self, packed, hx):
        """A _PaddedPackedSequence (made while ember.compile captures): the layers run on its padded batch,
        the per-step batch sizes a traced tensor computed from the lengths (the layer ops take its buffer
        as their ``batch_sizes``), so no length value is read; the output is padded-packed too."""
        from ..utils.rnn import _PaddedPackedSequence
        x, sorted_indices, unsorted_indices = packed.padded, packed.sorted_indices, packed.unsorted_indices
        on = (lambda t: None if t is None else t.to(x.device))      # (the indices stay with the lengths: CPU)
        is_lstm = self.mode == "LSTM"
        n = self.num_layers * (2 if self.bidirectional else 1)
        B = x.shape[1]
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        if hx is None:
            hx = _ember.zeros(n, B, real_hidden, dtype=x.dtype, device=x.device)
            if is_lstm:
                hx = (hx, _ember.zeros(n, B, self.hidden_size, dtype=x.dtype, device=x.device))
        else:
            hx = self.permute_hidden(hx, on(sorted_indices))
        self.check_input(x)
        h0, c0 = hx if is_lstm else (hx, None)
        self.check_hidden_size(h0, (n, B, real_hidden), "Expected hidden[0] size {}, got {}" if is_lstm else
                               "Expected hidden size {}, got {}")
        if is_lstm:
            self.check_hidden_size(c0, (n, B, self.hidden_size), "Expected hidden[1] size {}, got {}")
        for s in (h0, c0):
            if s is not None:
                _check_hidden_dtype(x, s)
        out, h_n, c_n = self._run(x, h0, c0, packed.step_batch_sizes()._data)
        out = _PaddedPackedSequence(out, packed.lengths, sorted_indices, unsorted_indices)
        return out, self.permute_hidden((h_n, c_n) if is_lstm else h_n, on(unsorted_indices))

    def _zeros_hidden(self, input, size):
        mini_batch = input.size(0) if self.batch_first else input.size(1)
        num_directions = 2 if self.bidirectional else 1
        return _ember.zeros(self.num_layers * num_directions, mini_batch, size, dtype=input.dtype,
                            device=input.device)

    def _time_major(self, input):
        return input.transpose(0, 1) if self.batch_first else input

    def __setstate__(self, state):
        state = dict(state)
        state.pop("_flat_weights", None)  # torch's pickles carry the list ember computes (a property here)
        state.pop("_flat_weight_refs", None)
        super().__setstate__(state)
        if "proj_size" not in state:
            self.proj_size = 0

    def __getstate__(self):
        # torch's RNNBase.__setstate__ reads ``_flat_weights`` from the pickled state
        state = super().__getstate__()
        state["_flat_weights"] = self._flat_weights
        return state

    def _forward_one_state(self, input, hx, name):
        """forward of the layers with one hidden state (RNN, GRU): ``(output, h_n)``."""
        if _is_packed(input):
            return self._forward_packed(input, hx)
        input, is_batched, batch_dim = self._forward_common(input, hx, name)
        if hx is not None:
            if not is_batched:
                if hx.dim() != 2:
                    raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got {hx.dim()}-D tensor")
                hx = hx.unsqueeze(1)
            elif hx.dim() != 3:
                raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got {hx.dim()}-D tensor")
        else:
            hx = self._zeros_hidden(input, self.hidden_size)
        self.check_forward_args(input, hx, None)
        _check_hidden_dtype(input, hx)
        output, h_n, _ = self._run(self._time_major(input), hx, None)
        if self.batch_first:
            output = output.transpose(0, 1)
        if not is_batched:
            output = output.squeeze(batch_dim)
            h_n = h_n.squeeze(1)
        return output, h_n


def _is_packed(x):
    return isinstance(x, PackedSequence)


def _mini_batch(module, input, batch_sizes):
    if batch_sizes is not None:
        return int(batch_sizes[0])
    return input.size(0) if module.batch_first else input.size(1)


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or relu).

    ``RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True, batch_first=False,
    dropout=0.0, bidirectional=False)``; ``forward(input, hx=None) -> (output, h_n)``.
    """

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.__dict__["nonlinearity"] = args[3]
            args = args[:3] + args[4:]
        else:
            self.__dict__["nonlinearity"] = kwargs.pop("nonlinearity", "tanh")
        nl = self.__dict__["nonlinearity"]
        if nl == "tanh":
            mode = "RNN_TANH"
        elif nl == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nl}'. Select from 'tanh' or 'relu'.")
        super().__init__(mode, *args, **kwargs)

    def forward(self, input, hx=None):
        return self._forward_one_state(input, hx, "RNN")


class LSTM(RNNBase):
    """Long short-term memory, gates i, f, g, o; optional projection of h (``proj_size``).

    ``forward(input, (h_0, c_0)=None) -> (output, (h_n, c_n))``.
    """

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def get_expected_cell_size(self, input: Tensor, batch_sizes=None) -> tuple:
        mini_batch = _mini_batch(self, input, batch_sizes)
        num_directions = 2 if self.bidirectional else 1
        return (self.num_layers * num_directions, mini_batch, self.hidden_size)

    def check_forward_args(self, input, hidden, batch_sizes=None) -> None:
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden[0], self.get_expected_hidden_size(input, batch_sizes),
                               "Expected hidden[0] size {}, got {}")
        self.check_hidden_size(hidden[1], self.get_expected_cell_size(input, batch_sizes),
                               "Expected hidden[1] size {}, got {}")

    def permute_hidden(self, hx, permutation):
        if permutation is None:
            return hx
        return hx[0].index_select(1, permutation), hx[1].index_select(1, permutation)

    def forward(self, input, hx=None):
        if _is_packed(input):
            return self._forward_packed(input, hx)
        input, is_batched, batch_dim = self._forward_common(input, hx, "LSTM")
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        if hx is None:
            hx = (self._zeros_hidden(input, real_hidden), self._zeros_hidden(input, self.hidden_size))
        else:
            if is_batched:
                if hx[0].dim() != 3 or hx[1].dim() != 3:
                    raise RuntimeError("For batched 3-D input, hx and cx should also be 3-D but got "
                                       f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
            else:
                if hx[0].dim() != 2 or hx[1].dim() != 2:
                    raise RuntimeError("For unbatched 2-D input, hx and cx should also be 2-D but got "
                                       f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
                hx = (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
        self.check_forward_args(input, hx, None)
        _check_hidden_dtype(input, hx[0])
        _check_hidden_dtype(input, hx[1])
        output, h_n, c_n = self._run(self._time_major(input), hx[0], hx[1])
        if self.batch_first:
            output = output.transpose(0, 1)
        if not is_batched:
            output = output.squeeze(batch_dim)
            h_n, c_n = h_n.squeeze(1), c_n.squeeze(1)
        return output, (h_n, c_n)


class GRU(RNNBase):
    """Gated recurrent unit, gates r, z, n with ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``.

    ``forward(input, hx=None) -> (output, h_n)``.
    """

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input, hx=None):
        return self._forward_one_state(input, hx, "GRU")


def _check_hidden_dtype(input, hx):
    if hx.dtype is not input.dtype:
        raise RuntimeError(f"Input and hidden tensors are not the same dtype, found input tensor with "
                           f"{_dtype_name(input.dtype)} and hidden tensor with {_dtype_name(hx.dtype)}")


def _dtype_name(d):
    from ...ops.registry import dtype_name
    return dtype_name(d)


# ---- cells --------------------------------------------------------------------------------------------

class RNNCellBase(Module):
    """Base of the single-step cells: ``weight_ih``, ``weight_hh`` (and biases) for ``num_chunks`` gates."""

    __constants__ = ["input_size", "hidden_size", "bias"]

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = _new_param((num_chunks * hidden_size, input_size), dtype, device)
        self.weight_hh = _new_param((num_chunks * hidden_size, hidden_size), dtype, device)
        if bias:
            self.bias_ih = _new_param((num_chunks * hidden_size,), dtype, device)
            self.bias_hh = _new_param((num_chunks * hidden_size,), dtype, device)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def reset_parameters(self) -> None:
        """Every weight and bias ~ U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        _uniform_init(self, 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0)

    def _prepare(self, name, input, hx, n_states):
        """Validate, add the batch dimension to unbatched input, and default the states to zeros."""
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        states = [] if hx is None else list(hx) if n_states == 2 else [hx]
        for i, h in enumerate(states):
            if h.dim() not in (1, 2):
                what = f"hx[{i}]" if n_states == 2 else "hidden"
                raise ValueError(f"{name}: Expected {what} to be 1D or 2D, got {h.dim()}D instead")
        is_batched = input.dim() == 2
        if not is_batched:
            input = input.unsqueeze(0)
        if hx is None:
            z = _ember.zeros(input.size(0), self.hidden_size, dtype=input.dtype, device=input.device)
            states = [z] * n_states
        elif not is_batched:
            states = [h.unsqueeze(0) for h in states]
        if input.size(1) != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(1)} expected {self.input_size}")
        for i, h in enumerate(states):
            if input.size(0) != h.size(0):
                raise RuntimeError(f"Input batch size {input.size(0)} doesn't match hidden{i} batch size {h.size(0)}")
            if h.size(1) != self.hidden_size:
                raise RuntimeError(f"hidden{i} has inconsistent hidden_size: got {h.size(1)}, expected "
                                   f"{self.hidden_size}")
        # the cell's products are x @ W_ih.T and h @ W_hh.T: torch reports mismatched dtypes from them
        for t in [input] + states:
            if t.dtype is not self.weight_ih.dtype:
                raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got {_dtype_name(t.dtype)} "
                                   f"and {_dtype_name(self.weight_ih.dtype)}")
        return input.unsqueeze(0), states, is_batched


class RNNCell(RNNCellBase):
    """One Elman step: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu)."""

    __constants__ = ["input_size", "hidden_size", "bias", "nonlinearity"]

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, (h,), is_batched = self._prepare("RNNCell", input, hx, 1)
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        mode = "RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU"
        _, ret, _ = _run_layer(mode, x, h, None, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh,
                               None, False)
        return ret if is_batched else ret.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step: ``(h', c') = cell(x, (h, c))``, gates i, f, g, o."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx=None):
        x, (h, c), is_batched = self._prepare("LSTMCell", input, hx, 2)
        _, h1, c1 = _run_layer("LSTM", x, h, c, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh,
                               None, False)
        return (h1, c1) if is_batched else (h1.squeeze(0), c1.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step: ``h' = (1 - z) * n + z * h``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, (h,), is_batched = self._prepare("GRUCell", input, hx, 1)
        _, ret, _ = _run_layer("GRU", x, h, None, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh,
                               None, False)
        return ret if is_batched else ret.squeeze(0)
