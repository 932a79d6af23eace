#!/usr/bin/env python3
"""Generates src/detect/assert_sites.tsv: PyTorch's device-side assertion sites, by family.

Each site is a CUDA `assert(...)`, `CUDA_KERNEL_ASSERT(...)`, `CUDA_KERNEL_ASSERT_MSG(...)`
or `CUDA_KERNEL_ASSERT_PRINTF(...)` in PyTorch's CUDA kernels (aten/src/ATen/native/cuda and
the historic aten/src/THC, aten/src/THCUNN), or an `at::_assert_async(cond, "message")` in
aten/src/ATen/native, whose message the device prints from TensorCompare.cu. What is recorded is what the device prints after
"Assertion": the condition as the preprocessor stringifies it (comments dropped, whitespace
collapsed) or, for the _MSG form, the message literal.

Sources, each a label and a place:
  --git LABEL=GITDIR@REV   a PyTorch clone (bare or not) and a revision (tag, branch, commit)
  --tree LABEL=DIR         an unpacked PyTorch source tree, such as a release tarball
                           (Debian's `apt-get source pytorch` orig tarball keeps every CUDA
                           kernel source)
  --sites LABEL=FILE       a hand-transcribed list: "kernel_file<TAB>expression" per line,
                           for a revision no clone of which was at hand (lines starting with
                           '#' are comments)
  --base FILE              an earlier output of this script: its sites and their release
                           labels are kept (families are mapped again), so that a new list can
                           be added without the clones the earlier labels came from

Usage:
  scripts/gen-assert-catalog.py --git 1.4=/src/pytorch.git@v1.4.0 \
      --sites main=scripts/assert-sites-main.tsv --out src/detect/assert_sites.tsv

Output is deterministic: sites sorted by (family, kernel file, expression), release labels
oldest first (numbered labels as versions, then named ones such as main). The family table
below is this project's mapping.
"""

import argparse
import os
import re
import subprocess
import sys

PATHS = ["aten/src/ATen/native/cuda", "aten/src/THC", "aten/src/THCUNN"]

# (family, file regex or None, expression regex or None). First match wins; a row matches
# when every pattern it gives matches (file: the basename; expression: a search).
FAMILIES = [
    ("bernoulli_invalid_probability", r"^(Distributions\.cu|DistributionTemplates\.h|DistributionBernoulli\.cu|THCTensorRandom\.cu)$",
     r"^0 <= p\d? && p\d? <= 1$"),
    ("multinomial_invalid_probability", r"^(MultinomialKernel\.cu|THCTensorRandom\.cuh|THCTensorRandom\.cu)$", None),
    ("multinomial_invalid_probability", None, r"probability tensor contains either|invalid multinomial distribution"),
    ("index_out_of_bounds", None, r"index < sizes\[i\]"),
    ("take_put_index", None, r"idx < numel && idx >= -numel|linearIndex < size && linearIndex >= -size|idx < size && idx >= -size"),
    ("embedding_index", None, r"^srcIndex < srcSelectDimSize$"),
    ("index_add_out_of_range", None, r"^dstIndex < dst(Add|Copy)DimSize$"),
    ("index_fill_out_of_range", None, r"^dstIndex_ < dstFillDimSize$"),
    ("scatter_gather_index", None, r"idx_dim >= 0 && idx_dim < index_size|indexValue >= 0 && indexValue < (src|tensor)\.sizes\[dim\]|vectorized gather kernel index out of bounds"),
    ("index_copy_out_of_range", None, r"index_copy_\(\): index out of bounds"),
    # index_select's own check (2.x): nn.Embedding's forward is an index_select on the table.
    ("embedding_index", None, r"index_select\(\): index out of bounds"),
    ("index_fill_out_of_range", r"^IndexKernel\.cu$", r"^idx >= -self_dim_size && idx < self_dim_size"),
    # A flat index that came out negative after the target passed its range check: the
    # kernel's index type overflowed (NLLLoss2d.cu `input_index >= 0`).
    ("index_overflow", r"^NLLLoss2d\.cu$", r"^(grad_)?input_index >= 0$"),
    # nll_loss's backward (2.x Loss.cu): `index = i * ndim + t` checked after `t` passed.
    ("index_overflow", r"^Loss\.cu$", r"^index >= 0$"),
    ("nll_target_out_of_range", None, r"n_classes"),
    ("nll_target_out_of_range", r"^(ClassNLLCriterion|SpatialClassNLLCriterion|NLLLoss2d)\.cu$", None),
    ("bce_input_range", None, r"input >= 0\. && \*?input <= 1\.|input_val >= zero && input_val <= one"),
    ("bce_target_range", None, r"target_val >= zero && target_val <= one"),
    ("masked_scatter_size", r"^IndexKernel\.cu$", r"^totalElements <= srcSize$"),
    ("multi_margin_target", r"^MultiMarginLoss\.cu$", None),
    ("max_unpool_index", r"^MaxUnpooling\.cu$", None),
    ("segment_reduce_lengths", r"^SegmentReduce\.cu$", None),
    ("grouped_mm_offsets", r"^GroupMMCommon\.cuh$", None),
    ("embedding_bag_offsets", r"^(EmbeddingBag\.cu|LookupTableBag\.cu)$", r"end >= begin"),
    ("embedding_bag_index", r"^(EmbeddingBag\.cu|LookupTableBag\.cu)$", None),
    ("repeat_interleave_repeats", r"^(Repeat\.cu|RepeatInterleave\.cu)$", None),
    ("fractional_max_pool_samples", r"FractionalMax", None),
    ("sort_scan_internal", r"^(SortingRadixSelect\.cuh|TensorTopK\.cu|THCTensorTopK\.cuh|THCTensorSort\.cu|THCTensorMode\.cu|TensorModeKernel\.cuh|SortUtils\.cuh|Sort\.cu|ScanUtils\.cuh|ScanKernels\.cu|SortingCommon\.cuh)$", None),
    ("async_assert", r"^TensorCompare\.cu$", None),
    ("reduce_internal", r"^(Reduce\.cuh|reduction_template\.cuh)$", None),
    ("poisson_invalid_rate", r"^Distributions\.cu$", r"invalid Poisson rate|^lambda >= 0"),
    # Launch shape, operand count or a dtype path a kernel does not support: PyTorch's own
    # invariants, not the job's data.
    ("kernel_internal", r"^(DepthwiseConv3d\.cu|MemoryAccess\.cuh|mma_tensorop_compute_B_with_f16\.h)$", None),
    ("kernel_internal", None, r"^threadIdx\.x == 0 && threadIdx\.y == 0 && threadIdx\.z == 0$|doesn't work with double"),
    ("tensor_layout_internal", r"^(THCDeviceTensor-inl\.cuh|THCTensorInfo\.cuh|THCIntegerDivider\.cuh|THCNumerics\.cuh|IntegerDivider\.cuh)$", None),
]

