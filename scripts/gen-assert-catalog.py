#!/usr/bin/env python3
"""Generates src/detect/assert_sites.tsv: PyTorch's device-side assertion sites, by family.

Each site is a CUDA `assert(...)`, `CUDA_KERNEL_ASSERT(...)`, `CUDA_KERNEL_ASSERT_MSG(...)`
or `CUDA_KERNEL_ASSERT_PRINTF(...)` in PyTorch's CUDA kernels (aten/src/ATen/native/cuda and
the historic aten/src/THC, aten/src/THCUNN). What is recorded is what the device prints after
"Assertion": the condition as the preprocessor stringifies it (comments dropped, whitespace
collapsed) or, for the _MSG form, the message literal.

Sources, each a label and a place:
  --git LABEL=GITDIR@REV   a PyTorch clone (bare or not) and a revision (tag, branch, commit)
  --sites LABEL=FILE       a hand-transcribed list: "kernel_file<TAB>expression" per line,
                           for a revision no clone of which was at hand (lines starting with
                           '#' are comments)
  --base FILE              an earlier output of this script: its sites and their release
                           labels are kept (families are mapped again), so that a new list can
                           be added without the clones the earlier labels came from

Usage:
  scripts/gen-assert-catalog.py --git 1.4=/src/pytorch.git@v1.4.0 \
      --sites main=scripts/assert-sites-main.tsv --out src/detect/assert_sites.tsv

Output is deterministic: sites sorted by (family, kernel file, expression), release labels in
the order given on the command line. The family table below is this project's mapping.
"""

import argparse
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
    ("multinomial_invalid_probability", None, r"probability tensor contains either"),
    ("index_out_of_bounds", None, r"index < sizes\[i\]"),
    ("take_put_index", None, r"idx < numel && idx >= -numel|linearIndex < size && linearIndex >= -size|idx < size && idx >= -size"),
    ("embedding_index", None, r"^srcIndex < srcSelectDimSize$"),
    ("index_add_out_of_range", None, r"^dstIndex < dst(Add|Copy)DimSize$"),
    ("index_fill_out_of_range", None, r"^dstIndex_ < dstFillDimSize$"),
    ("scatter_gather_index", None, r"idx_dim >= 0 && idx_dim < index_size|indexValue >= 0 && indexValue < (src|tensor)\.sizes\[dim\]|vectorized gather kernel index out of bounds"),
    ("index_copy_out_of_range", None, r"index_copy_\(\): index out of bounds"),
    ("index_fill_out_of_range", r"^IndexKernel\.cu$", r"^idx >= -self_dim_size && idx < self_dim_size"),
    # A flat index that came out negative after the target passed its range check: the
    # kernel's index type overflowed (NLLLoss2d.cu `input_index >= 0`).
    ("index_overflow", r"^NLLLoss2d\.cu$", r"^(grad_)?input_index >= 0$"),
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
    ("reduce_internal", r"^Reduce\.cuh$", None),
    ("tensor_layout_internal", r"^(THCDeviceTensor-inl\.cuh|THCTensorInfo\.cuh|THCIntegerDivider\.cuh|THCNumerics\.cuh|IntegerDivider\.cuh)$", None),
]

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


def sites_in(text):
    text = strip_comments(text)
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
    sources = [("git", s) for s in a.git] + [("sites", s) for s in a.sites]
    for kind, spec in sources:
        label, where = spec.split("=", 1)
        if label not in labels:
            labels.append(label)
        if kind == "git":
            gitdir, rev = where.rsplit("@", 1)
            found = from_git(gitdir, rev)
        else:
            found = from_list(where)
        print(f"{label}: {len(found)} sites, {len(set(found))} distinct", file=sys.stderr)
        for key in found:
            sites.setdefault(key, [])
            if label not in sites[key]:
                sites[key].append(label)
    order = {l: i for i, l in enumerate(labels)}
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
