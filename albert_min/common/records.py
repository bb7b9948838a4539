"""What albert_min records about what it wrote, and the checks against it.

- A folder it wrote carries a manifest, ``MANIFEST_FILE`` (``.albert_min.json``): ``written_by``,
  its ``kind`` (a model folder, a training state), whether it is ``complete``, the ``files`` and
  ``folders`` it holds, and its fingerprint: the sha256 of its files (``"sha256": {name: hex}``) and
  the content of the JSON files a reader compares key by key (``"contents": {name: value}``). A
  file whose sha256 is not the recorded one is not the one albert_min wrote
  (``check_recorded_sha256``); anything the manifest does not list is not albert_min's
  (``foreign_entries``).
- A file output of a ``recorded`` ``safe_output.FileKind`` (evaluate.py's predictions) has a record
  beside it, ``.NAME.albert_min.json`` (``output_record_path``), holding the sha256 values it may
  have; ``why_not_recorded`` says why a file is not one albert_min wrote and nobody changed since.

``safe_output`` writes them (``atomic_directory``, ``record_folder``, ``replace_file``) and decides
with them what may be replaced.
Layer: ``albert_min.common``, the bottom one (the layers: ``albert_min/__init__.py``).
"""

import json
import os
import stat

from .checksums import sha256_of
from .output_lock import OutputError

MANIFEST_FILE = ".albert_min.json"    # marks a folder albert_min wrote, and lists its files and folders


def read_manifest(directory):
    """The manifest of a folder albert_min wrote (a dict), or None if it has none or it is unreadable."""
    try:
        with open(os.path.join(directory, MANIFEST_FILE), encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError, RecursionError):
        return None
    ok = (isinstance(manifest, dict) and manifest.get("written_by") == "albert_min"
          and all(isinstance(manifest.get(key, []), list) and all(isinstance(n, str) for n in manifest.get(key, []))
                  for key in ("files", "folders"))
          and "files" in manifest)
    return manifest if ok else None


def _entries(directory):
    """``(files, folders, others)`` below ``directory``, relative paths, symlinks not followed.
    ``others``: symlinks (to files or folders), fifos, sockets, devices."""
    files, folders, others = [], [], []
    for root, dirs, names in os.walk(directory):
        for name in dirs + names:
            rel = os.path.relpath(os.path.join(root, name), directory)
            mode = os.lstat(os.path.join(root, name)).st_mode
            (folders if stat.S_ISDIR(mode) else files if stat.S_ISREG(mode) else others).append(rel)
    return sorted(files), sorted(folders), sorted(others)


def recorded_sha256(path):
    """The sha256 that the manifest of ``path``'s folder recorded for it (``atomic_directory``'s
    ``checksums``), or None: no manifest, or the folder was written without one for this file."""
    recorded = (read_manifest(os.path.dirname(os.path.abspath(path))) or {}).get("sha256")
    value = recorded.get(os.path.basename(path)) if isinstance(recorded, dict) else None
    return value if isinstance(value, str) else None


def recorded_content(path):
    """The JSON value that the manifest of ``path``'s folder recorded for it (``atomic_directory``'s
    ``contents``: what albert_min wrote there), or None."""
    recorded = (read_manifest(os.path.dirname(os.path.abspath(path))) or {}).get("contents")
    return recorded.get(os.path.basename(path)) if isinstance(recorded, dict) else None


_CHECKED = {}   # (real path, device, inode, size, mtime) -> sha256: a file read again is not hashed again


def _sha256_once(path):
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _CHECKED:
        _CHECKED[key] = sha256_of(path)
    return _CHECKED[key]


def check_recorded_sha256(path, error=OutputError) -> bool:
    """True if the manifest of ``path``'s folder recorded a sha256 for it and the file still has it;
    False if none was recorded; ``error`` (the caller's AlbertMinError) naming the file and the
    folder if it differs: the file is not the one albert_min wrote there (another model's, or corrupted)."""
    recorded = recorded_sha256(path)
    if recorded is None:
        return False
    if _sha256_once(path) != recorded:
        folder = os.path.dirname(os.path.abspath(path))
        raise error(f"{path}: corrupted or replaced: its sha256 differs from the one albert_min recorded in "
                    f"{os.path.join(folder, MANIFEST_FILE)} when it wrote the folder (a file of another model does "
                    f"not belong with this one's files); put back the file it wrote, or, if you replaced it on "
                    f"purpose, record the folder as it is now: python -m albert_min.fingerprint {folder}")
    return True


