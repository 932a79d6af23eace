#!/usr/bin/env python3
"""Generates src/detect/nccl_warn_sites.tsv: NCCL's WARN messages that end in a failure.

NCCL logs a failure as `host:pid:tid [dev] file.cc:line NCCL WARN <message>` and then returns an
`ncclResult_t` up the stack; PyTorch and the other frameworks print that result's text
("unhandled system error", "internal error", …) lines later, often on another rank's output.
The WARN line is the one that says what went wrong. NCCL also logs warnings it recovers from
under the same tag, so the tag alone is no failure: this script keeps the WARN sites whose
message is followed, within the same block, by a failing result (`return ncclSystemError;`,
`ret = ncclInternalError; goto fail;`, `NCCLCHECKGOTO(ncclInvalidUsage, …)`), and records the
message's format, each conversion (`%d`, `%s`, `%lx` …) written `{}`, with the result's family.

Sources: `--git GITDIR@REV` for each NCCL release to read (a clone or mirror of NVIDIA/nccl);
sites are merged across releases and keep the releases that have them.

Usage:
  scripts/gen-nccl-warn-catalog.py --git /src/nccl.git@v2.4.8-1 --git /src/nccl.git@v2.21.5-1 \
      --out src/detect/nccl_warn_sites.tsv

Output is deterministic: rows sorted by (family, format), releases in the order given.
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
STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
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
    fmt = fmt.replace("\\n", " ").replace("\\t", " ").replace('\\"', '"')
    fmt = CONVERSION.sub("{}", fmt).replace("%%", "%")
    return fmt.strip()


def sites(text):
    """(format, result) of each WARN in `text` followed by a failing result."""
    out = []
    for m in WARN_CALL.finditer(text):
        args, end = call_args(text, m.end() - 1)
        if args is None:
            continue
        # The format is the first argument: adjacent string literals, concatenated.
        # `"… %" PRIu64 " …"`: an <inttypes.h> macro between literals completes a conversion.
        args = re.sub(r'"\s*PRI\w+\s*"', "d", args)
        # A macro's argument between literals (`"Call to " #call " failed"`, `"…" name "…"`)
        # is text the format does not fix.
        args = re.sub(r'"\s*#?\s*[A-Za-z_]\w*\s*"', "%s", args)
        fmt_part = args.split('",', 1)[0] + '"' if '",' in args else args
        fmt = "".join(STRING.findall(fmt_part))
        if not fmt:
            continue
        # The statements that follow, up to the end of the enclosing block.
        rest = text[end:]
        window = "\n".join(rest.split("\n")[: LOOKAHEAD_LINES + 1])
        depth, cut = 0, len(window)
        for i, c in enumerate(window):
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth < 0:
                    cut = i
                    break
        r = RESULT.search(window[:cut])
        if not r:
            continue
        result = r.group(1) or r.group(2)
        if result not in FAMILIES:
            continue
        pat = pattern_of(fmt)
        if sum(ch.isalpha() for ch in pat.replace("{}", "")) < MIN_LETTERS or "\t" in pat:
            continue
        out.append((pat, result))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git", action="append", required=True, help="GITDIR@REV")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    found = {}  # (format, result) -> (releases, first file)
    for spec in a.git:
        gitdir, _, rev = spec.rpartition("@")
        files = [
            f
            for f in git(gitdir, "ls-tree", "-r", "--name-only", rev, "src").split("\n")
            if re.search(r"\.(cc|h|cu|c|cpp)$", f)
        ]
        for f in files:
            text = git(gitdir, "show", f"{rev}:{f}")
            for fmt, result in sites(text):
                releases, first = found.setdefault((fmt, result), ([], f))
                if rev not in releases:
                    releases.append(rev)
    # A format whose sites end in different results (NCCL 2.4's "Bootstrap : no socket interface
    # found" returned ncclInternalError, later releases ncclInvalidUsage) takes the result of the
    # newest release that has it.
    order = {spec.rpartition("@")[2]: i for i, spec in enumerate(a.git)}
    newest = {}
    for (fmt, result), (releases, _) in found.items():
        last = max(order[r] for r in releases)
        if fmt not in newest or last > newest[fmt][0]:
            newest[fmt] = (last, result)
    rows = sorted(
        (FAMILIES[result], fmt, first, ",".join(releases))
        for (fmt, result), (releases, first) in found.items()
        if newest[fmt][1] == result
    )
    with open(a.out, "w", encoding="utf-8") as o:
        o.write("# Generated by scripts/gen-nccl-warn-catalog.py from NVIDIA/nccl; do not edit.\n")
        o.write("family\tformat\tfile\treleases\n")
        for r in rows:
            o.write("\t".join(r) + "\n")
    print(f"{len(rows)} WARN formats from {len(a.git)} releases", file=sys.stderr)


if __name__ == "__main__":
    main()
