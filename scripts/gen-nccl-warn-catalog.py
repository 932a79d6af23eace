#!/usr/bin/env python3
"""Generates src/detect/nccl_warn_sites.tsv: NCCL's WARN messages and whether they end in a failure.

NCCL logs a failure as `host:pid:tid [dev] file.cc:line NCCL WARN <message>` and then returns an
`ncclResult_t` up the stack; PyTorch and the other frameworks print that result's text
("unhandled system error", "internal error", …) lines later, often on another rank's output.
The WARN line is the one that says what went wrong. NCCL also logs warnings it recovers from
under the same tag, so the tag alone is no failure: this script records every WARN site's
format, each conversion (`%d`, `%s`, `%lx` …) written `{}`, with its outcome: the family of the
failing result its block goes on to (`return ncclSystemError;`, `ret = ncclInternalError; goto
fail;`, `NCCLCHECKGOTO(ncclInvalidUsage, …)`), or `none` where NCCL goes on (see `recovered`).

Sources: `--git GITDIR@REV` for each NCCL release to read (a clone or mirror of NVIDIA/nccl);
sites are merged across releases and keep the releases that have them.

Usage:
  scripts/gen-nccl-warn-catalog.py --git /src/nccl.git@v2.4.8-1 --git /src/nccl.git@v2.21.5-1 \
      --out src/detect/nccl_warn_sites.tsv

Output is deterministic: one row per format, sorted by (family, format), releases in the order
given.
"""

import argparse
import re
import subprocess
import sys

# ncclResult_t values (src/nccl.h.in) and the families assertwatch names them by.
FAMILIES = {
    "ncclUnhandledCudaError": "nccl_unhandled_cuda_error",
    "ncclSystemError": "nccl_unhandled_system_error",
    "ncclInternalError": "nccl_internal_error",
    "ncclInvalidArgument": "nccl_invalid_argument",
    "ncclInvalidUsage": "nccl_invalid_usage",
    "ncclRemoteError": "nccl_remote_error",
}

# A format with fewer letters outside its conversions is too generic to name a site ("%s",
# "%s:%d -> %d").
MIN_LETTERS = 10
# A printf conversion: flags, width, precision, length, conversion.
CONVERSION = re.compile(r"%[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|z|j|t|L)?[diouxXeEfgGcspnm]")
# Statements after a WARN that are searched for its result.
LOOKAHEAD_LINES = 6

WARN_CALL = re.compile(r"\bWARN\s*\(")
# A statement that leaves the WARN's path before any result: the failure is not this WARN's.
LEAVES = re.compile(r"\b(?:break|continue)\s*;|\bcase\b[^:]*:|\bdefault\s*:")
# A function definition at the start of a line: its name before the parameter list.
FUNCTION = re.compile(r"^[A-Za-z_][\w \t\*&:<>,]*?\b([A-Za-z_]\w*)\s*\([^;{]*\)\s*(?:const\s*)?\{", re.M)
# Words of a message that says NCCL goes on another way ("using point-to-point network
# instead"; "receiving 8 bytes instead of 4" reports a mismatch and is no fallback).
FALLBACK = re.compile(
    r"(?i)\binstead\b(?!\s+of\s+\{\})|\bnot using\b|\busing (?:the )?internal\b|\bfall(?:ing)?[ -]?back\b|\bcontinu(?:e|ing)\b|\bignor(?:e|ed|ing)\b|\bskipp(?:ed|ing)\b|\bdisabl(?:e|ed|ing)\b|\bretry(?:ing)?\b"
)
RESULT = re.compile(
    r"(?:\breturn|[^=!<>]=)\s*\(?\s*(nccl[A-Za-z]+)\b|\bNCCLCHECK\w*\(\s*(nccl[A-Za-z]+)\b"
)


def git(gitdir, *args):
    return subprocess.run(
        ["git", "--git-dir", gitdir, *args], check=True, capture_output=True, text=True
    ).stdout


def call_args(text, start):
    """The text of the call whose '(' is at `start`, up to its matching ')'."""
    depth, i, quote = 0, start, None
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i], i + 1
        i += 1
    return None, len(text)


def pattern_of(fmt):
    """A printf format as the catalog keeps it: conversions as `{}`, escapes resolved, trimmed."""
    # A literal continued on the next line of a macro, and escapes NCCL's logger prints as spaces.
    fmt = fmt.replace("\\\n", "").replace("\n", " ")
    fmt = fmt.replace("\\n", " ").replace("\\t", " ").replace('\\"', '"')
    fmt = CONVERSION.sub("{}", fmt).replace("%%", "%")
    return fmt.strip()


def first_argument(args):
    """The format: the first argument's string literals concatenated, with an <inttypes.h>
    macro completing the conversion before it (`"%" PRIu64` → `%d`) and any other identifier or
    stringified macro argument between literals (`"Call to " #call " failed"`) written `%s`.
    None when the argument holds no literal."""
    out, i, seen = [], 0, False
    while i < len(args):
        c = args[i]
        if c == '"':
            j = i + 1
            while j < len(args) and args[j] != '"':
                j += 2 if args[j] == "\\" else 1
            out.append(args[i + 1 : j])
            seen, i = True, j + 1
        elif c == "#" or c.isalpha() or c == "_":
            j = i + 1
            while j < len(args) and (args[j].isalnum() or args[j] == "_"):
                j += 1
            word = args[i:j].lstrip("#").strip()
            if word:
                out.append("d" if word.startswith("PRI") else "%s")
            i = j
        elif c == ",":
            break
        else:
            i += 1
    return "".join(out) if seen else None


