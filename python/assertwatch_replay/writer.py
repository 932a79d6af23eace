"""Background writer: a daemon thread with a bounded, newest-wins queue, flushed when the process ends.

The recorder hands each step to a ``BackgroundWriter``; serialising, writing, fsyncing and pruning
happen on the writer's thread, so the training thread only pays for taking references. When the
writer falls behind (a slow disk), ``put`` drops the oldest queued step instead of blocking: the
steps that matter for a crash are the newest ones.

Everything still queued is written when the process ends through

- a normal exit (``atexit``),
- an uncaught exception (``sys.excepthook``, chained to the previous hook; ``atexit`` follows),
- ``SIGTERM`` (sent by torchrun's agent and by Kubernetes): a handler flushes, then hands the
  signal on to the previous Python handler, or, where there was none, restores the default action
  and re-sends the signal so the process still dies of it with the usual exit status.

``SIGKILL``, a segfault and ``os._exit`` run none of these: the steps still queued are lost, while
every entry already committed stays valid (a commit is an atomic rename).
"""

from __future__ import annotations

import atexit
import collections
import logging
import os
import queue
import signal
import sys
import threading
import time
import weakref
from typing import Any, Callable, Deque, Dict, Optional

log = logging.getLogger("assertwatch_replay")

DEFAULT_EXIT_TIMEOUT_S = 20.0


