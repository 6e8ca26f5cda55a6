"""``ember.onnx``: export a model to ONNX, with ``torch.onnx.export``'s arguments::

    import ember.onnx
    ember.onnx.export(model, (x,), "model.onnx", input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})

The graph is the one ``ember.compile`` captures from one call of the model (in eval mode, without
gradients): each captured op (``linear``, ``conv2d``, ``lstm_layer``, ``softmax``...) becomes one or a
few ONNX nodes, parameters become initializers, and the model is checked with ``onnx.checker``. The
``onnx`` package is optional (``pip install onnx``; ``pip install onnxruntime`` to run the file):
importing this module works without it, and ``export`` says what to install.
"""
from ._export import export, supported_ops, UnsupportedOperatorError, DEFAULT_OPSET  # noqa: F401

__all__ = ["export", "supported_ops", "UnsupportedOperatorError", "DEFAULT_OPSET"]