def files_named(directory, names):
    """``names`` (relative paths in ``directory``), each folder among them replaced by the files below it
    (a run's ``tensorboard/`` folder is recorded file by file)."""
    files = []
    for name in names:
        path = os.path.join(directory, name)
        if os.path.isdir(path) and not os.path.islink(path):
            files += [os.path.join(name, below) for below in _entries(path)[0]]
        else:
            files.append(name)
    return files


def manifest_of(directory, kind, complete, checksums=(), contents=()):
    files, folders, _ = _entries(directory)
    checksums = files_named(directory, checksums)
    manifest = {"written_by": "albert_min", "kind": kind, "complete": complete,
                "files": [f for f in files if f != MANIFEST_FILE], "folders": folders}
    if checksums:
        manifest["sha256"] = {name: sha256_of(os.path.join(directory, name)) for name in checksums}
    if contents:
        manifest["contents"] = {}
        for name in contents:
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                manifest["contents"][name] = json.load(f)
    return manifest


def dump_manifest(manifest, path):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())


def write_manifest(directory, kind, complete, checksums=(), contents=()):
    dump_manifest(manifest_of(directory, kind, complete, checksums, contents), os.path.join(directory, MANIFEST_FILE))


def folders_of(files):
    """Every folder on the way to ``files`` (relative paths)."""
    folders = set()
    for f in files:
        while os.path.dirname(f):
            f = os.path.dirname(f)
            folders.add(f)
    return folders


def foreign_entries(directory):
    """What lies in ``directory`` that its manifest does not list (all of it without a manifest):
    files, folders (shown ``NAME/``; not when something foreign inside is shown), and anything
    neither a file nor a folder (shown ``NAME (symlink)`` etc.), listed or not: albert_min writes none."""
    manifest = read_manifest(directory) or {"files": []}
    listed_files = set(manifest["files"]) | {MANIFEST_FILE}
    # Manifests before folders were listed (the committed weights/*/) imply the folders of their files.
    listed_folders = set(manifest["folders"]) if "folders" in manifest else folders_of(manifest["files"])
    files, folders, others = _entries(directory)
    foreign = [f for f in files if f not in listed_files]
    for path in others:
        mode = os.lstat(os.path.join(directory, path)).st_mode
        what = "symlink" if stat.S_ISLNK(mode) else "fifo" if stat.S_ISFIFO(mode) else \
            "socket" if stat.S_ISSOCK(mode) else "device"
        foreign.append(f"{path} ({what})")
    shown = [d for d in folders if d not in listed_folders
             and not any(f.startswith(d + os.sep) for f in foreign)]
    return sorted(foreign + [d + "/" for d in shown])


def output_record_path(path):
    """Where the record of a file output of a ``recorded`` kind lies: ``.NAME.albert_min.json`` beside it."""
    path = os.path.abspath(path)
    return os.path.join(os.path.dirname(path), f".{os.path.basename(path)}{MANIFEST_FILE}")


def output_record(path):
    """The sha256 values the record beside ``path`` accepts (a list; empty without a readable record)."""
    try:
        with open(output_record_path(path), encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError, RecursionError):
        return []
    ok = (isinstance(record, dict) and record.get("written_by") == "albert_min"
          and record.get("file") == os.path.basename(path) and isinstance(record.get("sha256"), list))
    return [h for h in record["sha256"] if isinstance(h, str)] if ok else []


def why_not_recorded(path, kind):
    """Why the existing file ``path`` is not one albert_min wrote and nobody changed since (a ``recorded``
    kind), or None."""
    record = output_record_path(path)
    if os.path.lexists(record) and not stat.S_ISREG(os.lstat(record).st_mode):
        return f"not {kind.name}: {record} is not a regular file"
    hashes = output_record(path)
    if not hashes:
        return (f"not {kind.name}: no record of it ({record}, which albert_min writes beside each such "
                "file with its sha256)")
    if sha256_of(path) not in hashes:
        return f"changed since albert_min wrote it (its sha256 is not the one recorded in {record})"
    return None
