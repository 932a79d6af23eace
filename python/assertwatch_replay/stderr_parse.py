"""Parsers for what a replay prints: CUDA device-assert lines, DSA hints, faulthandler stacks.

Pure standard library; the supervisor feeds it captured output line by line.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

# CUDA's device assert prints, once per failing thread, to fd 2 of the process (CUDA C Programming
# Guide, "Assertion"), e.g.
#   .../Loss.cu:95: operator(): block: [3663,0,0], thread: [64,0,0] Assertion `t >= 0 && t <= 1` failed.
# The function field may be missing, be "(null)", or be a long templated signature, and torchrun
# adds a "[rankN]:" prefix, so the pattern is anchored on "block: [..], thread: [..] Assertion".
ASSERT_RE = re.compile(
    r"(?P<file>[^\s:\[\]][^\s:]*):(?P<line>\d+): "
    r"(?:(?P<function>.*?): )?"
    r"block: \[(?P<block>\d+,\s*\d+,\s*\d+)\], thread: \[(?P<thread>\d+,\s*\d+,\s*\d+)\] "
    r"Assertion `(?P<assertion>.*)` failed\.?"
)
MAX_ASSERTIONS = 32
MAX_ASSERTION_CHARS = 1024

DSA_EFFECTIVE = "Looking for device-side assertion"
DSA_NOT_COMPILED = "Compile with `TORCH_USE_CUDA_DSA`"
DSA_NOT_ENABLED = "Device-side assertion tracking was not enabled by user"

# faulthandler's dump: 'File "/path/x.py", line 12 in step'
FAULT_FRAME_RE = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<function>\S+)')
FAULT_HEADER_RE = re.compile(r"^Fatal Python error: (?P<what>.+)$")


def _triple(text: str) -> List[int]:
    return [int(v) for v in text.replace(" ", "").split(",")]


class AssertionCollector:
    """Collects kernel assertion lines, deduplicated by (file, line, assertion), counting threads."""

    def __init__(self) -> None:
        self._by_key: Dict[Tuple[str, int, str], Dict[str, Any]] = {}
        self.dropped = 0

    def feed(self, line: str) -> None:
        if "Assertion `" not in line:
            return
        match = ASSERT_RE.search(line)
        if not match:
            return
        assertion = match.group("assertion")[:MAX_ASSERTION_CHARS]
        key = (match.group("file"), int(match.group("line")), assertion)
        entry = self._by_key.get(key)
        if entry is not None:
            entry["threads"] += 1
            return
        if len(self._by_key) >= MAX_ASSERTIONS:
            self.dropped += 1
            return
        function = match.group("function")
        self._by_key[key] = {
            "file": key[0],
            "line": key[1],
            "function": function[:512] if function else None,
            "assertion": assertion,
            "first_block": _triple(match.group("block")),
            "first_thread": _triple(match.group("thread")),
            "threads": 1,
        }

    def results(self) -> List[Dict[str, Any]]:
        return list(self._by_key.values())


class TextScanner:
    """Line-level scan of a stream for DSA markers and a faulthandler stack."""

    def __init__(self) -> None:
        self.dsa_effective = False
        self.dsa_not_compiled = False
        self.dsa_not_enabled = False
        self.fatal: Optional[str] = None
        self._fault_frames: List[Dict[str, Any]] = []
        self._in_fault = False
        self._collect = False

    def feed(self, line: str) -> None:
        if DSA_EFFECTIVE in line:
            self.dsa_effective = True
        if DSA_NOT_COMPILED in line:
            self.dsa_not_compiled = True
        if DSA_NOT_ENABLED in line:
            self.dsa_not_enabled = True
        header = FAULT_HEADER_RE.match(line)
        if header:
            self.fatal = header.group("what")[:256]
            self._fault_frames = []
            self._in_fault = True
            self._collect = False
            return
        if not self._in_fault:
            return
        stripped = line.strip()
        if stripped.startswith("Current thread") or stripped.startswith("Stack (most recent call first)"):
            self._fault_frames = []
            self._collect = True
        elif stripped.startswith("Thread 0x") or stripped.startswith("Extension modules"):
            self._collect = False
        elif self._collect:
            frame = FAULT_FRAME_RE.match(line)
            if frame and len(self._fault_frames) < 64:
                self._fault_frames.append(
                    {"file": frame.group("file"), "line": int(frame.group("line")), "function": frame.group("function")}
                )

    def fault_frames(self) -> List[Dict[str, Any]]:
        """Frames of the last faulthandler dump, outermost first (faulthandler prints innermost first).

        Only the "Current thread" block is kept: it is the thread that crashed.
        """
        return list(reversed(self._fault_frames))


def dsa_verdict(requested: bool, scanner: TextScanner, message: Optional[str]) -> Dict[str, Any]:
    """Did device-side assertion tracking actually report anything? (It is rarely compiled in.)"""
    text = message or ""
    if DSA_EFFECTIVE in text or scanner.dsa_effective:
        return {"requested": requested, "effective": True, "evidence": "device-side assertion report present"}
    if not requested:
        return {"requested": False, "effective": False, "evidence": "not requested in this mode"}
    if DSA_NOT_COMPILED in text or scanner.dsa_not_compiled:
        return {"requested": True, "effective": False, "evidence": "torch was built without TORCH_USE_CUDA_DSA"}
    if DSA_NOT_ENABLED in text or scanner.dsa_not_enabled:
        return {"requested": True, "effective": False, "evidence": "torch reported tracking not enabled"}
    return {"requested": True, "effective": False, "evidence": "no device-side assertion report in the output"}
