"""SummaryWriter: summaries built from the ``tensorboard`` package's protos, written by its EventFileWriter.

What each method stores follows ``torch.utils.tensorboard`` (so TensorBoard shows ember's runs the same
way): ``add_scalar`` a ``simple_value``; ``add_scalars`` one sub-run directory per series
(``<log_dir>/<main_tag>_<tag>``) holding the main tag; ``add_histogram`` a ``HistogramProto`` over
TensorBoard's default exponential buckets; ``add_image(s)``/``add_figure`` a PNG (encoded with Pillow,
which the ``tensorboard`` package depends on); ``add_text`` a string tensor for the text plugin under
``<tag>/text_summary``; ``add_hparams`` the hparams plugin's experiment / session start / session end
summaries plus the metrics as scalars, in a sub-run; ``add_graph`` a ``GraphDef`` of the ops ember's
compiler captures from one call of the model.
"""
from __future__ import annotations

import io
import os
import socket
import time
from datetime import datetime

import numpy as np

_INSTALL = "pip install tensorboard"


def _tb():
    """The parts of the ``tensorboard`` package the writer uses (a clear error when it is missing)."""
    try:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
        from tensorboard.compat.proto import event_pb2, summary_pb2
    except ImportError as e:
        raise ImportError(f"ember.utils.tensorboard.SummaryWriter needs the 'tensorboard' package, which is "
                          f"not installed ({e}); install it with: {_INSTALL}") from None
    return EventFileWriter, event_pb2, summary_pb2


def _np(x) -> np.ndarray:
    """An ember Tensor, NumPy array, number or (nested) list as a NumPy array."""
    from ...tensor import Tensor
    if isinstance(x, Tensor):
        return np.asarray(x.detach()._data)
    return np.asarray(x)


def _scalar_value(tag: str, value) -> float:
    a = _np(value)
    if a.size != 1:
        raise ValueError(f"add_scalar: {tag!r} must be a single number or a one-element tensor, "
                         f"got shape {tuple(a.shape)}")
    return float(a.reshape(()))


def _default_bins() -> list:
    """TensorBoard's default histogram bucket edges: +-1e-12 growing by 10% up to 1e20, and 0."""
    pos = []
    v = 1e-12
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    return [-b for b in reversed(pos)] + [0.0] + pos


# ---- summaries --------------------------------------------------------------------------------------

def _histogram_proto(tag, values, bins, max_bins):
    _, _, summary_pb2 = _tb()
    a = _np(values).astype(np.float64).reshape(-1)
    if a.size == 0:
        raise ValueError(f"add_histogram: {tag!r} has no values")
    if not np.isfinite(a).all():
        raise ValueError(f"add_histogram: {tag!r} has NaN or infinite values")
    counts, edges = np.histogram(a, bins=bins)
    if max_bins is not None and len(counts) > max_bins:
        group = -(-len(counts) // int(max_bins))            # merge this many neighbours per bucket
        pad = (-len(counts)) % group
        counts = np.concatenate([counts, np.zeros(pad, counts.dtype)]).reshape(-1, group).sum(1)
        edges = np.concatenate([edges[:-1][::group], edges[-1:]])
    nz = np.nonzero(counts)[0]
    if nz.size == 0:
        raise ValueError(f"add_histogram: every value of {tag!r} lies outside the bins")
    first, last = int(nz[0]), int(nz[-1])
    # TensorBoard stores right edges; an empty leading bucket keeps the left edge of the first one
    limits = edges[first:last + 2]
    buckets = np.concatenate([[0], counts[first:last + 1]])
    hist = summary_pb2.HistogramProto(min=float(a.min()), max=float(a.max()), num=int(a.size),
                                      sum=float(a.sum()), sum_squares=float(a @ a),
                                      bucket_limit=limits.tolist(), bucket=buckets.tolist())
    return summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, histo=hist)])


