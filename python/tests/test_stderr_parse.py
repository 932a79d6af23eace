"""Kernel assertion lines as CUDA prints them, and the faulthandler stack, parsed without torch."""

from assertwatch_replay.stderr_parse import AssertionCollector, TextScanner, dsa_verdict

# Shapes seen in real reports (see the research brief's section on device asserts).
LINES = [
    "/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1146: indexSelectLargeIndex: block: [336,0,0], "
    "thread: [0,0,0] Assertion `srcIndex < srcSelectDimSize` failed.",
    "/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1146: indexSelectLargeIndex: block: [336,0,0], "
    "thread: [1,0,0] Assertion `srcIndex < srcSelectDimSize` failed.",
    "[rank3]:/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1146: indexSelectLargeIndex: block: [337,0,0], "
    "thread: [5,0,0] Assertion `srcIndex < srcSelectDimSize` failed.",
    "Loss.cu:95: operator(): block: [3663,0,0], thread: [64,0,0] Assertion `target_val >= zero && target_val <= one` failed.",
    'ScatterGatherKernel.cu:208: block: [883,0,0], thread: [12,0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed.',
    "kernel.cu:41: (null): block: [0,0,0], thread: [37,0,0] Assertion `x` failed.",
    "an ordinary line that mentions Assertion `nothing` but has no location",
]


def test_assertions_deduplicated_with_thread_counts():
    col = AssertionCollector()
    for line in LINES:
        col.feed(line)
    got = col.results()
    assert len(got) == 4
    first = got[0]
    assert first["file"] == "/pytorch/aten/src/ATen/native/cuda/Indexing.cu"
    assert first["line"] == 1146
    assert first["function"] == "indexSelectLargeIndex"
    assert first["assertion"] == "srcIndex < srcSelectDimSize"
    assert first["threads"] == 3
    assert first["first_block"] == [336, 0, 0] and first["first_thread"] == [0, 0, 0]
    assert got[1]["function"] == "operator()" and got[1]["line"] == 95
    assert got[2]["function"] is None
    assert got[2]["assertion"] == 'idx_dim >= 0 && idx_dim < index_size && "index out of bounds"'
    assert got[3]["function"] == "(null)"


def test_assertion_list_is_bounded():
    col = AssertionCollector()
    for i in range(100):
        col.feed(f"k.cu:{i}: f: block: [0,0,0], thread: [0,0,0] Assertion `a` failed.")
    assert len(col.results()) == 32 and col.dropped == 68


def test_faulthandler_stack_keeps_current_thread():
    sc = TextScanner()
    text = """Fatal Python error: Segmentation fault

Thread 0x00007f00000001 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait

Current thread 0x00007f00000002 (most recent call first):
  File "/home/u/proj/model.py", line 12 in step
  File "/home/u/proj/train.py", line 40 in replay

Extension modules: numpy.core._multiarray_umath (total: 1)
"""
    for line in text.splitlines():
        sc.feed(line)
    assert sc.fatal == "Segmentation fault"
    assert [f["line"] for f in sc.fault_frames()] == [40, 12]


def test_dsa_verdicts():
    sc = TextScanner()
    assert dsa_verdict(False, sc, None)["evidence"] == "not requested in this mode"
    assert dsa_verdict(True, sc, "CUDA error: device-side assert triggered")["effective"] is False
    msg = "CUDA error\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."
    assert "built without" in dsa_verdict(True, sc, msg)["evidence"]
    assert dsa_verdict(True, sc, "Looking for device-side assertion failure information...")["effective"] is True
