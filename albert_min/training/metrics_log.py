"""A training run's curve, for people to look at: ``metrics.jsonl`` in the model folder, and
TensorBoard event files with ``report_to="tensorboard"``.

``metrics.jsonl`` holds one JSON object a line: after every step
``{"step", "loss", "lr", "examples_per_s"}``, after every evaluation ``{"step", "epoch",
"train_loss", "eval": {metric: value}}``. Each line is appended with one ``write`` to a file
opened for appending, so a reader (or a crash) sees whole lines only.

The model folder is replaced (renamed into place) each time a better model is saved, so the
log is kept in memory too and written whole into each new folder (``files_for_save``); between
saves lines are appended to the folder there is. ``--resume`` continues from the state's step:
``resume`` keeps the lines up to that step and drops the ones a crashed run wrote after it, so
the file never holds a step twice. TensorBoard's file (``<output>/tensorboard/``, one at a name the
folder's manifest lists) is written the same way: whole into each new folder, then appended to.

TensorBoard's records are tensorboardX's protos and CRC (no torch or TensorFlow), an optional extra:
``pip install 'albert_min[tensorboard]'``.

Layer: ``albert_min.training``, above ``tasks`` (the layers: ``albert_min/__init__.py``).
"""

import json
import math
import os
import struct
import time

from ..common.errors import AlbertMinError
from .config import REPORT_TO

METRICS_FILE = "metrics.jsonl"
TENSORBOARD_FOLDER = "tensorboard"
EVENT_FILE = "events.out.tfevents.albert_min"   # TensorBoard reads any file with "tfevents" in its name
INSTALL_TENSORBOARD = "pip install 'albert_min[tensorboard]'"


class MetricsLogError(AlbertMinError):
    """The metrics log cannot be written as asked (e.g. TensorBoard's writer is not installed)."""


def tensorboard_writer_class():
    """``EventFile`` (TensorBoard's records, written through tensorboardX); MetricsLogError saying how to
    install tensorboardX when it is missing."""
    try:
        import tensorboardX.proto.event_pb2 as event_pb2
        from tensorboardX.record_writer import masked_crc32c
        from tensorboardX.summary import scalar
    except ImportError:
        raise MetricsLogError(f"--report-to tensorboard needs the tensorboardX package: {INSTALL_TENSORBOARD} "
                              "(or pip install tensorboardX)") from None

    class EventFile:
        """One TensorBoard event file at a name albert_min chooses (the model folder's manifest lists
        it), created or appended to: TFRecord framing of tensorboardX's ``Event`` protos."""

        def __init__(self, path, append=False):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            new = not (append and os.path.isfile(path))
            self.file = open(path, "wb" if new else "ab")
            if new:
                self._write(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))

        def _write(self, event):
            data = event.SerializeToString()
            header = struct.pack("Q", len(data))
            self.file.write(header + struct.pack("I", masked_crc32c(header)) + data
                            + struct.pack("I", masked_crc32c(data)))

        def add(self, record):
            for tag, value in scalars(record).items():
                self._write(event_pb2.Event(wall_time=time.time(), step=record["step"], summary=scalar(tag, value)))
            self.file.flush()

        def close(self):
            self.file.close()

    return EventFile


def _finite(value):
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def scalars(record):
    """The TensorBoard scalars of a record: {tag: value}, train/* and eval/*."""
    if "eval" in record:
        out = {f"eval/{name}": value for name, value in record["eval"].items()}
        out["train/epoch_loss"] = record.get("train_loss")
    else:
        out = {f"train/{name}": record.get(name) for name in ("loss", "lr", "examples_per_s")}
    return {tag: v for tag, v in out.items() if _finite(v) is not None}


def read_records(path, up_to_step=None):
    """The records of a metrics.jsonl, and the byte offset where they end: up to the first line that is
    not a whole JSON object with an int "step" (a torn last line), or past ``up_to_step``."""
    records, end = [], 0
    try:
        with open(path, "rb") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:
                    break
                if not (isinstance(record, dict) and isinstance(record.get("step"), int) and line.endswith(b"\n")):
                    break
                if up_to_step is not None and record["step"] > up_to_step:
                    break
                records.append(record)
                end += len(line)
    except FileNotFoundError:
        pass
    return records, end


class MetricsLog:
    """The run's records, in ``output``/metrics.jsonl (and TensorBoard's files when ``report_to`` says).

    output: the model folder. report_to: "none" or "tensorboard" (checked here: MetricsLogError
    when tensorboardX is missing). writes: False for a data-parallel worker that writes nothing.
    """

    def __init__(self, output, report_to="none", writes=True):
        if report_to not in REPORT_TO:
            raise MetricsLogError(f"report_to must be one of {', '.join(REPORT_TO)}, got {report_to!r}")
        self.output, self.writes = output, writes
        self.writer_class = tensorboard_writer_class() if report_to == "tensorboard" and writes else None
        self.records = []
        self.folder_is_ours = False   # the folder there is was written by this run (not yet on a fresh --force run)
        self.live = None     # the TensorBoard writer appending to the current folder's event file

    @property
    def path(self):
        return os.path.join(self.output, METRICS_FILE)

    def resume(self, step):
        """Continue a run resumed at ``step``: keep the folder's records up to it, drop those after
        (written by the run that crashed past its last saved state), and write the file and the
        TensorBoard files again with only those."""
        self.records, end = read_records(self.path, up_to_step=step)
        self.folder_is_ours = True
        if self.writes and os.path.isfile(self.path):
            os.truncate(self.path, end)   # the lines kept are the file's start: cut the rest in place
        if self.writes and self.writer_class is not None and os.path.isdir(self.output):
            self.write_events(os.path.join(self.output, TENSORBOARD_FOLDER))

    def append(self, record):
        """Record ``record`` (a dict with an int "step"); appended to the folder's file if there is one."""
        self.records.append(record)
        if not (self.writes and self.folder_is_ours and os.path.isdir(self.output)):
            return   # before this run's first save: written whole with the folder
        line = (json.dumps(record) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, line)   # one write of the whole line, appended: no torn or interleaved lines
        finally:
            os.close(fd)
        if self.writer_class is not None:
            if self.live is None:
                self.live = self.writer_class(os.path.join(self.output, TENSORBOARD_FOLDER, EVENT_FILE), append=True)
            self.live.add(record)

    def files_for_save(self):
        """``extra_files`` for ``save_model_dir``: the whole log (and TensorBoard's folder) in the new folder."""
        if not self.writes:
            return {}
        self.folder_is_ours = True   # from this save on
        files = {METRICS_FILE: self.write_file}
        if self.writer_class is not None:
            self.close()   # its folder is being replaced: the next record opens a writer in the new one
            files[TENSORBOARD_FOLDER] = self.write_events
        return files

    def write_file(self, path):
        with open(path, "w", encoding="utf-8") as f:   # into the new folder, before it is renamed into place
            f.writelines(json.dumps(r) + "\n" for r in self.records)

    def write_events(self, folder):
        """TensorBoard's folder holding every record so far (its one event file written anew)."""
        writer = self.writer_class(os.path.join(folder, EVENT_FILE))
        try:
            for record in self.records:
                writer.add(record)
        finally:
            writer.close()

    def close(self):
        if self.live is not None:
            self.live.close()
            self.live = None