def _grid(nchw: np.ndarray, ncols: int = 8) -> np.ndarray:
    """N images (N, C, H, W) tiled row by row, at most ``ncols`` per row, into one (C, H', W') image."""
    n, c, h, w = nchw.shape
    cols = max(1, min(n, ncols))
    rows = -(-n // cols)
    out = np.zeros((c, rows * h, cols * w), nchw.dtype)
    for i in range(n):
        r, k = divmod(i, cols)
        out[:, r * h:(r + 1) * h, k * w:(k + 1) * w] = nchw[i]
    return out


def _to_hwc(a: np.ndarray, dataformats: str) -> np.ndarray:
    fmt = dataformats.upper()
    if len(set(fmt)) != len(fmt) or not set(fmt) <= set("NCHW"):
        raise ValueError(f"add_image: dataformats {dataformats!r} must use each of N, C, H, W at most once")
    if a.ndim != len(fmt):
        raise ValueError(f"add_image: dataformats {dataformats!r} has {len(fmt)} dims but the image has shape "
                         f"{tuple(a.shape)}")
    if sorted(fmt) not in (sorted("HW"), sorted("CHW"), sorted("NCHW")):
        raise ValueError(f"add_image: dataformats {dataformats!r} is not supported (supported: an order of HW, "
                         "CHW or NCHW, e.g. CHW, HWC, NCHW, NHWC)")
    if len(fmt) == 4:
        nchw = a.transpose([fmt.index(ch) for ch in "NCHW"])
        if nchw.shape[1] == 1:
            nchw = np.repeat(nchw, 3, axis=1)
        return _grid(nchw).transpose(1, 2, 0)
    if len(fmt) == 3:
        hwc = a.transpose([fmt.index(ch) for ch in "HWC"])
        return np.repeat(hwc, 3, axis=2) if hwc.shape[2] == 1 else hwc
    hw = a.transpose([fmt.index(ch) for ch in "HW"])
    return np.stack([hw] * 3, axis=2)


def _image_proto(tag, img, dataformats):
    _, _, summary_pb2 = _tb()
    from PIL import Image                       # a dependency of the tensorboard package
    a = _np(img)
    hwc = _to_hwc(a, dataformats)
    if hwc.shape[2] not in (3, 4):
        raise ValueError(f"add_image: {tag!r} needs 1, 3 or 4 channels, got {hwc.shape[2]}")
    if hwc.dtype != np.uint8:                   # floats are in [0, 1]
        hwc = np.clip(hwc.astype(np.float32) * 255.0, 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(hwc)).save(buf, format="PNG")
    h, w, c = hwc.shape
    image = summary_pb2.Summary.Image(height=h, width=w, colorspace=c, encoded_image_string=buf.getvalue())
    return summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, image=image)])


