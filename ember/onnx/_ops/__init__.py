"""Converters: one captured ember op -> ONNX nodes.

Each converter gets the builder, the captured ``OpNode`` and its counterpart in the second capture
(None unless dynamic axes are exported), reads the op's inputs with ``b.name`` and sets each output it
can provide with ``b.set``. An output left unset (max pooling's indices, an LSTM's saved gate values)
raises only if a later op reads it. ``dynamic`` lists the attributes that may differ between the two
captures because the converter rebuilds them from the run-time shapes (or does not read them).

The converters live by op family (``elementwise``, ``reductions``, ``shapes``, ``layers``, ``recurrent``)
and register themselves with ``@conv`` in ``_registry``, which holds the one table the exporter reads.
"""
from ._registry import CONVERTERS, MIN_OPSET_OF, conv  # noqa: F401
from . import elementwise, reductions, shapes, layers, recurrent  # noqa: F401  (they register their converters)
