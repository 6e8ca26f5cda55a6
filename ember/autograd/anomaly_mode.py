"""torch.autograd.anomaly_mode's path for ember's anomaly detection (which lives in ``anomaly.py``)."""
from .anomaly import detect_anomaly, is_anomaly_enabled, set_detect_anomaly  # noqa: F401

__all__ = ["detect_anomaly", "set_detect_anomaly"]
