"""Finding the step to replay under a debug-state directory, from inside the job's own pod.

When a job keeps its debug state on a volume the daemon cannot see (a PersistentVolumeClaim, an
NFS share mounted only into the job's pod), the daemon cannot name the step's manifest. The replay
pod mounts the same volume, so the harness looks for itself: ``run --find-under DIR`` enumerates
``DIR/<job>/rank-<n>/ring/<entry>/manifest.json`` (the recorder's fixed layout, docs/manifest.md
§1), validates each manifest, skips entries whose state files are missing or of the wrong size
(a torn write, an entry being pruned), keeps those of the failing pod (the manifest's
``job.kubernetes.pod``, or its ``job.hostname``, which is the pod name in a pod without host
networking) and rank when given, created no later than the incident, and picks the newest: the
highest ``created_at``, ties broken by ``global_step`` -- the same order the daemon uses.

The directory is searched without following symlinked job or rank directories out of it, and at
most ``MAX_CANDIDATES`` manifests are read.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Tuple

from . import manifest as mf

MAX_CANDIDATES = 4096


class NotFound(Exception):
    """No entry matched; ``reason`` is a stable snake_case word, the message says why."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason


@dataclass
class Search:
    """The outcome of one search: the chosen manifest and what was passed over on the way."""

    path: Optional[str] = None
    doc: Optional[Dict[str, Any]] = None
    examined: int = 0
    rejected: List[str] = field(default_factory=list)
    other_pods: int = 0
    later: int = 0
    incomplete: int = 0


def parse_time(text: str) -> datetime:
    """An RFC 3339 UTC time as the manifest writes it (``...Z``), to the microsecond."""
    if not mf.PATTERNS["created_at"].match(text):
        raise ValueError(f"not an RFC 3339 UTC time like 2026-01-02T03:04:05Z: {text!r}")
    head, _, frac = text[:-1].partition(".")
    micros = int((frac + "000000")[:6]) if frac else 0
    return datetime.strptime(head, "%Y-%m-%dT%H:%M:%S").replace(microsecond=micros, tzinfo=timezone.utc)


def _subdirs(path: str) -> List[str]:
    """Real (not symlinked) subdirectories of ``path``, sorted; nothing on error."""
    out = []
    try:
        with os.scandir(path) as it:
            for entry in it:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        out.append(entry.path)
                except OSError:
                    continue
    except OSError:
        return []
    return sorted(out)


def candidates(directory: str) -> List[str]:
    """Manifest paths in the recorder's layout under ``directory`` (at most MAX_CANDIDATES)."""
    out: List[str] = []
    for job in _subdirs(directory):
        for rank in _subdirs(job):
            if not os.path.basename(rank).startswith("rank-"):
                continue
            for entry in _subdirs(os.path.join(rank, "ring")):
                path = os.path.join(entry, mf.MANIFEST_NAME)
                if os.path.lexists(path):
                    out.append(path)
                    if len(out) >= MAX_CANDIDATES:
                        return out
    return out


def _files_present(path: str, doc: Dict[str, Any]) -> bool:
    base = os.path.dirname(path)
    for entry in doc["files"]:
        try:
            st = os.lstat(os.path.join(base, entry["path"]))
        except OSError:
            return False
        if not stat.S_ISREG(st.st_mode) or st.st_size != entry["bytes"]:
            return False
    return True


def _of_pod(doc: Dict[str, Any], pod: str) -> bool:
    job = doc["job"]
    k8s = job.get("kubernetes") or {}
    if k8s.get("pod"):
        return k8s["pod"] == pod
    return job.get("hostname") == pod


def search(
    directory: str,
    pod: Optional[str] = None,
    rank: Optional[int] = None,
    before: Optional[datetime] = None,
) -> Search:
    """Searches ``directory``; ``Search.path`` is None when nothing matched."""
    found = Search()
    best: Optional[Tuple[Tuple[datetime, int], str, Dict[str, Any]]] = None
    for path in candidates(directory):
        found.examined += 1
        try:
            doc = mf.load(path)
        except mf.ManifestError as exc:
            found.rejected.append(f"{path}: {exc}")
            continue
        if pod is not None and not _of_pod(doc, pod):
            found.other_pods += 1
            continue
        if rank is not None and doc["job"].get("rank") != rank:
            found.other_pods += 1
            continue
        created = parse_time(doc["created_at"])
        if before is not None and created > before:
            found.later += 1
            continue
        if not _files_present(path, doc):
            found.incomplete += 1
            continue
        key = (created, doc["step"]["global_step"])
        if best is None or key > best[0]:
            best = (key, path, doc)
    if best is not None:
        found.path, found.doc = best[1], best[2]
    return found


def find(
    directory: str,
    pod: Optional[str] = None,
    rank: Optional[int] = None,
    before: Optional[datetime] = None,
) -> Tuple[str, Dict[str, Any]]:
    """The chosen manifest's path and document, or ``NotFound`` saying what was passed over."""
    if not os.path.isdir(directory):
        raise NotFound("no_debug_state", f"{directory} is not a directory in this container")
    s = search(directory, pod, rank, before)
    if s.path is None or s.doc is None:
        parts = [f"{s.examined} manifest(s) under {directory}"]
        if s.rejected:
            parts.append(f"{len(s.rejected)} rejected (first: {s.rejected[0]})")
        if s.other_pods:
            parts.append(f"{s.other_pods} of another pod or rank")
        if s.later:
            parts.append(f"{s.later} created after the incident")
        if s.incomplete:
            parts.append(f"{s.incomplete} incomplete")
        raise NotFound("no_debug_state", "no entry to replay: " + ", ".join(parts))
    return s.path, s.doc