# Host code that queues a device check: `at::_assert_async(cond, "msg")`. The device prints the
# message from TensorCompare.cu's kernel (without a message, that kernel's own `input[0] != 0`,
# which TensorCompare.cu's sites already record).
ASYNC_PATHS = ["aten/src/ATen/native"]
ASYNC_SITE = re.compile(r"(?<![A-Za-z0-9_])_assert_async\s*\(")
ASYNC_FILE = "TensorCompare.cu"


def async_sites_in(text):
    text = strip_comments(text)
    out = []
    for m in ASYNC_SITE.finditer(text):
        args = split_args(text, m.end())
        if args and len(args) == 2 and args[1].strip().startswith('"'):
            msg = unquote(args[1])
            if msg:
                out.append((ASYNC_FILE, msg))
    return out


SITE = re.compile(r"(?<![A-Za-z0-9_])(assert|CUDA_KERNEL_ASSERT|CUDA_KERNEL_ASSERT_MSG|CUDA_KERNEL_ASSERT_PRINTF)\s*\(")


def strip_comments(src):
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    return re.sub(r"//[^\n]*", "", src)


def split_args(text, start):
    """Arguments of the call whose '(' is at text[start-1]; None if unbalanced."""
    depth, args, cur, i, quote = 1, [], [], start, None
    while i < len(text):
        c = text[i]
        if quote:
            cur.append(c)
            if c == "\\" and i + 1 < len(text):
                cur.append(text[i + 1])
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
            cur.append(c)
        elif c in "([{":
            depth += 1
            cur.append(c)
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append("".join(cur))
                return args
            cur.append(c)
        elif c == "," and depth == 1:
            args.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    return None


def squash(s):
    return re.sub(r"\s+", " ", s).strip()


def unquote(lit):
    parts = re.findall(r'"((?:[^"\\]|\\.)*)"', lit)
    return "".join(parts).replace('\\"', '"').replace("\\n", "").strip()


DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)\(([^)]*)\)(.*)$", re.M)


def expand_macros(text):
    """The text with each function-like macro whose body asserts expanded at its call sites.

    A site inside a macro body prints the arguments of the macro's caller, not its parameter
    names: `CHECK_INDEX_IN_CLASS(t, n_classes)` in Loss.cu prints `t >= 0 && t < n_classes`.
    Only such macros are expanded, once (nested asserting macros are not used in these files);
    the definitions themselves are dropped so their parameter names are not recorded.
    """
    text = re.sub(r"\\\n", " ", text)  # join continuation lines
    macros = {}
    for m in DEFINE.finditer(text):
        if SITE.search(m.group(3)):
            params = [p.strip() for p in m.group(2).split(",")]
            macros[m.group(1)] = (params, m.group(3))
    if not macros:
        return text
    text = DEFINE.sub(lambda m: "" if m.group(1) in macros else m.group(0), text)
    call = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, macros)) + r")\s*\(")
    out, pos = [], 0
    for m in call.finditer(text):
        if m.start() < pos:
            continue
        args = split_args(text, m.end())
        params, body = macros[m.group(1)]
        if args is None or len(args) != len(params):
            continue
        subst = dict(zip(params, (a.strip() for a in args)))
        expanded = re.sub(r"[A-Za-z_]\w*", lambda t: subst.get(t.group(0), t.group(0)), body)
        out.append(text[pos:m.start()])
        out.append(expanded)
        # Skip past the invocation's closing parenthesis.
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        pos = i
    out.append(text[pos:])
    return "".join(out)


