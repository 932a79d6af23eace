"""``scripts/gen-assert-catalog.py``: how it reads PyTorch's sources, on small source trees
written here, and that the committed catalog is what its family table maps."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import load_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gen-assert-catalog.py"
CATALOG = REPO / "src" / "detect" / "assert_sites.tsv"


def load():
    return load_script(SCRIPT, "gen_assert_catalog")


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def rows(path: Path) -> list[list[str]]:
    lines = path.read_text().splitlines()
    assert lines[0] == "family\tkernel_file\texpression\treleases"
    return [line.split("\t") for line in lines[1:]]


def test_a_macro_site_records_its_callers_arguments():
    gen = load()
    src = (
        "#define CHECK_IN_CLASS(INDEX, N_CLASSES) \\\n"
        "  if (1) { \\\n"
        "    CUDA_KERNEL_ASSERT(INDEX >= 0 && INDEX < N_CLASSES); \\\n"
        "  }\n"
        "__global__ void k(int t, int n_classes) {\n"
        "  CHECK_IN_CLASS(t, n_classes);\n"
        "  CHECK_IN_CLASS(cur_target, n_classes);\n"
        "}\n"
    )
    assert gen.sites_in(src) == [
        "t >= 0 && t < n_classes",
        "cur_target >= 0 && cur_target < n_classes",
    ]


def test_msg_form_records_the_message_and_comments_are_dropped():
    gen = load()
    src = (
        "// CUDA_KERNEL_ASSERT(commented_out);\n"
        "/* assert(also_not) */\n"
        '__device__ void f() { CUDA_KERNEL_ASSERT_MSG(a < b, "a went past " "b"); '
        "assert(x  <\n   y); }\n"
        "#define CUDA_KERNEL_ASSERT(cond) if (!(cond)) __assert_fail(#cond, 0, 0, 0)\n"
    )
    assert gen.sites_in(src) == ["a went past b", "x < y"]


def test_a_tree_and_its_async_asserts(tmp_path):
    root = write_tree(tmp_path / "pytorch", {
        "aten/src/ATen/native/cuda/Distributions.cu":
            'CUDA_KERNEL_ASSERT(lambda >= 0 && "invalid Poisson rate, expected rate to be non-negative");\n',
        "aten/src/ATen/native/cuda/linalg/Deep.cuh": "CUDA_KERNEL_ASSERT(false);\n",
        "aten/src/ATen/native/Distributions.cpp":
            'at::_assert_async(is_valid, "invalid multinomial distribution (sum of probabilities <= 0)");\n'
            "at::_assert_async(no_message);\n",
        "aten/src/ATen/native/cuda/Notes.md": "assert(not_a_source)\n",
    })
    out = tmp_path / "sites.tsv"
    subprocess.run([sys.executable, str(SCRIPT), "--tree", f"2.6={root}", "--out", str(out)],
                   check=True, capture_output=True, text=True)
    got = {(f, e): (fam, rel) for fam, f, e, rel in rows(out)}
    assert got == {
        ("Distributions.cu", 'lambda >= 0 && "invalid Poisson rate, expected rate to be non-negative"'):
            ("poisson_invalid_rate", "2.6"),
        ("Deep.cuh", "false"): ("unmapped", "2.6"),
        ("TensorCompare.cu", "invalid multinomial distribution (sum of probabilities <= 0)"):
            ("multinomial_invalid_probability", "2.6"),
    }


def test_releases_are_listed_oldest_first_whatever_the_order_given(tmp_path):
    a = write_tree(tmp_path / "a", {"aten/src/ATen/native/cuda/Repeat.cu": "CUDA_KERNEL_ASSERT(repeat >= 0);\n"})
    listed = tmp_path / "main.tsv"
    listed.write_text("# comment\nRepeat.cu\trepeat >= 0\n")
    out = tmp_path / "sites.tsv"
    subprocess.run([sys.executable, str(SCRIPT), "--sites", f"main={listed}", "--tree", f"2.6={a}",
                    "--tree", f"1.13={a}", "--out", str(out)], check=True, capture_output=True, text=True)
    assert rows(out) == [["repeat_interleave_repeats", "Repeat.cu", "repeat >= 0", "1.13,2.6,main"]]


def test_the_committed_catalog_is_what_the_family_table_maps(tmp_path):
    """Regenerating from the committed file alone maps every site again: a family edited in the
    TSV by hand, or a table row that no longer matches its sites, shows up here."""
    out = tmp_path / "again.tsv"
    subprocess.run([sys.executable, str(SCRIPT), "--base", str(CATALOG), "--out", str(out)],
                   check=True, capture_output=True, text=True)
    assert out.read_text() == CATALOG.read_text()
    assert not [r for r in rows(CATALOG) if r[0] == "unmapped"]
