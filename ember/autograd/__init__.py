"""Reverse-mode autograd: the engine, grad modes, custom Functions, gradcheck, anomaly mode."""
from .engine import backward, grad  # noqa: F401
from .grad_mode import no_grad, enable_grad, set_grad_enabled, inference_mode  # noqa: F401
from .anomaly import detect_anomaly, set_detect_anomaly, is_anomaly_enabled  # noqa: F401
from .function import Function, FunctionCtx  # noqa: F401
from .variable import Variable  # noqa: F401
from .gradcheck import gradcheck, gradgradcheck  # noqa: F401
from . import graph  # noqa: F401
from . import functional  # noqa: F401
from .gradcheck import GradcheckError  # noqa: F401
from . import forward_ad  # noqa: F401,E402  (torch.autograd.forward_ad: tangents by double backward)