def sites_in(text):
    text = expand_macros(strip_comments(text))
    out = []
    for m in SITE.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        if text[line_start:m.start()].lstrip().startswith("#"):
            continue
        args = split_args(text, m.end())
        if not args:
            continue
        macro = m.group(1)
        if macro == "CUDA_KERNEL_ASSERT_MSG" and len(args) >= 2:
            expr = unquote(args[1]) or squash(args[0])
        else:
            expr = squash(args[0])
        if expr:
            out.append(expr)
    return out


def git(gitdir, *args):
    return subprocess.run(["git", "-C", gitdir, *args], check=True, capture_output=True,
                          text=True, errors="replace").stdout


def from_git(gitdir, rev):
    listing = git(gitdir, "grep", "-l", "-E", r"assert|CUDA_KERNEL_ASSERT", rev, "--", *PATHS)
    found = []
    for entry in listing.splitlines():
        path = entry.split(":", 1)[1]
        if not re.search(r"\.(cu|cuh|h|hpp)$", path):
            continue
        text = git(gitdir, "show", f"{rev}:{path}")
        base = path.rsplit("/", 1)[-1]
        for expr in sites_in(text):
            found.append((base, expr))
    listing = git(gitdir, "grep", "-l", "_assert_async", rev, "--", *ASYNC_PATHS)
    for entry in listing.splitlines():
        path = entry.split(":", 1)[1]
        if re.search(r"\.(cpp|cu)$", path):
            found.extend(async_sites_in(git(gitdir, "show", f"{rev}:{path}")))
    return found


def tree_files(root, subdirs, suffix_re):
    """(basename, text) of each file under root/subdir whose name matches suffix_re, in a
    stable order."""
    for sub in subdirs:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, sub)):
            dirnames.sort()
            for name in sorted(filenames):
                if re.search(suffix_re, name):
                    with open(os.path.join(dirpath, name), encoding="utf-8", errors="replace") as f:
                        yield name, f.read()


def from_tree(root):
    found = []
    for name, text in tree_files(root, PATHS, r"\.(cu|cuh|h|hpp)$"):
        if "assert" in text or "CUDA_KERNEL_ASSERT" in text:
            found.extend((name, expr) for expr in sites_in(text))
    for _, text in tree_files(root, ASYNC_PATHS, r"\.(cpp|cu)$"):
        if "_assert_async" in text:
            found.extend(async_sites_in(text))
    return found


def from_list(path):
    found = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            base, expr = line.split("\t")[:2]
            found.append((base, expr))
    return found


def family(base, expr):
    for fam, file_re, expr_re in FAMILIES:
        if file_re and not re.search(file_re, base):
            continue
        if expr_re and not re.search(expr_re, expr):
            continue
        return fam
    return "unmapped"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--git", action="append", default=[], metavar="LABEL=GITDIR@REV")
    ap.add_argument("--tree", action="append", default=[], metavar="LABEL=DIR")
    ap.add_argument("--sites", action="append", default=[], metavar="LABEL=FILE")
    ap.add_argument("--base", metavar="FILE")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    labels, sites = [], {}
    if a.base:
        with open(a.base, encoding="utf-8") as f:
            for line in list(f)[1:]:
                fields = line.rstrip("\n").split("\t")
                if len(fields) < 4:
                    continue
                _, base, expr, rels = fields[:4]
                rels = [r for r in rels.split(",") if r]
                for r in rels:
                    if r not in labels:
                        labels.append(r)
                sites[(base, expr)] = rels
        print(f"base: {len(sites)} sites", file=sys.stderr)
    sources = ([("git", s) for s in a.git] + [("tree", s) for s in a.tree]
               + [("sites", s) for s in a.sites])
    for kind, spec in sources:
        label, where = spec.split("=", 1)
        if label not in labels:
            labels.append(label)
        if kind == "git":
            gitdir, rev = where.rsplit("@", 1)
            found = from_git(gitdir, rev)
        elif kind == "tree":
            found = from_tree(where)
        else:
            found = from_list(where)
        print(f"{label}: {len(found)} sites, {len(set(found))} distinct", file=sys.stderr)
        for key in found:
            sites.setdefault(key, [])
            if label not in sites[key]:
                sites[key].append(label)
    # Releases oldest first whatever order they came in: numbered labels as versions, named
    # ones (main) after them in the order given.
    def version(label):
        parts = label.split(".")
        if all(p.isdigit() for p in parts):
            return (0, tuple(int(p) for p in parts), 0)
        return (1, (), labels.index(label))

    order = {l: version(l) for l in labels}
    rows = []
    for (base, expr), rels in sites.items():
        rels.sort(key=order.get)
        rows.append((family(base, expr), base, expr, ",".join(rels)))
    rows.sort()
    with open(a.out, "w", encoding="utf-8", newline="\n") as f:
        f.write("family\tkernel_file\texpression\treleases\n")
        for r in rows:
            f.write("\t".join(r) + "\n")
    print(f"{len(rows)} rows -> {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