def _figure_chw(figure, close: bool) -> np.ndarray:
    """A matplotlib figure rendered by the Agg backend as a (3, H, W) uint8 image."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("add_figure needs matplotlib: pip install matplotlib") from None
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    rgba = np.asarray(canvas.buffer_rgba())
    chw = np.ascontiguousarray(rgba[:, :, :3].transpose(2, 0, 1))
    if close:
        plt.close(figure)
    return chw


def _text_proto(tag, text):
    _, _, summary_pb2 = _tb()
    from tensorboard.plugins.text import metadata as text_meta
    from tensorboard.util import tensor_util
    tensor = tensor_util.make_tensor_proto([str(text).encode("utf-8")], shape=[1])
    return summary_pb2.Summary(value=[summary_pb2.Summary.Value(
        tag=tag + "/text_summary", metadata=text_meta.create_summary_metadata(display_name="", description=""),
        tensor=tensor)])


def _hparams_protos(hparam_dict, metric_dict, hparam_domain_discrete):
    """The hparams plugin's experiment, session-start and session-end summaries."""
    _, _, summary_pb2 = _tb()
    from google.protobuf import struct_pb2
    from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2
    discrete = hparam_domain_discrete or {}
    if not isinstance(discrete, dict):
        raise TypeError("add_hparams: hparam_domain_discrete must be a dict of lists")
    for k, vals in discrete.items():
        if k not in hparam_dict or not isinstance(vals, list) or \
                not all(isinstance(d, type(hparam_dict[k])) for d in vals):
            raise TypeError(f"add_hparams: hparam_domain_discrete[{k!r}] must be a list of values of the same type "
                            f"as hparam_dict[{k!r}]")
    start = plugin_data_pb2.SessionStartInfo()
    infos = []
    for k, v in hparam_dict.items():
        if v is None:
            continue
        if isinstance(v, bool):
            start.hparams[k].bool_value = v
            dtype, field = api_pb2.DATA_TYPE_BOOL, "bool_value"
        elif isinstance(v, (int, float)):
            start.hparams[k].number_value = v
            dtype, field = api_pb2.DATA_TYPE_FLOAT64, "number_value"
        elif isinstance(v, str):
            start.hparams[k].string_value = v
            dtype, field = api_pb2.DATA_TYPE_STRING, "string_value"
        else:
            a = _np(v)
            if a.size != 1 or a.dtype.kind not in "biuf":
                raise ValueError(f"add_hparams: hparam {k!r} must be an int, float, str, bool or one-element "
                                 f"tensor, got {type(v).__name__}")
            start.hparams[k].number_value = float(a.reshape(()))
            dtype, field = api_pb2.DATA_TYPE_FLOAT64, "number_value"
        info = api_pb2.HParamInfo(name=k, type=dtype)
        if k in discrete:
            info.domain_discrete.CopyFrom(struct_pb2.ListValue(
                values=[struct_pb2.Value(**{field: d}) for d in discrete[k]]))
        infos.append(info)
    experiment = api_pb2.Experiment(hparam_infos=infos,
                                    metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag=m))
                                                  for m in metric_dict])
    end = plugin_data_pb2.SessionEndInfo(status=api_pb2.STATUS_SUCCESS)
    out = []
    for tag, data in ((metadata.EXPERIMENT_TAG, plugin_data_pb2.HParamsPluginData(experiment=experiment)),
                      (metadata.SESSION_START_INFO_TAG, plugin_data_pb2.HParamsPluginData(session_start_info=start)),
                      (metadata.SESSION_END_INFO_TAG, plugin_data_pb2.HParamsPluginData(session_end_info=end))):
        out.append(summary_pb2.Summary(value=[summary_pb2.Summary.Value(
            tag=tag, metadata=metadata.create_summary_metadata(data))]))
    return out


# ---- writers ----------------------------------------------------------------------------------------

class FileWriter:
    """One event file in ``log_dir``, written by tensorboard's ``EventFileWriter`` (a queue flushed by a
    background thread every ``flush_secs`` or when ``max_queue`` events wait)."""

    def __init__(self, log_dir, max_queue: int = 10, flush_secs: int = 120, filename_suffix: str = ""):
        EventFileWriter, self._event_pb2, self._summary_pb2 = _tb()
        self.event_writer = EventFileWriter(str(log_dir), max_queue, flush_secs, filename_suffix)

    def get_logdir(self) -> str:
        return self.event_writer.get_logdir()

    def add_event(self, event, step=None, walltime=None) -> None:
        event.wall_time = time.time() if walltime is None else float(walltime)
        if step is not None:
            event.step = int(step)
        self.event_writer.add_event(event)

    def add_summary(self, summary, global_step=None, walltime=None) -> None:
        self.add_event(self._event_pb2.Event(summary=summary), global_step, walltime)

    def add_graph(self, graph_def, run_metadata=None, walltime=None) -> None:
        self.add_event(self._event_pb2.Event(graph_def=graph_def.SerializeToString()), None, walltime)
        if run_metadata is not None:
            trm = self._event_pb2.TaggedRunMetadata(tag="step1", run_metadata=run_metadata.SerializeToString())
            self.add_event(self._event_pb2.Event(tagged_run_metadata=trm), None, walltime)

    def flush(self) -> None:
        self.event_writer.flush()

    def close(self) -> None:
        self.event_writer.close()

    def reopen(self) -> None:
        self.event_writer.reopen()


