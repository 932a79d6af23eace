"""The debug-state manifest: validation driven by the shared contract file.

The rules themselves (keys, types, limits, patterns, allowed values) live in
``manifest-contract.json`` beside this module; the Rust daemon compiles the same file in, so the two
sides cannot drift apart. This module walks a parsed manifest along that file and adds the few
rules that relate fields to each other (named by ``"rule"`` in the contract). It imports nothing
beyond the standard library, so the supervisor can validate a manifest without torch.
``docs/manifest.md`` describes the contract in prose.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
from datetime import datetime, timezone
from importlib import resources
from typing import Any, Callable, Dict, List, Optional

CONTRACT_FILE = "manifest-contract.json"
_RAW = resources.files(__package__ or "assertwatch_replay").joinpath(CONTRACT_FILE).read_bytes()
CONTRACT: Dict[str, Any] = json.loads(_RAW)
CONTRACT_VERSION: int = CONTRACT["version"]
CONTRACT_SHA256 = hashlib.sha256(_RAW).hexdigest()


def _node(*path: str) -> Dict[str, Any]:
    node = CONTRACT["document"]
    for key in path:
        node = node["items"] if key == "[]" else node["keys"][key]
    return node


SCHEMA: str = CONTRACT["schema"]
MANIFEST_NAME: str = CONTRACT["manifest_name"]
MAX_MANIFEST_BYTES: int = CONTRACT["max_manifest_bytes"]
MAX_EXTRA_BYTES: int = _node("extra")["max_bytes"]
MODES = tuple(_node("replay", "modes", "[]")["one_of"])
PLACEHOLDERS = tuple(CONTRACT["placeholders"])
# Every pattern must match the whole string, in ASCII; compiled with \Z so that ``.match`` cannot
# stop before a trailing newline the way ``$`` does.
PATTERNS = {name: re.compile(f"(?:{p})\\Z", re.ASCII) for name, p in CONTRACT["patterns"].items()}
JOB_NAME_RE = PATTERNS["job_name"]
ENTRYPOINT_RE = PATTERNS["entrypoint"]


class ManifestError(ValueError):
    """A manifest broke the contract. ``field`` is the dotted path of the offending value."""

    def __init__(self, field: str, problem: str):
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}" if field else problem)


def utc_now_rfc3339() -> str:
    """The current time as RFC 3339 UTC with millisecond precision."""
    now = datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


# --------------------------------------------------------------------------- the generic walk


def _join(field: str, key: Any) -> str:
    return f"{field}.{key}" if field else str(key)


def _or_null(node: Dict[str, Any]) -> str:
    return " or null" if node.get("nullable") else ""


def _range(node: Dict[str, Any]) -> tuple:
    lo, hi = CONTRACT["int_range"]
    return node.get("min", lo), node.get("max", hi)


def _string(node: Dict[str, Any], value: Any, field: str) -> None:
    if not isinstance(value, str):
        raise ManifestError(field, "must be a string" + _or_null(node))
    if not value and not node.get("allow_empty"):
        raise ManifestError(field, "must not be empty")
    if "max_chars" in node and len(value) > node["max_chars"]:
        raise ManifestError(field, f"longer than {node['max_chars']} characters")
    if "\x00" in value:
        raise ManifestError(field, "contains a NUL character")
    if "pattern" in node and value and not PATTERNS[node["pattern"]].match(value):
        raise ManifestError(field, f"does not match {CONTRACT['patterns'][node['pattern']]}")
    if "one_of" in node and value not in node["one_of"]:
        raise ManifestError(field, f"must be one of {', '.join(node['one_of'])}")
    if node.get("absolute_path") and not value.startswith("/"):
        raise ManifestError(field, "must be an absolute path")


def _int(node: Dict[str, Any], value: Any, field: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ManifestError(field, "must be an integer" + _or_null(node))
    lo, hi = _range(node)
    if not lo <= value <= hi:
        raise ManifestError(field, f"must be between {lo} and {hi}")


def _number(node: Dict[str, Any], value: Any, field: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ManifestError(field, "must be a number" + _or_null(node))
    lo, hi = _range(node)
    try:
        ok = math.isfinite(value) and lo <= value <= hi
    except OverflowError:  # an integer too large for a float
        ok = False
    if not ok:
        raise ManifestError(field, f"must be a finite number between {lo} and {hi}")


def _bool(node: Dict[str, Any], value: Any, field: str) -> None:
    if not isinstance(value, bool):
        raise ManifestError(field, "must be true or false")


def _object(node: Dict[str, Any], value: Any, field: str, root: Any) -> None:
    if not isinstance(value, dict):
        raise ManifestError(field, "must be an object" + _or_null(node))
    keys = node["keys"]
    for key in value:
        if key not in keys:
            raise ManifestError(_join(field, key), "unknown key")
    for key, child in keys.items():
        if key not in value and child.get("required"):
            raise ManifestError(_join(field, key), "missing")
    for key, child in keys.items():
        if key in value:
            _check(child, value[key], _join(field, key), root)


def _list(node: Dict[str, Any], value: Any, field: str, root: Any) -> None:
    if not isinstance(value, list):
        never = " (never a shell string)" if node.get("rule") == "argv" else ""
        raise ManifestError(field, "must be a list" + never)
    lo, hi = node.get("min_items", 0), node.get("max_items")
    if len(value) < lo or (hi is not None and len(value) > hi):
        raise ManifestError(field, f"must hold {lo} to {hi} entries" if hi else f"must hold at least {lo} entries")
    for i, item in enumerate(value):
        _check(node["items"], item, f"{field}[{i}]", root)
    if node.get("unique") and len(set(value)) != len(value):
        raise ManifestError(field, "has duplicates")
    for key in node.get("unique_keys", ()):
        seen = set()
        for i, item in enumerate(value):
            if item.get(key) in seen:
                raise ManifestError(f"{field}[{i}].{key}", f"duplicate {key} {item[key]!r}")
            seen.add(item.get(key))


def _map(node: Dict[str, Any], value: Any, field: str, root: Any) -> None:
    if not isinstance(value, dict):
        raise ManifestError(field, "must be an object of strings")
    if len(value) > node["max_entries"]:
        raise ManifestError(field, f"more than {node['max_entries']} entries")
    for key, item in value.items():
        if key not in node["allowed_keys"]:
            raise ManifestError(_join(field, key), "variable is not on the allow-list")
        _check(node["values"], item, _join(field, key), root)


def _json_depth(value: Any, depth: int = 0) -> int:
    if isinstance(value, dict):
        return max([depth + 1] + [_json_depth(v, depth + 1) for v in value.values()])
    if isinstance(value, list):
        return max([depth + 1] + [_json_depth(v, depth + 1) for v in value])
    return depth


def _free_object(node: Dict[str, Any], value: Any, field: str) -> None:
    if not isinstance(value, dict):
        raise ManifestError(field, "must be an object")
    try:  # measured as compact UTF-8 JSON, the way the Rust side measures it
        size = len(json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode())
    except (TypeError, ValueError) as exc:
        raise ManifestError(field, f"must be plain JSON ({exc})") from None
    if size > node["max_bytes"]:
        raise ManifestError(field, f"{size} bytes when serialised; the limit is {node['max_bytes']}")
    if _json_depth(value) > node["max_depth"]:
        raise ManifestError(field, f"nested deeper than {node['max_depth']} levels")


def _check(node: Dict[str, Any], value: Any, field: str, root: Any) -> None:
    if value is None and node.get("nullable"):
        return
    kind = node["type"]
    if kind in ("object", "list", "map"):
        {"object": _object, "list": _list, "map": _map}[kind](node, value, field, root)
    else:
        {"string": _string, "int": _int, "number": _number, "bool": _bool, "free_object": _free_object}[kind](
            node, value, field
        )
    if "rule" in node:
        RULES[node["rule"]](value, field, root)


# --------------------------------------------------------------------------- rules between fields


def _rule_created_at(value: str, field: str, root: Any) -> None:
    # The pattern has fixed the shape and the ranges; this catches dates such as February 30 and
    # year 0. strptime's %S would accept 60 and 61, but the pattern already stops at 59.
    try:
        datetime.strptime(value[:19], "%Y-%m-%dT%H:%M:%S")
    except ValueError as exc:
        raise ManifestError(field, f"not a valid date and time ({exc})") from None


def _rule_file_name(value: str, field: str, root: Any) -> None:
    if not PATTERNS["file_name"].match(value) or value == MANIFEST_NAME:
        raise ManifestError(
            field,
            "must be a plain file name in the manifest's directory "
            "(letters, digits, '.', '_', '-'; no '/', not starting with '.' or '-')",
        )


def _rule_files(value: List[Dict[str, Any]], field: str, root: Any) -> None:
    roles = {entry["role"] for entry in value}
    for role in CONTRACT["required_roles"]:
        if role not in roles:
            raise ManifestError(field, f"no entry with role {role!r}")


def _rule_model_state(ms: Dict[str, Any], field: str, root: Any) -> None:
    kind, has_model = ms["kind"], any(f["role"] == "model" for f in root.get("files", ()))
    if kind == "full" and not has_model:
        raise ManifestError(f"{field}.kind", "is \"full\" but no file has role \"model\"")
    if kind != "full" and has_model:
        raise ManifestError(f"{field}.kind", "must be \"full\" when a file has role \"model\"")
    if kind == "checkpoint_ref" and not ms.get("ref"):
        raise ManifestError(f"{field}.ref", "required when kind is \"checkpoint_ref\"")
    if kind != "full" and ms["exact"]:
        raise ManifestError(f"{field}.exact", "can only be true when kind is \"full\"")


def _rule_argv(argv: List[str], field: str, root: Any) -> None:
    for i, arg in enumerate(argv):
        if ("{" in arg or "}" in arg) and arg not in PLACEHOLDERS:
            raise ManifestError(
                f"{field}[{i}]",
                "braces are allowed only as a whole-element placeholder: " + ", ".join(PLACEHOLDERS),
            )
    if argv[0] != "{python}" and not argv[0].startswith("/"):
        raise ManifestError(f"{field}[0]", "must be \"{python}\" or an absolute path")
    for needed in CONTRACT["required_placeholders"]:
        if needed not in argv:
            raise ManifestError(field, f"must contain the placeholder {needed}")


RULES: Dict[str, Callable[[Any, str, Any], None]] = {
    "created_at": _rule_created_at,
    "file_name": _rule_file_name,
    "files": _rule_files,
    "model_state": _rule_model_state,
    "argv": _rule_argv,
}
if set(RULES) != set(CONTRACT["rules"]):  # a contract this module does not fully implement
    raise ImportError(f"{CONTRACT_FILE} names rules {sorted(CONTRACT['rules'])}, this module has {sorted(RULES)}")


# --------------------------------------------------------------------------- entry points


def _check_replay(rp: Any) -> None:
    """The static half of a manifest, checked by the recorder when it starts."""
    _check(_node("replay"), rp, "replay", {})


def _check_extra(extra: Any) -> None:
    _check(_node("extra"), extra, "extra", {})


def validate(doc: Any) -> Dict[str, Any]:
    """Check a parsed manifest against the contract. Returns it unchanged or raises ManifestError."""
    if not isinstance(doc, dict):
        raise ManifestError("", "the manifest must be a JSON object")
    if "schema" in doc and doc["schema"] != SCHEMA:
        raise ManifestError("schema", f"must be {SCHEMA!r}, found {doc['schema']!r}")
    _check(CONTRACT["document"], doc, "", doc)
    return doc


def _reject_duplicates(pairs: List[tuple]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ManifestError(str(key), "duplicate key")
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise ManifestError("", f"{name} is not valid JSON")


def parse(data: bytes) -> Dict[str, Any]:
    """Parse and validate manifest bytes (size, UTF-8, strict JSON, schema)."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise ManifestError("", f"manifest is {len(data)} bytes; the limit is {MAX_MANIFEST_BYTES}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestError("", f"not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        # "-0" is read as the float -0.0, the way the Rust side reads it, so it is no integer.
        doc = json.loads(
            text,
            object_pairs_hook=_reject_duplicates,
            parse_constant=_reject_constant,
            parse_int=lambda s: -0.0 if s == "-0" else int(s),
        )
        # An escaped lone surrogate ("\ud800") is no Unicode text; the Rust side refuses it too.
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
    except json.JSONDecodeError as exc:
        raise ManifestError("", f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except UnicodeEncodeError:
        raise ManifestError("", "not valid JSON: an escaped lone surrogate") from None
    except RecursionError:
        raise ManifestError("", "not valid JSON: nested too deeply") from None
    return validate(doc)


def load(path: str) -> Dict[str, Any]:
    """Read, bound and validate a manifest file. Refuses symlinks and non-regular files."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ManifestError("", f"cannot open {path}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ManifestError("", f"{path} is not a regular file")
        chunks = []
        remaining = MAX_MANIFEST_BYTES + 1
        while remaining > 0:
            chunk = os.read(fd, remaining)
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    finally:
        os.close(fd)
    return parse(b"".join(chunks))


def file_entry(doc: Dict[str, Any], role: str) -> Optional[Dict[str, Any]]:
    for entry in doc["files"]:
        if entry["role"] == role:
            return entry
    return None


def dumps(doc: Dict[str, Any]) -> bytes:
    """Serialise a manifest the way the recorder writes it (sorted keys, UTF-8, newline-terminated)."""
    return (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n").encode()