def enclosing_function(text, at):
    """The name of the function a C/C++ definition starting at column 0 before `at` declares."""
    name = None
    for m in FUNCTION.finditer(text, 0, at):
        name = m.group(1)
    return name


def outcome(text, end):
    """The failing ncclResult_t the statements after a WARN (ending at `end`) go on to, if any:
    up to the end of the enclosing block, a `break`, `continue` or the next `case` label."""
    window = "\n".join(text[end:].split("\n")[: LOOKAHEAD_LINES + 1])
    depth, cut = 0, len(window)
    for i, c in enumerate(window):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                cut = i
                break
    stop = LEAVES.search(window[:cut])
    if stop:
        cut = stop.start()
    r = RESULT.search(window[:cut])
    result = r and (r.group(1) or r.group(2))
    return result if result in FAMILIES else None


# The system-call checks of checks.h (core.h before 2.23): `SYSCHECKVAL` prints "Call to <name>
# failed : <strerror>" and returns ncclSystemError, `SYSCHECKNTIMES` "Call to <name> timeout :
# <strerror>" once its retries are spent. A failed socket, bind, shared-memory or file call ends
# the operation whatever the call.
SYSTEM_CALL_CHECKS = {"Call to {} failed : {}", "Call to {} failed: {}", "Call to {} timeout : {}"}


def recovered(pattern, function, path):
    """Does NCCL go on after this WARN although its block returns a failure? The message says
    so (a fallback), the format is a library wrapper's checking macro (`Call to {} failed`, the
    InfiniBand verbs wrappers: the call decides, and start-up probes of optional libraries fail
    harmlessly; the system-call checks in `SYSTEM_CALL_CHECKS` always fail), or it is a network
    transport's initialisation, whose failure only disables that transport."""
    if FALLBACK.search(pattern):
        return True
    if pattern.startswith("Call to {}") and pattern not in SYSTEM_CALL_CHECKS:
        return True
    return bool(
        function
        and path.startswith("src/transport/")
        and re.search(r"(?:Init|Devices|GetProperties)$", function)
    )


def sites(text, path="src/x.cc"):
    """(format, family or "none") of each WARN in `text` whose format names a site."""
    out = []
    for m in WARN_CALL.finditer(text):
        args, end = call_args(text, m.end() - 1)
        if args is None:
            continue
        fmt = first_argument(args)
        if not fmt:
            continue
        pat = pattern_of(fmt)
        if sum(ch.isalpha() for ch in pat.replace("{}", "")) < MIN_LETTERS or "\t" in pat:
            continue
        result = outcome(text, end)
        if result and recovered(pat, enclosing_function(text, m.start()), path):
            result = None
        out.append((pat, FAMILIES[result] if result else "none"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git", action="append", required=True, help="GITDIR@REV")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    found = {}  # (format, family) -> (releases, first file)
    for spec in a.git:
        gitdir, _, rev = spec.rpartition("@")
        files = [
            f
            for f in git(gitdir, "ls-tree", "-r", "--name-only", rev, "src").split("\n")
            if re.search(r"\.(cc|h|cu|c|cpp)$", f)
        ]
        for f in files:
            text = git(gitdir, "show", f"{rev}:{f}")
            for fmt, family in sites(text, f):
                releases, first = found.setdefault((fmt, family), ([], f))
                if rev not in releases:
                    releases.append(rev)
    # A format whose sites end differently takes the newest release's outcome (NCCL 2.4's
    # "Bootstrap : no socket interface found" returned ncclInternalError, later releases
    # ncclInvalidUsage); where sites of that release disagree, the line cannot tell which site
    # printed it, and it names no family.
    order = {spec.rpartition("@")[2]: i for i, spec in enumerate(a.git)}
    by_format = {}  # format -> {family: (releases, first file)}
    for (fmt, family), seen in found.items():
        by_format.setdefault(fmt, {})[family] = seen
    rows = []
    for fmt, outcomes in by_format.items():
        newest = max(max(order[r] for r in releases) for releases, _ in outcomes.values())
        latest = {f for f, (releases, _) in outcomes.items() if newest in {order[r] for r in releases}}
        outcome = latest.pop() if len(latest) == 1 else "none"
        # The row shows the outcome's sites; a disagreement with no `none` site of its own shows
        # one of the sites that disagree.
        shown = [outcomes[outcome]] if outcome in outcomes else list(outcomes.values())
        first, releases = max((first, ",".join(releases)) for releases, first in shown)
        rows.append((outcome, fmt, first, releases))
    rows.sort()
    with open(a.out, "w", encoding="utf-8") as o:
        o.write("# Generated by scripts/gen-nccl-warn-catalog.py from NVIDIA/nccl; do not edit.\n")
        o.write("family\tformat\tfile\treleases\n")
        for r in rows:
            o.write("\t".join(r) + "\n")
    failing = sum(r[0] != "none" for r in rows)
    print(f"{len(rows)} WARN formats ({failing} failing) from {len(a.git)} releases", file=sys.stderr)


if __name__ == "__main__":
    main()
