"""``scripts/gen-nccl-warn-catalog.py``: how it reads NCCL's WARN sites, on sources written here
and on a small git history, and that the committed catalog is well formed."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import load_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gen-nccl-warn-catalog.py"
CATALOG = REPO / "src" / "detect" / "nccl_warn_sites.tsv"


def load():
    return load_script(SCRIPT, "gen_nccl_warn_catalog")


SOURCE = r"""
ncclResult_t ringCheck(int r, int current, int rank) {
  if (current != rank) {
    WARN("Error : ring %d does not loop back to start (%d != %d)", r, current, rank);
    return ncclInternalError;
  }
  if (fd < 0) {
    WARN("Net : Socket creation failed : %s", strerror(errno));
    ret = ncclSystemError;
    goto fail;
  }
  if (bytes > max) {
    WARN("Message of %" PRIu64 " bytes is over the %lu limit", bytes, max);
    NCCLCHECKGOTO(ncclInvalidUsage, ret, fail);
  }
  if (size > r->size) {
    WARN("NET/Socket : peer %s message truncated : receiving %d bytes instead of %d", peer, size, r->size);
    return ncclInvalidUsage;
  }
  if (!collNet) {
    WARN("Cannot initialize CollNet, using %s instead", "p2p");
    return ncclInternalError;
  }
  WARN("NET/Plugin : No plugin found (%s), using internal implementation", name);
  return ncclSuccess;
}
#define SYSCHECK(call, name) do { \
  if ((call) == -1) { \
    WARN("Call to " name " failed : %s", strerror(errno)); \
    return ncclSystemError; \
  } \
} while (0)
ncclResult_t shortOne() {
  WARN("%s:%d -> %d", __FILE__, __LINE__, ret);
  return ncclInternalError;
}
ncclResult_t onlyFloat(int rank) {
  if (type != ncclFloat) {
    WARN("Rank %d supports " "only" " float", rank);
    return ncclInvalidArgument;
  }
  switch (kind) {
    case 1:
      WARN("Unknown request kind, ignoring %d", kind);
      return ncclInternalError;
    case 2:
      WARN("Unexpected opcode %d on the completion queue", op);
      break;
    default:
      return ncclInternalError;
  }
}
ncclResult_t later() {
  {
    WARN("Cannot allocate the host buffer of size %zu", size);
  }
  return ncclSystemError;
}
"""


def test_sites_keep_failing_warns_with_their_family():
    got = dict(load().sites(SOURCE, "src/graph/rings.cc"))
    assert got["Error : ring {} does not loop back to start ({} != {})"] == "nccl_internal_error"
    assert got["Net : Socket creation failed : {}"] == "nccl_unhandled_system_error"
    # An <inttypes.h> macro completes the conversion before it.
    assert got["Message of {} bytes is over the {} limit"] == "nccl_invalid_usage"
    # A literal that is one word is text, not a macro argument.
    assert got["Rank {} supports only float"] == "nccl_invalid_argument"
    # "instead of" a number reports a mismatch, not a fallback.
    assert (
        got["NET/Socket : peer {} message truncated : receiving {} bytes instead of {}"]
        == "nccl_invalid_usage"
    )


def test_a_failed_system_call_is_a_system_error_and_a_wrapper_call_is_not():
    text = """
#define SYSCHECKVAL(call, name, retval) do { \\
  if (retval == -1) { \\
    WARN("Call to " name " failed : %s", strerror(errno)); \\
    return ncclSystemError; \\
  } \\
} while (false)
ncclResult_t wrap_ibv_open_device(struct ibv_device* device) {
  if (ret == NULL) {
    WARN("Call to " name " failed");
    return ncclSystemError;
  }
}
"""
    got = dict(load().sites(text, "src/include/checks.h"))
    assert got["Call to {} failed : {}"] == "nccl_unhandled_system_error"
    assert got["Call to {} failed"] == "none"


def test_where_nccl_goes_on_the_site_is_none():
    got = dict(load().sites(SOURCE, "src/graph/rings.cc"))
    # No failing result, a fallback in words.
    assert got["NET/Plugin : No plugin found ({}), using internal implementation"] == "none"
    assert got["Cannot initialize CollNet, using {} instead"] == "none"
    # A result outside the WARN's block, or past a `break`, is not its result.
    assert got["Cannot allocate the host buffer of size {}"] == "none"
    assert got["Unknown request kind, ignoring {}"] == "none"
    assert got["Unexpected opcode {} on the completion queue"] == "none"
    # Formats with fewer than ten letters name no site.
    assert not any(f.startswith("{}:{} ->") for f in got)


def test_a_transports_initialisation_only_disables_it():
    text = 'ncclResult_t ncclIbInit(ncclDebugLogger_t logFunction) {\n  if (n == 0) {\n    WARN("NET/IB : No IP interface found.");\n    return ncclInternalError;\n  }\n}\n'
    assert dict(load().sites(text, "src/transport/net_ib.cc")) == {"NET/IB : No IP interface found.": "none"}
    assert dict(load().sites(text, "src/init.cc")) == {"NET/IB : No IP interface found.": "nccl_internal_error"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        text=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.org",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.org",
            "HOME": str(repo),
            "PATH": "/usr/bin:/bin",
        },
    ).stdout


def test_releases_merge_and_the_newest_result_wins(tmp_path):
    repo = tmp_path / "nccl"
    (repo / "src").mkdir(parents=True)
    git(repo, "init", "-q")
    old = 'ncclResult_t f() {\n  WARN("Bootstrap : no socket interface found");\n  return %s;\n}\n'
    (repo / "src" / "bootstrap.cc").write_text(old % "ncclInternalError")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "old")
    git(repo, "tag", "v1")
    (repo / "src" / "bootstrap.cc").write_text(old % "ncclInvalidUsage")
    git(repo, "commit", "-q", "-am", "new")
    git(repo, "tag", "v2")
    out = tmp_path / "sites.tsv"
    gitdir = str(repo / ".git")
    subprocess.run(
        ["python3", str(SCRIPT), "--git", f"{gitdir}@v1", "--git", f"{gitdir}@v2", "--out", str(out)],
        check=True,
        capture_output=True,
    )
    rows = [l.split("\t") for l in out.read_text().splitlines() if not l.startswith(("#", "family\t"))]
    assert rows == [["nccl_invalid_usage", "Bootstrap : no socket interface found", "src/bootstrap.cc", "v2"]]


def test_the_committed_catalog_is_well_formed():
    families = set(load().FAMILIES.values()) | {"none"}
    lines = CATALOG.read_text().splitlines()
    assert lines[0].startswith("# Generated by scripts/gen-nccl-warn-catalog.py")
    assert lines[1] == "family\tformat\tfile\treleases"
    rows = [l.split("\t") for l in lines[2:]]
    assert len(rows) >= 400
    formats = set()
    for family, fmt, path, releases in rows:
        assert family in families
        assert path.startswith("src/")
        assert releases
        assert fmt not in formats, fmt
        formats.add(fmt)