class SummaryWriter:
    """Writes summaries to event files in ``log_dir`` for TensorBoard (``torch.utils.tensorboard``'s API).

    ``log_dir`` defaults to ``runs/<Mon>DD_HH-MM-SS_<hostname><comment>``. ``purge_step``: TensorBoard
    hides events of an earlier run in the same directory from this step on (for a resumed run).
    ``max_queue`` and ``flush_secs`` control when queued events reach the disk; ``filename_suffix`` is
    appended to event file names.
    """

    def __init__(self, log_dir=None, comment: str = "", purge_step=None, max_queue: int = 10,
                 flush_secs: int = 120, filename_suffix: str = ""):
        _tb()
        if not log_dir:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        self.log_dir = str(log_dir)
        self.purge_step = purge_step
        self.max_queue = max_queue
        self.flush_secs = flush_secs
        self.filename_suffix = filename_suffix
        self.default_bins = _default_bins()
        self.file_writer = None
        self.all_writers = None
        self._get_file_writer()

    def _get_file_writer(self) -> FileWriter:
        """The main writer, re-created after ``close()``."""
        if self.file_writer is None:
            self.file_writer = FileWriter(self.log_dir, self.max_queue, self.flush_secs, self.filename_suffix)
            self.all_writers = {self.file_writer.get_logdir(): self.file_writer}
            if self.purge_step is not None:
                ev = self.file_writer._event_pb2
                step = int(self.purge_step)
                self.file_writer.add_event(ev.Event(step=step, file_version="brain.Event:2"))
                self.file_writer.add_event(ev.Event(step=step, session_log=ev.SessionLog(status=ev.SessionLog.START)))
                self.purge_step = None
        return self.file_writer

    def get_logdir(self) -> str:
        return self.log_dir

    # ---- scalars -----------------------------------------------------------------------------------
    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style: bool = False,
                   double_precision: bool = False) -> None:
        """Log one number. ``new_style`` stores it as a tensor for the scalars plugin (float32, or float64
        with ``double_precision``) instead of a ``simple_value``."""
        fw = self._get_file_writer()
        s = fw._summary_pb2
        v = _scalar_value(tag, scalar_value)
        if new_style:
            from tensorboard.plugins.scalar import metadata as scalar_meta
            from tensorboard.util import tensor_util
            t = tensor_util.make_tensor_proto(np.array(v, np.float64 if double_precision else np.float32))
            summ = s.Summary(value=[s.Summary.Value(tag=tag, tensor=t, metadata=scalar_meta.create_summary_metadata(
                display_name="", description=""))])
        else:
            summ = s.Summary(value=[s.Summary.Value(tag=tag, simple_value=v)])
        fw.add_summary(summ, global_step, walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None) -> None:
        """Log several series in one chart: each key gets a sub-run ``<log_dir>/<main_tag>_<key>`` whose
        scalar is tagged ``main_tag``."""
        walltime = time.time() if walltime is None else walltime
        base = self._get_file_writer().get_logdir()
        for key, value in tag_scalar_dict.items():
            sub = base + "/" + main_tag.replace("/", "_") + "_" + key
            fw = self.all_writers.get(sub)
            if fw is None:
                fw = FileWriter(sub, self.max_queue, self.flush_secs, self.filename_suffix)
                self.all_writers[sub] = fw
            s = fw._summary_pb2
            fw.add_summary(s.Summary(value=[s.Summary.Value(tag=main_tag, simple_value=_scalar_value(key, value))]),
                           global_step, walltime)

    # ---- histograms --------------------------------------------------------------------------------
    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None, max_bins=None) -> None:
        """Histogram of ``values``; ``bins`` is ``"tensorflow"`` (TensorBoard's default exponential buckets)
        or anything ``numpy.histogram`` takes (a count, edges, ``"auto"``...)."""
        if isinstance(bins, str) and bins == "tensorflow":
            bins = self.default_bins
        self._get_file_writer().add_summary(_histogram_proto(tag, values, bins, max_bins), global_step, walltime)

    def add_histogram_raw(self, tag, min, max, num, sum, sum_squares, bucket_limits, bucket_counts,  # noqa: A002
                          global_step=None, walltime=None) -> None:
        """A histogram from precomputed statistics (``bucket_limits`` are the buckets' right edges)."""
        if len(bucket_limits) != len(bucket_counts):
            raise ValueError("add_histogram_raw: bucket_limits and bucket_counts must have the same length")
        fw = self._get_file_writer()
        s = fw._summary_pb2
        hist = s.HistogramProto(min=min, max=max, num=num, sum=sum, sum_squares=sum_squares,
                                bucket_limit=list(bucket_limits), bucket=list(bucket_counts))
        fw.add_summary(s.Summary(value=[s.Summary.Value(tag=tag, histo=hist)]), global_step, walltime)

    # ---- images ------------------------------------------------------------------------------------
    def add_image(self, tag, img_tensor, global_step=None, walltime=None, dataformats: str = "CHW") -> None:
        """One image: uint8 in [0, 255] or float in [0, 1]; ``dataformats`` CHW, HWC or HW (1, 3 or 4
        channels)."""
        self._get_file_writer().add_summary(_image_proto(tag, img_tensor, dataformats), global_step, walltime)

    def add_images(self, tag, img_tensor, global_step=None, walltime=None, dataformats: str = "NCHW") -> None:
        """A batch of images (NCHW or NHWC), tiled into one grid of at most 8 per row."""
        self._get_file_writer().add_summary(_image_proto(tag, img_tensor, dataformats), global_step, walltime)

    def add_figure(self, tag, figure, global_step=None, close: bool = True, walltime=None) -> None:
        """A matplotlib figure (or a list of them, tiled) rendered to an image; ``close`` closes it."""
        if isinstance(figure, list):
            imgs = np.stack([_figure_chw(f, close) for f in figure])
            self.add_images(tag, imgs, global_step, walltime, dataformats="NCHW")
        else:
            self.add_image(tag, _figure_chw(figure, close), global_step, walltime, dataformats="CHW")

    # ---- text, hparams, graph -----------------------------------------------------------------------
    def add_text(self, tag, text_string, global_step=None, walltime=None) -> None:
        """Text (markdown) for TensorBoard's text plugin, stored under ``<tag>/text_summary``."""
        self._get_file_writer().add_summary(_text_proto(tag, text_string), global_step, walltime)

    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None, run_name=None,
                    global_step=None) -> None:
        """One hyperparameter-search session: the hparams and the metrics (also logged as scalars) go to a
        sub-run ``<log_dir>/<run_name>`` (``run_name`` defaults to the current time)."""
        if type(hparam_dict) is not dict or type(metric_dict) is not dict:
            raise TypeError("add_hparams: hparam_dict and metric_dict must be dicts")
        protos = _hparams_protos(hparam_dict, metric_dict, hparam_domain_discrete)
        run_dir = os.path.join(self._get_file_writer().get_logdir(), run_name or str(time.time()))
        with SummaryWriter(log_dir=run_dir) as sub:
            for p in protos:
                sub.file_writer.add_summary(p, global_step)
            for k, v in metric_dict.items():
                sub.add_scalar(k, v, global_step)

    def add_graph(self, model, input_to_model=None, verbose: bool = False, use_strict_trace: bool = True) -> None:
        """The graph of ops one call ``model(*input_to_model)`` runs, as ember's compiler captures it: one
        node per op (named by module scope) with its output shapes, plus input, parameter and output
        nodes. ``verbose`` prints the captured graph."""
        from ._graph import graph_def
        gd, run_metadata = graph_def(model, input_to_model, verbose)
        self._get_file_writer().add_graph(gd, run_metadata)

    # ---- lifetime -----------------------------------------------------------------------------------
    def flush(self) -> None:
        """Write every queued event of every writer (the main run and ``add_scalars`` sub-runs) to disk."""
        for w in (self.all_writers or {}).values():
            w.flush()

    def close(self) -> None:
        """Flush and close the event files (a later ``add_*`` opens a new file in the same directory)."""
        if self.all_writers is None:
            return
        for w in self.all_writers.values():
            w.flush()
            w.close()
        self.file_writer = self.all_writers = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
