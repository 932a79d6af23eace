#!/usr/bin/env python3
"""Soak test of the real `assertwatch run` daemon under log rotation, kill -9, a full state disk,
malformed input, a 100 MB line, binary files and an assert flood.

Writes training-like logs with a known set of device-side asserts (each with a unique id in its
`block: [ID,0,0]` field) while injecting faults, then reads the daemon's SQLite store and reports,
for the `jobs` source, which ids were lost or stored twice, plus the daemon's peak RSS and its own
error counters. Python 3 standard library only; every HTTP request goes to 127.0.0.1 and every
loop is bounded. See docs/soak.md.

Exit status: 0 when nothing was lost, nothing doubled and peak RSS stayed under --max-rss-mib;
1 when the soak ran and one of those failed (or the daemon crashed or the run did not finish);
2 for a usage or environment error.
"""

import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

MiB = 1 << 20

# Sizes of the two modes. `rate` is the pace of ordinary `jobs` lines (lines/s); faults and
# asserts are placed along the stream of lines, so the schedule depends only on the seed.
MODES = {
    "full": {
        "lines": 1_000_000,
        "asserts": 1000,
        "files": 100,
        "kills": 20,
        "renames": 40,
        "copytruncates": 20,
        "long_line": 100 * MiB,
        "garbage_files": 4,
        "garbage_bytes": 4 * MiB,
        "flood": 20_000,
        "diskfull_asserts": 8,
        "rate": 5000,
        "timeout": 1800,
        "catchup": 240,
    },
    "short": {
        "lines": 100_000,
        "asserts": 100,
        "files": 20,
        "kills": 3,
        "renames": 6,
        "copytruncates": 4,
        "long_line": 10 * MiB,
        "garbage_files": 2,
        "garbage_bytes": 2 * MiB,
        "flood": 5000,
        "diskfull_asserts": 4,
        "rate": 2500,
        "timeout": 300,
        "catchup": 90,
    },
}

# Lines between two asserts of one file; the daemon's grouping gap is 40 lines.
ASSERT_GAP = 60
# Lines between two forged asserts of the flood, so that each is its own incident.
FLOOD_GAP = 45
# Forged ids start here so that they can never be mistaken for `jobs` ids.
FLOOD_ID_BASE = 10_000_000
# How long to wait for asserts to become visible before a copytruncate or a kill.
VISIBLE_WAIT_S = 45
# Longest disk-full period (it ends earlier once the store has failed).
DISKFULL_MAX_S = 20
STATE_TMPFS_SIZE = "32m"

CONFIG = """\
listen: "127.0.0.1:{port}"
state_dir: ./state
logs:
  - name: jobs
    paths: ["./logs/jobs/*.log"]
    max_incidents_per_minute: 1000000
  - name: flood
    paths: ["./logs/flood/*.log"]
gpu:
  backend: none
incidents:
  quiet_period: 500ms
  max_per_minute: {flood_limit}
tailing:
  rescan_interval: 500ms
  checkpoint_interval: 200ms
"""

ERROR_COUNTERS = [
    "assertwatch_log_read_errors_total",
    "assertwatch_log_lines_truncated_total",
    "assertwatch_store_errors_total",
    "assertwatch_checkpoint_errors_total",
    "assertwatch_incidents_suppressed_total",
    "assertwatch_kmsg_lost_records_total",
]
PROGRESS_COUNTERS = [
    "assertwatch_log_bytes_total",
    "assertwatch_log_lines_total",
    "assertwatch_log_rotations_total",
    "assertwatch_incidents_total",
]


def assert_block(ident):
    return (
        f"../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [{ident},0,0], "
        "thread: [0,0,0] Assertion `index out of bounds` failed.\n"
        f"../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [{ident},0,0], "
        "thread: [1,0,0] Assertion `index out of bounds` failed.\n"
        "Traceback (most recent call last):\n"
        '  File "/job/train.py", line 88, in <module>\n'
        "    loss.backward()\n"
        "RuntimeError: CUDA error: device-side assert triggered\n"
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1.\n"
    ).encode()


ASSERT_BLOCK_LINES = 7


def forged_block(ident):
    return (
        "../aten/src/ATen/native/cuda/ScatterGatherKernel.cu:367: operator(): "
        f"block: [{ident},0,0], thread: [0,0,0] Assertion `idx_dim >= 0 && idx_dim < index_size "
        '&& "index out of bounds"` failed.\n'
        "RuntimeError: CUDA error: device-side assert triggered\n"
    ).encode()


def log(msg):
    print(f"soak: {msg}", flush=True)


class Failure(Exception):
    """The soak could not run to the end (exit 1)."""


class UsageError(Exception):
    """Bad arguments or environment (exit 2)."""


# ---------------------------------------------------------------------------------------------
# HTTP and metrics


def http_get(port, path, timeout=5.0):
    """GET http://127.0.0.1:port/path; returns (status, body) or (0, error text)."""
    url = f"http://127.0.0.1:{port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")
    except (OSError, ValueError) as e:
        return 0, str(e)