class BackgroundWriter:
    """Runs ``handler(item)`` for queued items on one daemon thread, newest-wins when full.

    ``put`` is called from one producer thread (the training loop) and takes no lock: the queue is
    a ``collections.deque``, whose ``append`` and ``popleft`` are atomic, and the writer is woken
    through a ``queue.SimpleQueue`` only when it is idle. A lock and condition serve ``flush`` and
    the writer's bookkeeping, off the training thread's path.
    """

    def __init__(self, handler: Callable[[Any], None], maxsize: int = 2, name: str = "assertwatch-writer",
                 on_drop: Optional[Callable[[Any], None]] = None):
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self._handler = handler
        self._on_drop = on_drop
        self.maxsize = maxsize
        self.name = name
        # An RLock: a SIGTERM handler may run flush() on the main thread while that thread holds
        # the lock in close(); Condition.wait releases every level of an RLock.
        self._cond = threading.Condition(threading.RLock())
        self._queue: Deque[Any] = collections.deque()
        self._wake: "queue.SimpleQueue[None]" = queue.SimpleQueue()
        self._idle = False  # the writer is blocked on _wake (set by the writer only)
        self._busy = False  # the writer holds an item (changed under _cond)
        self._stop = False
        self._thread: Optional[threading.Thread] = None
        # Counters (read them after flush() for exact values).
        self.written = 0
        self.dropped = 0
        self.busy_s = 0.0
        self.cpu_s = 0.0
        self.max_queued = 0
        _forked_resets.add(self)

    # ------------------------------------------------------------------ producer side

    def put(self, item: Any) -> None:
        thread = self._thread
        if thread is None or not thread.is_alive():
            self._ensure_thread()
        q = self._queue
        q.append(item)
        n = len(q)
        dropped = None
        if n > self.maxsize:
            try:
                dropped = q.popleft()  # the oldest; the writer may have taken it a moment ago
            except IndexError:
                pass
            else:
                self.dropped += 1
                n -= 1
        if n > self.max_queued:
            self.max_queued = n
        if self._idle:
            self._wake.put(None)
        if dropped is not None and self._on_drop is not None:
            self._on_drop(dropped)

    def pending(self) -> int:
        """Items queued or being written."""
        return len(self._queue) + (1 if self._busy else 0)

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Wait until every queued item is written; False if ``timeout`` seconds passed first."""
        if self._thread is None:
            return not self._queue  # a forked child has no writer thread; nothing it could wait for
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._queue or self._busy:
                if not self._thread.is_alive():
                    return False
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(0.05 if remaining is None else min(remaining, 0.05))
        return True

    def close(self, timeout: Optional[float] = None) -> bool:
        """Flush, then stop the thread. A later put() starts a new one."""
        done = self.flush(timeout)
        with self._cond:
            self._stop = True
            thread = self._thread
        self._wake.put(None)
        if thread is not None and done and thread is not threading.current_thread():
            thread.join(timeout)
        with self._cond:
            if self._thread is thread and (thread is None or not thread.is_alive()):
                self._thread = None
                self._stop = False
                _drain(self._wake)
        return done

    # ------------------------------------------------------------------ writer side

    def _ensure_thread(self) -> None:
        with self._cond:
            if self._thread is None or not self._thread.is_alive():
                self._stop = False
                self._idle = False
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()

    def _after_fork(self) -> None:
        """In a forked child (e.g. a data-loader worker): a fresh, empty writer with no thread."""
        self._cond = threading.Condition(threading.RLock())
        self._queue.clear()
        self._wake = queue.SimpleQueue()
        self._idle = self._busy = self._stop = False
        self._thread = None

    def _next(self) -> Any:
        """The next item, blocking while there is none; ``_STOP`` when asked to stop with nothing left."""
        while True:
            with self._cond:
                if self._queue:
                    self._busy = True  # under the lock, so flush() never sees neither
                    return self._queue.popleft()
                if self._stop:
                    return _STOP
            # Announce idleness, then look again: a put() that ran before the flag was set woke
            # nobody, and its item is seen here; one that runs after it sends a wake-up.
            self._idle = True
            if self._queue or self._stop:
                self._idle = False
                continue
            self._wake.get()
            self._idle = False
            _drain(self._wake)

    def _run(self) -> None:
        while True:
            item = self._next()
            if item is _STOP:
                return
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                self._handler(item)
                self.written += 1
            except BaseException:  # the handler reports its own errors; the thread must survive
                log.exception("assertwatch-replay: background writer failed")
            finally:
                item = None
                self.busy_s += time.perf_counter() - wall
                self.cpu_s += time.thread_time() - cpu
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()


_STOP = object()


def _drain(wake: "queue.SimpleQueue[None]") -> None:
    while True:
        try:
            wake.get_nowait()
        except queue.Empty:
            return


_forked_resets: "weakref.WeakSet[BackgroundWriter]" = weakref.WeakSet()


def _reset_after_fork() -> None:
    for w in list(_forked_resets):
        w._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


# ---------------------------------------------------------------------- process-exit hooks

_writers: "weakref.WeakSet[Any]" = weakref.WeakSet()
_hooks_lock = threading.Lock()
_installed: Dict[str, Any] = {}
_exit_timeout = [DEFAULT_EXIT_TIMEOUT_S]


def register(flushable: Any, exit_timeout_s: float = DEFAULT_EXIT_TIMEOUT_S, sigterm: bool = True) -> None:
    """Flush ``flushable`` (an object with ``flush(timeout)``) when the process ends.

    Installs, once per process, an ``atexit`` function, a chained ``sys.excepthook`` and (when
    ``sigterm`` is true and this is the main thread) a chained ``SIGTERM`` handler.
    """
    _writers.add(flushable)
    _exit_timeout[0] = exit_timeout_s
    # A forked child inherits these hooks; flush() is a no-op there (the child has no writer thread).
    with _hooks_lock:
        if "atexit" not in _installed:
            atexit.register(flush_all, "exit")
            _installed["atexit"] = True
        if "excepthook" not in _installed:
            previous = sys.excepthook
            _installed["excepthook"] = previous

            def excepthook(kind, value, tb, _previous=previous):
                flush_all("exception")
                _previous(kind, value, tb)

            sys.excepthook = excepthook
        if (sigterm and "sigterm" not in _installed and threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGTERM) is not _on_sigterm):
            try:
                _installed["sigterm"] = signal.signal(signal.SIGTERM, _on_sigterm)
            except (ValueError, OSError) as exc:  # embedded interpreters may refuse
                log.warning("assertwatch-replay: no SIGTERM handler installed (%s)", exc)


def flush_all(reason: str = "exit") -> None:
    """Write everything still queued in every registered writer, within the exit timeout."""
    deadline = time.monotonic() + _exit_timeout[0]
    for w in list(_writers):
        try:
            if not w.flush(max(0.0, deadline - time.monotonic())):
                log.warning("assertwatch-replay: %s: writer did not finish within %.0f s; queued steps lost",
                            reason, _exit_timeout[0])
        except BaseException:  # never let the debugging aid mask the real ending
            log.exception("assertwatch-replay: flush at %s failed", reason)


def _on_sigterm(signum, frame) -> None:
    flush_all("SIGTERM")
    previous = _installed.get("sigterm")
    if callable(previous):
        previous(signum, frame)
        return
    if previous == signal.SIG_IGN:
        return
    # SIG_DFL, or a handler installed outside Python: die of the signal as the process would have.
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    time.sleep(1.0)
    os._exit(128 + signum)