SAMPLE_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def parse_metrics(text):
    """Sum of every sample per metric name, and the samples with their label sets."""
    sums, samples = {}, []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE_RE.match(line)
        if not m:
            continue
        try:
            v = float(m.group(3))
        except ValueError:
            continue
        name = m.group(1)
        sums[name] = sums.get(name, 0.0) + v
        samples.append((name, m.group(2) or "", v))
    return sums, samples


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_status(pid):
    """VmHWM and VmRSS of `pid` in KiB, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    out = {}
    for line in text.splitlines():
        if line.startswith(("VmHWM:", "VmRSS:")):
            k, v = line.split(":", 1)
            out[k] = int(v.split()[0])
    return out


# ---------------------------------------------------------------------------------------------
# The daemon


class Daemon:
    """Every incarnation of `assertwatch run` in the work dir, with an RSS sampler and a scraper."""

    def __init__(self, binary, workdir, port, events):
        self.binary = binary
        self.workdir = workdir
        self.port = port
        self.events = events
        self.proc = None
        self.incarnations = []  # dicts: pid, started, ready_s, hwm_kib, end, returncode
        self.lock = threading.Lock()
        self.peak_hwm_kib = 0
        self.last_scrape = {}  # incarnation index -> (time, sums)
        self.crashes = []
        self.stop_flag = threading.Event()
        self.log_path = os.path.join(workdir, "daemon.log")
        self.sampler = threading.Thread(target=self._sample_loop, daemon=True)
        self.sampler.start()

    # -- lifecycle

    def start(self, ready_timeout=30.0):
        with open(self.log_path, "ab") as f:
            f.write(f"=== soak: starting incarnation {len(self.incarnations) + 1} "
                    f"at {time.strftime('%H:%M:%S')} ===\n".encode())
        logf = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "info")
        env.setdefault("NO_COLOR", "1")
        started = time.time()
        proc = subprocess.Popen(
            [self.binary, "run", "--config", os.path.join(self.workdir, "config.yaml")],
            cwd=self.workdir,
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=logf,
            env=env,
            start_new_session=True,
        )
        logf.close()
        inc = {"pid": proc.pid, "started": started, "ready_s": None, "hwm_kib": 0,
               "end": None, "ended_at": None, "returncode": None}
        with self.lock:
            self.proc = proc
            self.incarnations.append(inc)
        deadline = time.time() + ready_timeout
        while time.time() < deadline:
            if proc.poll() is not None:
                raise Failure(f"daemon exited with {proc.returncode} while starting "
                              f"(see {self.log_path})")
            if http_get(self.port, "/readyz", timeout=1.0)[0] == 200:
                inc["ready_s"] = round(time.time() - started, 3)
                self.events.add("daemon_ready", pid=proc.pid, ready_s=inc["ready_s"],
                                incarnation=len(self.incarnations))
                return
            time.sleep(0.05)
        raise Failure(f"daemon not ready after {ready_timeout:.0f}s (see {self.log_path})")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def _finish(self, how):
        with self.lock:
            proc, self.proc = self.proc, None
            inc = self.incarnations[-1]
        inc["end"] = how
        inc["ended_at"] = time.time()
        inc["returncode"] = proc.returncode
        return inc

    def kill9(self):
        self._sample_once()
        proc = self.proc
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        return self._finish("kill9")

    def terminate(self, timeout=30.0):
        """SIGTERM and wait; returns (exit code, seconds) or (None, timeout) when it hung."""
        self._sample_once()
        proc = self.proc
        t0 = time.time()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            self._finish("sigterm_timeout")
            return None, timeout
        self._finish("sigterm")
        return proc.returncode, round(time.time() - t0, 3)

    def check_crash(self):
        """A daemon that exited by itself is a crash: recorded, and restarted to go on."""
        proc = self.proc
        if proc is None or proc.poll() is None:
            return False
        inc = self._finish("crashed")
        self.crashes.append({"pid": inc["pid"], "returncode": inc["returncode"],
                             "time": time.time()})
        self.events.add("daemon_crashed", pid=inc["pid"], returncode=inc["returncode"])
        log(f"DAEMON CRASHED: pid {inc['pid']} exited with {inc['returncode']}; restarting")
        self.start()
        return True

    def shutdown(self):
        """Cleanup path: kill whatever incarnation is still running."""
        self.stop_flag.set()
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                pass

    # -- sampling

    def _sample_once(self):
        with self.lock:
            proc = self.proc
            inc = self.incarnations[-1] if self.incarnations else None
        if proc is None or inc is None:
            return
        st = proc_status(proc.pid)
        if st and "VmHWM" in st:
            inc["hwm_kib"] = max(inc["hwm_kib"], st["VmHWM"])
            self.peak_hwm_kib = max(self.peak_hwm_kib, st["VmHWM"])

    def _sample_loop(self):
        last_scrape = 0.0
        while not self.stop_flag.wait(0.2):
            self._sample_once()
            if time.time() - last_scrape >= 2.0:
                last_scrape = time.time()
                self.scrape()

    def scrape(self):
        """Scrapes /metrics of the current incarnation; keeps the last answer per incarnation."""
        with self.lock:
            if self.proc is None:
                return None
            idx = len(self.incarnations) - 1
        status, body = http_get(self.port, "/metrics", timeout=3.0)
        if status != 200:
            return None
        sums, samples = parse_metrics(body)
        with self.lock:
            if idx == len(self.incarnations) - 1:
                self.last_scrape[idx] = (time.time(), sums, samples)
        return sums, samples


# ---------------------------------------------------------------------------------------------
# Event log


class Events:
    def __init__(self, path):
        self.t0 = time.time()
        self.items = []
        self.f = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def add(self, kind, **kw):
        e = {"t": round(time.time() - self.t0, 3), "event": kind, **kw}
        self.items.append(e)
        self.f.write(json.dumps(e) + "\n")
        self.f.flush()
        return e

    def close(self):
        self.f.close()


# ---------------------------------------------------------------------------------------------
# The writers


class JobFile:
    def __init__(self, logdir, index):
        self.name = f"train-{index:03d}.log"
        self.path = os.path.join(logdir, self.name)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.since_assert = 10**9  # lines since the last assert in the current file
        self.generation = 0  # bumped by every rotation and truncation
        self.ids = []  # ids written to the current generation
        self.rotated_suffix = 0
        self.lines = 0

    def write(self, data, lines):
        os.write(self.fd, data)
        self.since_assert += lines
        self.lines += lines


class Soak:
    def __init__(self, args, workdir, outdir):
        self.args = args
        self.mode = dict(MODES["short" if args.short else "full"])
        for key in ("lines", "asserts", "files", "kills", "rate", "flood"):
            v = getattr(args, key, None)
            if v is not None:
                self.mode[key] = v
        self.rng = random.Random(args.seed)
        self.workdir = workdir
        self.outdir = outdir
        self.jobs_dir = os.path.join(workdir, "logs", "jobs")
        self.flood_dir = os.path.join(workdir, "logs", "flood")
        self.state_dir = os.path.join(workdir, "state")
        self.events = Events(os.path.join(workdir, "soak-events.jsonl"))
        self.port = free_port()
        self.daemon = None
        self.mounted = False
        self.notes = []
        self.written = {}  # id -> {file, generation, t, line}
        self.confirmed = set()  # ids seen through the API
        self.rotated_pending = set()  # ids in rotated-away files not yet confirmed
        self.jobs_lines = 0  # every line written to `jobs` files (ordinary, malformed, asserts)
        self.ordinary = 0  # ordinary lines, the clock of the schedule
        self.flood_lines = 0
        self.bytes_written = 0
        self.step = 0
        self.malformed = 0
        self.fault_counts = {}
        self.waits = []
        self.diskfull = None
        self.diskfull_summary = None
        self.kills_done = 0

    # -- utilities

    def count(self, kind):
        self.fault_counts[kind] = self.fault_counts.get(kind, 0) + 1

    def ordinary_lines(self, n):
        out = []
        for _ in range(n):
            s = self.step
            self.step += 1
            loss = 2.0 / (1 + s / 5000) + ((s * 7919) % 1000) / 10000
            gnorm = ((s * 104729) % 997) / 100
            out.append(f"step {s} loss {loss:.4f} lr 3.0e-04 grad_norm {gnorm:.2f}"
                       f" tokens/s {20000 + (s * 31) % 5000}\n")
        return "".join(out).encode()

    def malformed_line(self):
        kind = self.rng.randrange(6)
        if kind == 0:
            return (b"step " + str(self.step).encode()
                    + b" loss \xff\xfe\xfd bad utf-8 \xc3\x28 \xe2\x82\n")
        if kind == 1:
            return b"step \x00\x00\x00 nul bytes \x00 in the middle\x00\n"
        if kind == 2:
            return b"step " + str(self.step).encode() + b" loss 0.5000 lr 3.0e-04\r\n"
        if kind == 3:
            return b"progress 10%\rprogress 20%\rprogress 30%\r\r\n"
        raw = self.rng.randbytes(self.rng.randint(1, 300)).replace(b"\n", b"\x01")
        return raw + b"\n"

    def write_jobs(self, f, data, lines):
        f.write(data, lines)
        self.jobs_lines += lines
        self.bytes_written += len(data)

    def write_assert(self, f, ident):
        if f.since_assert < ASSERT_GAP:
            pad = ASSERT_GAP - f.since_assert
            self.write_jobs(f, self.ordinary_lines(pad), pad)
            self.ordinary += pad
        self.write_jobs(f, assert_block(ident), ASSERT_BLOCK_LINES)
        f.since_assert = 0
        f.ids.append(ident)
        self.written[ident] = {"file": f.name, "generation": f.generation,
                               "t": time.time(), "t_rel": round(time.time() - self.events.t0, 3),
                               "daemon_up": self.daemon.alive(),
                               "in_diskfull": self.diskfull is not None}

    # -- visibility through the API

    def poll_visible(self, ids):
        """Adds to `confirmed` the pending ids among `ids` that the API shows."""
        pending = [i for i in ids if i not in self.confirmed]
        if not pending:
            return set()
        since = min(self.written[i]["t"] for i in pending) - 5
        q = urllib.parse.urlencode({
            "kind": "device_assert",
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(since)),
            "limit": 1000,
        })
        status, body = http_get(self.port, f"/api/v1/incidents?{q}", timeout=5.0)
        if status != 200:
            return set(pending)
        try:
            rows = json.loads(body)
        except ValueError:
            return set(pending)
        for r in rows:
            if r.get("source_name") != "jobs":
                continue
            b = r.get("block")
            if isinstance(b, list) and b and isinstance(b[0], int):
                self.confirmed.add(b[0])
        return {i for i in pending if i not in self.confirmed}

    def wait_visible(self, ids, why):
        """Waits (bounded) until every id in `ids` is visible; returns the ids still missing."""
        t0 = time.time()
        missing = self.poll_visible(ids)
        while missing and time.time() - t0 < VISIBLE_WAIT_S:
            time.sleep(0.2)
            self.daemon.check_crash()
            missing = self.poll_visible(ids)
        waited = round(time.time() - t0, 3)
        self.waits.append({"why": why, "ids": len(ids), "waited_s": waited,
                           "missing": sorted(missing)})
        if missing:
            self.events.add("visible_wait_timeout", why=why, missing=sorted(missing),
                            waited_s=waited)
            log(f"WARNING: {len(missing)} ids not visible after {waited}s before {why}: "
                f"{sorted(missing)[:20]}")
        return missing

    # -- faults

    def fault_rename(self, f):
        f.rotated_suffix += 1
        new = f"{f.path}.{f.rotated_suffix}"
        os.close(f.fd)
        os.rename(f.path, new)
        self.rotated_pending.update(i for i in f.ids if i not in self.confirmed)
        f.fd = os.open(f.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        f.since_assert = 10**9
        f.generation += 1
        f.ids = []
        self.count("rename")
        self.events.add("rename", file=f.name, to=os.path.basename(new))

    def fault_copytruncate(self, f):
        missing = self.wait_visible(list(f.ids), f"copytruncate of {f.name}")
        if missing:
            self.events.add("copytruncate_skipped", file=f.name, missing=sorted(missing))
            self.notes.append(f"copytruncate of {f.name} skipped: ids {sorted(missing)} "
                              f"not visible after {VISIBLE_WAIT_S}s")
            return
        f.rotated_suffix += 1
        new = f"{f.path}.{f.rotated_suffix}"
        shutil.copyfile(f.path, new)
        os.truncate(f.path, 0)
        f.since_assert = 10**9
        f.generation += 1
        f.ids = []
        self.count("copytruncate")
        self.events.add("copytruncate", file=f.name, copy=os.path.basename(new))

    def fault_kill(self, down_lines):
        pending = sorted(self.rotated_pending - self.confirmed)
        if pending:
            self.wait_visible(pending, "kill -9 (asserts in rotated files)")
        self.rotated_pending -= self.confirmed
        inc = self.daemon.kill9()
        lag = self.checkpoint_lag()
        self.kills_done += 1
        self.count("kill9")
        self.events.add("kill9", pid=inc["pid"], n=self.kills_done, down_lines=down_lines,
                        rotated_undrained=sorted(self.rotated_pending), checkpoint_lag=lag)
        if self.rotated_pending:
            self.notes.append(f"kill -9 #{self.kills_done} with ids {sorted(self.rotated_pending)} "
                              "of rotated files not yet visible")
        return self.ordinary + down_lines

    def checkpoint_lag(self):
        """Bytes between the checkpointed position and the end, per file still behind."""
        try:
            with open(os.path.join(self.state_dir, "checkpoints.json"), encoding="utf-8") as f:
                entries = json.load(f).get("files", [])
        except (OSError, ValueError):
            return None
        lag = {}
        for e in entries:
            path = e.get("path", "")
            try:
                st = os.stat(path)
            except OSError:
                continue
            if st.st_ino == e.get("ino") and st.st_size > e.get("offset", 0):
                lag[os.path.basename(path)] = st.st_size - e.get("offset", 0)
        return lag

    def fault_long_line(self, f):
        size = self.mode["long_line"]
        if f.since_assert < ASSERT_GAP:
            pad = ASSERT_GAP - f.since_assert
            self.write_jobs(f, self.ordinary_lines(pad), pad)
            self.ordinary += pad
        chunk = (b"long-line " * (MiB // 10 + 1))[:MiB]
        left = size - 1
        while left > 0:
            n = min(left, MiB)
            os.write(f.fd, chunk[:n])
            left -= n
        os.write(f.fd, b"\n")
        f.since_assert += 1
        f.lines += 1
        self.jobs_lines += 1
        self.bytes_written += size
        ident = self.next_extra_id()
        self.write_assert(f, ident)
        self.count("long_line")
        self.events.add("long_line", file=f.name, bytes=size, then_assert=ident)

    def fault_garbage(self, k):
        path = os.path.join(self.jobs_dir, f"garbage-{k}.log")
        data = self.rng.randbytes(self.mode["garbage_bytes"])
        if k % 2 == 1:
            data = data.replace(b"\n", b"")  # one endless binary line, no newline at all
        with open(path, "ab") as g:
            g.write(data)
        self.bytes_written += len(data)
        self.count("garbage_file")
        self.events.add("garbage_file", file=os.path.basename(path), bytes=len(data),
                        newlines=data.count(b"\n"))

    def fault_flood(self):
        n = self.mode["flood"]
        path = os.path.join(self.flood_dir, "flood.log")
        t0 = time.time()
        filler = "".join(f"flood filler {j}\n" for j in range(FLOOD_GAP)).encode()
        with open(path, "ab") as g:
            buf = []
            for i in range(n):
                buf.append(filler)
                buf.append(forged_block(FLOOD_ID_BASE + i))
                if len(buf) >= 2000:
                    g.write(b"".join(buf))
                    buf = []
            buf.append(filler)
            g.write(b"".join(buf))
        self.flood_lines += n * (FLOOD_GAP + 2) + FLOOD_GAP
        self.count("flood")
        self.events.add("flood", forged=n, seconds=round(time.time() - t0, 3))

    def diskfull_start(self):
        filler = os.path.join(self.state_dir, "filler")
        written = 0
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for size in (MiB, 4096, 512):
                block = b"\0" * size
                for _ in range(1024):  # the tmpfs is small: bounded, well past its size
                    try:
                        n = os.write(fd, block)
                    except OSError:
                        break
                    written += n
                    if n < size:
                        break
        finally:
            os.close(fd)
        self.count("disk_full")
        self.events.add("disk_full_start", filler_bytes=written)

    def store_errors_now(self):
        sc = self.daemon.scrape()
        return sc[0].get("assertwatch_store_errors_total", 0.0) if sc else 0.0

    def diskfull_end(self):
        sc = self.daemon.scrape()
        names = ("assertwatch_store_errors_total", "assertwatch_checkpoint_errors_total")
        errs = {n: sc[0].get(n, 0.0) for n in names} if sc else None
        os.remove(os.path.join(self.state_dir, "filler"))
        self.events.add("disk_full_end", seconds=round(time.time() - self.diskfull["t"], 3),
                        ids=self.diskfull["ids"], counters_before_freeing=errs,
                        extended_s=self.diskfull.get("extended", 0))
        self.diskfull_summary = {"seconds": round(time.time() - self.diskfull["t"], 1),
                                 "asserts_written": len(self.diskfull["ids"]),
                                 "counters_before_freeing": errs}
        if errs and not errs["assertwatch_store_errors_total"]:
            self.notes.append(f"the store did not fail during the {DISKFULL_MAX_S}s disk-full "
                              "period (SQLite had room in its files)")
        self.diskfull = None

    # -- the schedule

    def next_extra_id(self):
        ident = self.next_id
        self.next_id += 1
        return ident

    def plan(self):
        m, rng = self.mode, self.rng
        L = m["lines"]
        events = []
        for p in sorted(rng.uniform(0.04, 0.9) * L for _ in range(m["kills"])):
            events.append((int(p), "kill", {"down": int(rng.uniform(0.001, 0.006) * L) + 200}))
        for _ in range(m["renames"]):
            events.append((int(rng.uniform(0.02, 0.95) * L), "rename", {}))
        for _ in range(m["copytruncates"]):
            events.append((int(rng.uniform(0.05, 0.95) * L), "copytruncate", {}))
        events.append((int(rng.uniform(0.2, 0.6) * L), "long_line", {}))
        for k in range(m["garbage_files"]):
            events.append((int(rng.uniform(0.05, 0.8) * L), "garbage", {"k": k}))
        events.append((int(rng.uniform(0.3, 0.6) * L), "flood", {}))
        diskfull_at = int(rng.uniform(0.4, 0.7) * L)
        diskfull_len = int(m["rate"] * 5)  # about 5 s of writes
        if self.can_diskfull:
            events.append((diskfull_at, "diskfull", {"len": diskfull_len}))
        # Each kind keeps its random position; equal positions keep this order.
        order = {"diskfull": 0, "kill": 1, "rename": 2, "copytruncate": 3, "long_line": 4,
                 "garbage": 5, "flood": 6}
        events.sort(key=lambda e: (e[0], order[e[1]]))
        # Assert positions: all ids but one (the one after the long line), a few of them inside
        # the disk-full period.
        n_regular = m["asserts"] - 1
        inside = m["diskfull_asserts"] if self.can_diskfull else 0
        pos = [rng.uniform(0.0, 0.98) * L for _ in range(n_regular - inside)]
        pos += [diskfull_at + rng.uniform(0.1, 0.9) * diskfull_len for _ in range(inside)]
        asserts = sorted(int(p) for p in pos)
        return events, asserts, diskfull_len

    # -- the run

    def run(self):
        m = self.mode
        os.makedirs(self.jobs_dir)
        os.makedirs(self.flood_dir)
        os.makedirs(self.state_dir)
        self.can_diskfull = self.setup_tmpfs()
        with open(os.path.join(self.workdir, "config.yaml"), "w", encoding="utf-8") as f:
            f.write(CONFIG.format(port=self.port, flood_limit=self.args.flood_limit))
        events, asserts, diskfull_len = self.plan()
        self.next_id = 1
        files = [JobFile(self.jobs_dir, i) for i in range(m["files"])]
        self.events.add("plan", seed=self.args.seed, mode=m, port=self.port,
                        faults=[(p, k, a) for p, k, a in events])
        self.daemon = Daemon(self.args.binary, self.workdir, self.port, self.events)
        self.daemon.start()
        t_start = time.time()
        deadline = t_start + m["timeout"]
        L = m["lines"]
        rate = m["rate"]
        batch = max(50, rate // 20)
        ei = ai = 0
        restart_at = None
        last_progress = t_start
        # Bounded: every iteration writes `batch` ordinary lines, and the loop ends once `L` are
        # written and every event and assert is done (events wait at most for a restart).
        while self.ordinary < L or ei < len(events) or ai < len(asserts) or restart_at is not None \
                or self.diskfull is not None:
            if time.time() > deadline:
                raise Failure(f"the write phase did not finish in {m['timeout']}s")
            up = restart_at is None
            if up:
                self.daemon.check_crash()
            if not up and self.ordinary >= restart_at:
                self.daemon.start()
                restart_at = None
                up = True
            if self.diskfull is not None and self.ordinary >= self.diskfull["until"]:
                # SQLite may still have room in its write-ahead log: keep the disk full (up to
                # DISKFULL_MAX_S) until the store has failed at least once, so that the period
                # exercises the daemon's store retry path and not only its checkpoint writes.
                if self.store_errors_now() == 0 and \
                        time.time() - self.diskfull["t"] < DISKFULL_MAX_S:
                    self.diskfull["until"] = self.ordinary + rate
                    self.diskfull["extended"] = self.diskfull.get("extended", 0) + 1
                else:
                    self.diskfull_end()
            # Faults due now. Faults that need the daemon (kill, rotation, truncation, disk full)
            # wait while it is down or the disk is full; the others run regardless.
            while ei < len(events) and events[ei][0] <= self.ordinary:
                _, kind, a = events[ei]
                blocked = kind in ("kill", "rename", "copytruncate", "diskfull") and (
                    restart_at is not None or self.diskfull is not None)
                if blocked:
                    break
                ei += 1
                if kind == "kill":
                    restart_at = self.fault_kill(a["down"])
                elif kind == "rename":
                    self.fault_rename(self.rng.choice(files))
                elif kind == "copytruncate":
                    self.fault_copytruncate(self.rng.choice(files))
                elif kind == "long_line":
                    self.fault_long_line(self.rng.choice(files))
                elif kind == "garbage":
                    self.fault_garbage(a["k"])
                elif kind == "flood":
                    self.fault_flood()
                elif kind == "diskfull":
                    self.diskfull = {"until": self.ordinary + a["len"], "t": time.time(), "ids": []}
                    self.diskfull_start()
            # Asserts due now (written whether the daemon is up, down or its disk full).
            while ai < len(asserts) and asserts[ai] <= self.ordinary:
                ai += 1
                ident = self.next_extra_id()
                self.write_assert(self.rng.choice(files), ident)
                if self.diskfull is not None:
                    self.diskfull["ids"].append(ident)
            # Ordinary lines, spread over a few random files, with the odd malformed line.
            if self.ordinary < L:
                n = min(batch, L - self.ordinary)
                parts = self.rng.randint(1, 5)
                for k in range(parts):
                    share = n // parts + (1 if k < n % parts else 0)
                    if share == 0:
                        continue
                    f = self.rng.choice(files)
                    data = self.ordinary_lines(share)
                    lines = share
                    if self.rng.random() < 0.25:
                        bad = self.malformed_line()
                        cut = data.index(b"\n") + 1
                        data = data[:cut] + bad + data[cut:]
                        lines += 1
                        self.malformed += 1
                    self.write_jobs(f, data, lines)
                    self.ordinary += share
            elif restart_at is not None or self.diskfull is not None or ei < len(events):
                # Lines are all written but a restart, the end of the disk-full period or a
                # blocked fault is still ahead on the line clock: advance it with filler lines.
                f = self.rng.choice(files)
                self.write_jobs(f, self.ordinary_lines(batch), batch)
                self.ordinary += batch
            # Pace.
            ahead = self.ordinary / rate - (time.time() - t_start)
            if ahead > 0:
                time.sleep(min(ahead, 1.0))
            if time.time() - last_progress >= 10:
                last_progress = time.time()
                log(f"{self.ordinary}/{L} lines, {self.next_id - 1} asserts, "
                    f"{self.kills_done} kills, {round(time.time() - t_start)}s")
        for f in files:
            os.close(f.fd)
        t_written = time.time()
        self.events.add("writes_done", ordinary=self.ordinary, jobs_lines=self.jobs_lines,
                        asserts=len(self.written))
        log(f"writes done in {t_written - t_start:.1f}s; waiting for the daemon to catch up")
        catchup = self.catch_up()
        final_scrape = self.daemon.scrape()
        code, term_s = self.daemon.terminate()
        self.events.add("sigterm", returncode=code, seconds=term_s)
        t_end = time.time()
        return self.report(t_start, t_written, t_end, catchup, final_scrape, code, term_s)

    def setup_tmpfs(self):
        if os.geteuid() != 0:
            if os.environ.get("CI") in ("true", "1"):
                raise UsageError("the disk-full fault mounts a tmpfs and needs root under CI=true")
            self.notes.append("not root: the disk-full fault was skipped")
            log("not root: skipping the disk-full fault (set CI=true to make this an error)")
            return False
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={STATE_TMPFS_SIZE}", "tmpfs",
                            self.state_dir], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            if os.environ.get("CI") in ("true", "1"):
                raise UsageError(f"mount tmpfs on the state dir failed: {r.stderr.strip()}")
            self.notes.append(f"mount tmpfs failed ({r.stderr.strip()}): disk-full fault skipped")
            return False
        self.mounted = True
        return True

    def read_store(self, readonly):
        path = os.path.join(self.state_dir, "incidents.sqlite")
        if not os.path.exists(path):
            return []
        if readonly:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        else:
            conn = sqlite3.connect(path, timeout=10)
        try:
            rows = conn.execute(
                "SELECT id, dedup_key, created_ms, kind, body FROM incidents").fetchall()
        finally:
            conn.close()
        out = []
        for rid, key, created, kind, body in rows:
            try:
                b = json.loads(body)
            except ValueError:
                b = {}
            out.append({"id": rid, "dedup_key": key, "created_ms": created, "kind": kind,
                        "body": b})
        return out

    def jobs_ids(self, rows):
        ids = {}
        for r in rows:
            b = r["body"]
            if b.get("source_name") != "jobs" or b.get("kind") != "device_assert":
                continue
            blk = b.get("block")
            if isinstance(blk, list) and blk and isinstance(blk[0], int):
                ids.setdefault(blk[0], []).append(r)
        return ids

    def catch_up(self):
        """Polls the store until every id is there (then waits a little for late doubles) or
        nothing changes for a while; bounded by the mode's catch-up time."""
        t0 = time.time()
        expected = set(self.written)
        last_sig, last_change = None, time.time()
        all_seen_at = None
        polls = 0
        while time.time() - t0 < self.mode["catchup"]:
            polls += 1
            self.daemon.check_crash()
            try:
                rows = self.read_store(readonly=True)
            except sqlite3.Error as e:
                self.events.add("catchup_read_error", error=str(e))
                time.sleep(1)
                continue
            ids = self.jobs_ids(rows)
            sc = self.daemon.scrape()
            progress = tuple(sc[0].get(n, 0.0) for n in PROGRESS_COUNTERS) if sc else None
            sig = (len(rows), len(ids), progress)
            if sig != last_sig:
                last_sig, last_change = sig, time.time()
            if expected <= set(ids):
                if all_seen_at is None:
                    all_seen_at = time.time()
                if time.time() - all_seen_at >= 3 and time.time() - last_change >= 3:
                    break
            elif time.time() - last_change >= 20:
                break
            time.sleep(1)
        return {"seconds": round(time.time() - t0, 3), "polls": polls,
                "all_seen": all_seen_at is not None}

    def report(self, t_start, t_written, t_end, catchup, final_scrape, code, term_s):
        rows = self.read_store(readonly=False)
        ids = self.jobs_ids(rows)
        expected = set(self.written)
        found = expected & set(ids)
        lost = sorted(expected - found)
        doubled = sorted(i for i, rs in ids.items() if i in expected and len(rs) > 1)
        unexpected_jobs = [
            {"id": r["id"], "kind": r["body"].get("kind"), "category": r["body"].get("category"),
             "block": r["body"].get("block"), "source": r["body"].get("source")}
            for r in rows
            if r["body"].get("source_name") == "jobs"
            and not (r["body"].get("kind") == "device_assert"
                     and isinstance(r["body"].get("block"), list)
                     and r["body"]["block"] and r["body"]["block"][0] in expected)
        ]
        flood_rows = [r for r in rows if r["body"].get("source_name") == "flood"]
        # Which incarnation stored each flood incident (by creation time).
        starts = [i["started"] * 1000 for i in self.daemon.incarnations]
        flood_by_inc = {}
        for r in flood_rows:
            k = 1 + max((n for n, st in enumerate(starts) if st <= r["created_ms"]), default=0)
            blk = r["body"].get("block") or [None]
            flood_by_inc.setdefault(str(k), []).append(blk[0])
        # The bound holds per source and minute within one incarnation: at most
        # max_per_minute per started minute of each incarnation that read flood lines.
        flood_bound = self.args.flood_limit * sum(
            1 + int(((i["ended_at"] or t_end) - i["started"]) // 60)
            for i in self.daemon.incarnations)
        sums = final_scrape[0] if final_scrape else {}
        # A counter family with no labelled child yet has no sample: that is 0.
        counters = {n: sums.get(n, 0.0) for n in ERROR_COUNTERS}
        # Counters restart at 0 with each incarnation: the sum of the last scrape of each is a
        # lower bound of the total over the run (a kill -9 loses the tail after the last scrape).
        over_run = {n: 0.0 for n in ERROR_COUNTERS}
        for _, (_, s, _) in sorted(self.daemon.last_scrape.items()):
            for n in ERROR_COUNTERS:
                over_run[n] += s.get(n, 0.0)
        labelled = {}
        if final_scrape:
            for name, labels, v in final_scrape[1]:
                if name in ERROR_COUNTERS and v:
                    labelled[f"{name}{labels}"] = v
        peak_mib = self.daemon.peak_hwm_kib / 1024
        write_s = t_written - t_start
        total_lines = self.jobs_lines + self.flood_lines
        detail = {}
        for i in lost:
            w = self.written[i]
            near = [e for e in self.events.items
                    if abs(e["t"] - w["t_rel"]) <= 5 and e["event"] not in ("plan",)]
            detail[str(i)] = {**{k: v for k, v in w.items() if k != "t"}, "events_within_5s": near}
        doubled_detail = {
            str(i): [{"row": r["id"], "dedup_key": r["dedup_key"], "created_ms": r["created_ms"],
                      "source": r["body"].get("source")} for r in ids[i]]
            for i in doubled}
        state_usage = None
        if self.mounted:
            st = os.statvfs(self.state_dir)
            state_usage = {"size_bytes": st.f_blocks * st.f_frsize,
                           "used_bytes": (st.f_blocks - st.f_bfree) * st.f_frsize}
        ok_rss = peak_mib < self.args.max_rss_mib
        warnings = daemon_log_warnings(self.daemon.log_path)
        ck_logged = sum(v for k, v in warnings.items() if "Cannot write checkpoint" in k)
        if ck_logged and not over_run["assertwatch_checkpoint_errors_total"]:
            self.notes.append(f"the daemon logged {ck_logged} failed checkpoint write(s) but "
                              "assertwatch_checkpoint_errors_total stayed 0")
        crashed = bool(self.daemon.crashes)
        rep = {
            "result": "pass" if not lost and not doubled and ok_rss and not crashed and code == 0
            else "fail",
            "mode": "short" if self.args.short else "full",
            "seed": self.args.seed,
            "binary": self.args.binary,
            "settings": self.mode,
            "expected": len(expected),
            "found": len(found),
            "lost": len(lost),
            "doubled": len(doubled),
            "lost_ids": lost,
            "doubled_ids": doubled,
            "lost_detail": detail,
            "doubled_detail": doubled_detail,
            "jobs_other_incidents": unexpected_jobs[:50],
            "jobs_other_incident_count": len(unexpected_jobs),
            "flood": {
                "forged": self.mode["flood"],
                "stored": len(flood_rows),
                "max_per_minute": self.args.flood_limit,
                "stored_bound": flood_bound,
                "within_bound": len(flood_rows) <= flood_bound,
                "stored_by_incarnation": {k: {"count": len(v), "ids": sorted(v)[:10]}
                                          for k, v in sorted(flood_by_inc.items())},
                "suppressed_total_last_scrape":
                    sums.get("assertwatch_incidents_suppressed_total", 0.0),
                "suppressed_total_over_incarnations":
                    over_run["assertwatch_incidents_suppressed_total"],
            },
            "peak_rss_mib": round(peak_mib, 1),
            "max_rss_mib": self.args.max_rss_mib,
            "incarnations": self.daemon.incarnations,
            "crashes": self.daemon.crashes,
            "sigterm": {"returncode": code, "seconds": term_s},
            "error_counters_last_scrape": counters,
            "error_counters_last_scrape_by_label": labelled,
            "error_counters_sum_over_incarnations": over_run,
            "faults": self.fault_counts,
            "malformed_lines": self.malformed,
            "visible_waits": {
                "count": len(self.waits),
                "max_s": max((w["waited_s"] for w in self.waits), default=0),
                "timeouts": [w for w in self.waits if w["missing"]],
            },
            "catchup": catchup,
            "lines": {"jobs": self.jobs_lines, "ordinary": self.ordinary,
                      "flood": self.flood_lines, "total": total_lines},
            "bytes_written": self.bytes_written,
            "write_seconds": round(write_s, 3),
            "wall_seconds": round(t_end - t_start, 3),
            "lines_per_second": round(total_lines / write_s, 1) if write_s > 0 else None,
            "jobs_lines_per_second": round(self.jobs_lines / write_s, 1) if write_s > 0 else None,
            "state_tmpfs": state_usage,
            "disk_full": self.diskfull_summary,
            "daemon_log_warnings": warnings,
            "notes": self.notes,
            "workdir": self.workdir if self.args.keep else None,
        }
        return rep


# ---------------------------------------------------------------------------------------------


LEVEL_RE = re.compile(r"\s(WARN|ERROR)\s+(\S+?):\s(.*)$")


def daemon_log_warnings(path):
    """WARN and ERROR lines of the daemon's log, counted by target and message."""
    counts = {}
    try:
        with open(path, "rb") as f:
            for raw in f:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                m = LEVEL_RE.search(line)
                if not m:
                    continue
                msg = re.split(r"\s\w+=", m.group(3), maxsplit=1)[0].strip()
                key = f"{m.group(1)} {m.group(2)}: {msg}"[:200]
                counts[key] = counts.get(key, 0) + 1
    except OSError:
        return {}
    return counts


def print_report(rep, path):
    log(f"mode={rep['mode']} seed={rep['seed']} wall={rep['wall_seconds']}s "
        f"write={rep['write_seconds']}s lines={rep['lines']['total']} "
        f"({rep['lines_per_second']} lines/s; jobs {rep['lines']['jobs']}, "
        f"flood {rep['lines']['flood']})")
    log(f"faults: {json.dumps(rep['faults'], sort_keys=True)}, malformed lines "
        f"{rep['malformed_lines']}, incarnations {len(rep['incarnations'])}, "
        f"crashes {len(rep['crashes'])}, sigterm exit {rep['sigterm']['returncode']} "
        f"in {rep['sigterm']['seconds']}s")
    fl = rep["flood"]
    log(f"flood: forged={fl['forged']} stored={fl['stored']} (max_per_minute "
        f"{fl['max_per_minute']}, bound over this run {fl['stored_bound']}) "
        f"suppressed_total={fl['suppressed_total_last_scrape']} "
        f"(over incarnations {fl['suppressed_total_over_incarnations']})")
    for n, v in rep["error_counters_last_scrape"].items():
        log(f"  {n} {v}  (over incarnations {rep['error_counters_sum_over_incarnations'][n]})")
    if rep["disk_full"]:
        log(f"disk full: {json.dumps(rep['disk_full'], sort_keys=True)}")
    for k, v in rep["daemon_log_warnings"].items():
        log(f"daemon log: {v} x {k}")
    if rep["jobs_other_incident_count"]:
        log(f"other incidents in jobs: {rep['jobs_other_incident_count']}")
    if rep["lost"]:
        log(f"LOST ids: {rep['lost_ids'][:50]}")
    if rep["doubled"]:
        log(f"DOUBLED ids: {rep['doubled_ids'][:50]}")
    for n in rep["notes"]:
        log(f"note: {n}")
    log(f"report: {path}")
    print(f"soak: expected={rep['expected']} found={rep['found']} lost={rep['lost']} "
          f"doubled={rep['doubled']} peak_rss_mib={rep['peak_rss_mib']:.1f}", flush=True)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--short", action="store_true",
                   help="about 100k lines, 100 asserts, 20 files, 3 kills (1-2 minutes)")
    p.add_argument("--seed", type=int, default=None, help="seed of the schedule (default: random)")
    p.add_argument("--binary", default=None,
                   help="the assertwatch binary (default: target/release/assertwatch)")
    p.add_argument("--out", default=None, help="folder for soak-report.json (default: a temp dir)")
    p.add_argument("--keep", action="store_true",
                   help="keep the work dir (logs, state, daemon.log)")
    p.add_argument("--max-rss-mib", type=float, default=50.0,
                   help="fail when the daemon's peak RSS reaches this (default 50)")
    p.add_argument("--flood-limit", type=int, default=60,
                   help="incidents.max_per_minute, the bound of the flood source (default 60)")
    p.add_argument("--lines", type=int, help=argparse.SUPPRESS)
    p.add_argument("--asserts", type=int, help=argparse.SUPPRESS)
    p.add_argument("--files", type=int, help=argparse.SUPPRESS)
    p.add_argument("--kills", type=int, help=argparse.SUPPRESS)
    p.add_argument("--rate", type=int, help=argparse.SUPPRESS)
    p.add_argument("--flood", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 2**31)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if args.binary is None:
        args.binary = os.path.join(root, "target", "release", "assertwatch")
    args.binary = os.path.abspath(args.binary)
    if not os.access(args.binary, os.X_OK):
        print(f"soak: no executable binary at {args.binary}", file=sys.stderr)
        return 2
    if args.out:
        outdir = os.path.abspath(args.out)
    else:
        outdir = tempfile.mkdtemp(prefix="assertwatch-soak-out-")
    os.makedirs(outdir, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="assertwatch-soak-")

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)

    log(f"mode={'short' if args.short else 'full'} seed={args.seed} binary={args.binary}")
    log(f"work dir {workdir}{' (kept)' if args.keep else ''}; report in {outdir}")
    soak = Soak(args, workdir, outdir)
    status = 1
    rep = None
    try:
        rep = soak.run()
        status = 0 if rep["result"] == "pass" else 1
    except UsageError as e:
        print(f"soak: {e}", file=sys.stderr)
        status = 2
    except Failure as e:
        print(f"soak: FAILED: {e}", file=sys.stderr)
        status = 1
    except SystemExit as e:
        print(f"soak: interrupted (exit {e.code}); cleaning up", file=sys.stderr)
        status = e.code if isinstance(e.code, int) else 1
    finally:
        if soak.daemon is not None:
            soak.daemon.shutdown()
        soak.events.close()
        for name in ("daemon.log", "soak-events.jsonl", "config.yaml"):
            try:
                shutil.copyfile(os.path.join(workdir, name), os.path.join(outdir, name))
            except OSError:
                pass
        if soak.mounted:
            if args.keep:
                # Keep the store on disk: copy it out of the tmpfs before it goes.
                try:
                    shutil.copytree(soak.state_dir, os.path.join(workdir, "state-copy"))
                except OSError:
                    pass
            subprocess.run(["umount", "-l", soak.state_dir], check=False, timeout=30)
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    if rep is not None:
        path = os.path.join(outdir, "soak-report.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(rep, f, indent=2, sort_keys=True)
            f.write("\n")
        print_report(rep, path)
        if not rep["flood"]["within_bound"]:
            log(f"WARNING: the flood source stored {rep['flood']['stored']} incidents, more than "
                f"its bound {rep['flood']['stored_bound']}")
        if rep["crashes"]:
            log(f"FAIL: the daemon crashed {len(rep['crashes'])} time(s)")
        if rep["sigterm"]["returncode"] != 0:
            log(f"FAIL: the daemon exited with {rep['sigterm']['returncode']} on SIGTERM")
        if rep["peak_rss_mib"] >= args.max_rss_mib:
            log(f"FAIL: peak RSS {rep['peak_rss_mib']} MiB >= {args.max_rss_mib} MiB")
    else:
        log(f"no report; daemon log and events in {outdir}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
