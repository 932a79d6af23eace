//! The built-in rule table: one row per root-cause family.
//!
//! Rows are data, in the manner of node-problem-detector's kernel-monitor rules, so that adding a
//! family is one entry here plus a corpus sample that proves it. Every row keys on the text that
//! the *runtime* prints for the family (a CUDA error string, an NCCL result name, the body of a
//! kernel `assert`), never on one report's surrounding wording, so the rows also fire on other
//! PyTorch versions, other launchers' prefixes and other runtimes that print the same strings.
//!
//! Sources for the error strings: CUDA runtime `cudaGetErrorString` texts (CUDA Runtime API,
//! "Data types used by CUDA Runtime", `cudaError` enum), cuBLAS/cuDNN status names, NCCL's
//! `ncclResult_t` names and `ncclGetErrorString` texts, and the ATen kernel sources named in the
//! assertion rows (aten/src/ATen/native/cuda/*.cu).

use super::guards;
use crate::model::{Blame, Evidence, Kind};

/// A family of kernel `assert`s, recognised from the assertion expression or the kernel file.
pub struct AssertFamily {
    pub category: &'static str,
    /// Any of these substrings in the assertion expression selects the family.
    pub expression_has: &'static [&'static str],
    /// Any of these kernel source file names selects the family (checked after expressions).
    pub kernel_files: &'static [&'static str],
    pub hint: &'static str,
}

/// Checked in order; the first match wins. Expressions are more specific than file names.
pub const ASSERT_FAMILIES: &[AssertFamily] = &[
    AssertFamily {
        category: "nll_target_out_of_range",
        expression_has: &["n_classes", "n_class"],
        kernel_files: &[
            "ClassNLLCriterion.cu",
            "SpatialClassNLLCriterion.cu",
            "NLLLoss2d.cu",
        ],
        hint: "A class label is < 0 or >= the number of classes (cross_entropy / nll_loss): check \
               the label range against the model's output size, and ignore_index for padding.",
    },
    AssertFamily {
        category: "bce_target_range",
        expression_has: &[
            "target_val >= zero && target_val <= one",
            "target >= 0. && target <= 1.",
        ],
        kernel_files: &[],
        hint: "A binary cross-entropy target is outside [0, 1]: check the label preprocessing \
               (e.g. labels 0..255 from an image mask instead of 0/1).",
    },
    AssertFamily {
        category: "bce_input_range",
        // PaddlePaddle's BCE loss kernel checks its input the same way: "bce_loss_op.cu:38
        // Assertion `(x >= static_cast<T>(0)) && (x <= one)` failed. Input is expected to be
        // within the interval [0, 1], but recieved nan." (paddle/fluid/operators/bce_loss_op.cu,
        // later paddle/phi/kernels/gpu/bce_loss_kernel.cu).
        expression_has: &[
            "input_val >= zero && input_val <= one",
            "input >= 0. && input <= 1.",
            "(x >= static_cast<T>(0)) && (x <= one)",
        ],
        kernel_files: &["BCECriterion.cu", "bce_loss_op.cu", "bce_loss_kernel.cu"],
        hint: "binary_cross_entropy got an input outside [0, 1] (often NaN from an earlier \
               blow-up, or logits without sigmoid): use BCEWithLogitsLoss on raw logits.",
    },
    AssertFamily {
        category: "embedding_index",
        expression_has: &["srcIndex < srcSelectDimSize"],
        kernel_files: &[],
        hint: "An index_select/embedding lookup got an id >= the table size: a token id >= the \
               embedding size usually means the tokenizer and the model vocabularies differ \
               (resize_token_embeddings after adding tokens).",
    },
    AssertFamily {
        category: "index_add_out_of_range",
        expression_has: &["dstIndex < dstAddDimSize"],
        kernel_files: &[],
        hint: "index_add/index_copy got an index >= the destination size along the dimension: \
               check the index tensor's range.",
    },
    AssertFamily {
        category: "scatter_gather_index",
        // PaddlePaddle's gather/scatter helpers assert `index_value >= 0 && index_value <
        // input_dims[j]` and the like (paddle/phi/kernels/funcs/gather.cu.h, scatter.cu.h).
        expression_has: &[
            "idx_dim >= 0 && idx_dim < index_size",
            "index_value < input_dims",
        ],
        kernel_files: &["ScatterGatherKernel.cu", "gather.cu.h", "scatter.cu.h"],
        hint: "gather/scatter got an index outside [0, size) of the indexed dimension: check the \
               index tensor (e.g. labels used as gather indices).",
    },
    AssertFamily {
        category: "multinomial_invalid_probability",
        expression_has: &[
            "probability tensor contains either",
            "cumdist[size - 1] > ",
            "ge(val, zero)",
        ],
        kernel_files: &[
            "MultinomialKernel.cu",
            "THCTensorRandom.cuh",
            "Distributions.cu",
        ],
        hint: "torch.multinomial got probabilities with NaN/inf/negative entries or a row summing \
               to 0: check the logits for NaN and the temperature/top-p filtering before sampling.",
    },
    AssertFamily {
        category: "index_out_of_bounds",
        expression_has: &["index out of bounds", "index < sizes[i]"],
        kernel_files: &["IndexKernel.cu"],
        hint: "A tensor was indexed with an out-of-range index (t[idx], index_put, or an indexing \
               op fused into a Triton kernel): check the index values against the dimension size.",
    },
    AssertFamily {
        category: "dynamic_cast",
        expression_has: &[],
        kernel_files: &["DynamicCast.h"],
        hint:
            "A kernel met a dtype it cannot cast (c10 DynamicCast): check mixed dtypes passed to \
               the failing op.",
    },
];

/// Hint for an assertion in a kernel file that is none of PyTorch's (a C++/CUDA extension such as
/// torch-scatter's `segment_coo_cuda.cu`, a HIP sample, a CUB test): the check is that code's
/// own, so its source says what it expects.
pub const CUSTOM_ASSERT_HINT: &str =
    "An assertion in a kernel outside PyTorch (a C++/CUDA extension, a third-party library or \
     your own kernel) failed: the kernel file and expression name the check; read it in that \
     code's source (it usually guards the sizes, ranges or ordering of its inputs) and check \
     the inputs the job passes to that extension.";

/// Hint for a kernel assertion that matches no family.
pub const UNKNOWN_ASSERT_HINT: &str =
    "A CUDA kernel assertion failed: the assertion text and kernel file name the check; replay \
     the step with CUDA_LAUNCH_BLOCKING=1 or on CPU to get the failing Python line.";

/// One headline family, keyed on literal text the runtime prints.
pub struct HeadlineRule {
    pub name: &'static str,
    /// Any of these substrings marks a line as this family. They double as prefilter literals.
    pub literals: &'static [&'static str],
    pub kind: Kind,
    pub category: &'static str,
    pub blame: Blame,
    pub hint: &'static str,
    /// Higher wins when several rows match one line (a specific family beats a generic one).
    pub priority: u8,
    /// When not empty, the line must also contain one of these (for literals that are common
    /// outside the family, such as "Connection refused").
    pub requires_any: &'static [&'static str],
    /// Substrings that select this row on a line another rule's literal brought to inspection:
    /// the specific message after a generic prefix (`CUDA_EXCEPTION_6, Warp Misaligned Address`,
    /// `… (29 vs. 0)  driver shutting down`). They need no gate anchor of their own, which keeps
    /// the gate small; a line that has only them is not inspected.
    pub refines: &'static [&'static str],
    /// When set, a test the line must pass for the row to count (see `guards`): for literals
    /// that are everyday words as well as a message's head.
    pub guard: Option<fn(&str) -> bool>,
}

impl HeadlineRule {
    /// What a line that this row names reports.
    pub fn evidence(&self) -> Evidence {
        self.evidence_as(self.category, self.hint)
    }

    /// What a line that this row names reports, where the line names the family more precisely
    /// than the row (a device assert whose headline quotes the failed expression).
    pub fn evidence_as(&self, category: &'static str, hint: &'static str) -> Evidence {
        Evidence::Headline {
            kind: self.kind,
            category: category.into(),
            blame: self.blame,
            hint: hint.into(),
            rule: self.name.into(),
        }
    }
}

// Hints shared by the cuBLAS/cuDNN status rows. The rows follow the libraries' status enums
// (`cublasStatus_t` in cublas_api.h, `cudnnStatus_t` in cudnn.h / cudnn_graph.h), one category per
// status named after it, so that a status this table lacks still reads the same way in `unknown`.
const LIBRARY_HANDLE_HINT: &str = "The library could not create its handle or workspace, usually \
    because the GPU is out of memory when the framework starts (another process, or a framework \
    that reserves all memory up front): check nvidia-smi and the framework's memory settings.";
const LIBRARY_PARAM_HINT: &str =
    "The library rejected the call's parameters (shape, dtype, stride \
    or layout): check the inputs of the failing operation; an earlier asynchronous error can also \
    leave garbage sizes, so replay the step synchronously.";
const LIBRARY_ARCH_HINT: &str = "The library does not support this operation on this GPU or with \
    these parameters (dtype, layout, compute capability): check the GPU architecture the library \
    was built for and the inputs' dtype and layout.";

/// Shared by the out-of-memory rows.
const NCCL_CUDA_HINT: &str = "NCCL hit a CUDA failure: check this GPU's Xids and the job's CUDA \
    errors; rerun with NCCL_DEBUG=INFO for the failing call.";
const OOM_HINT: &str = "The job ran out of GPU memory: lower the batch size or sequence length, \
    enable activation checkpointing, or check for other processes on the GPU (serving engines: \
    lower the memory fraction they reserve for the KV cache).";

/// Shared by CUDA.jl's and CUDAnative.jl's device exceptions.
const JULIA_EXCEPTION_HINT: &str = "Julia code running on the GPU threw (a BoundsError, a type \
    error, an explicit throw): rerun with `julia -g2` for the device stack trace, or run the \
    kernel's code on the CPU (Array instead of CuArray) to get the exception itself.";

/// Shared by the store server's two wordings of its wait for the ranks.
const STORE_WAIT_HINT: &str = "The rank-0 TCPStore waited for all ranks and some never \
    connected: they did not start (a failed node, a scheduler that started fewer processes than \
    WORLD_SIZE), or cannot reach MASTER_ADDR:MASTER_PORT. Compare the ranks that joined with the \
    world size, and check the missing ranks' own logs.";

/// The row whose line counts only after a traceback through `torch/distributed/` (the incident
/// engine checks the frames).
pub const SOCKET_ERROR_IN_C10D_TRACEBACK: &str = "c10d_socket_error_in_traceback";

/// A CUDA call failed and no row names the error more precisely.
const GENERIC_CUDA_HINT: &str = "A CUDA call failed: replay the step with CUDA_LAUNCH_BLOCKING=1 \
    to find the call, and check the kernel log for Xids on the same GPU.";

/// vLLM's KV cache cannot hold one sequence of the configured length (two rows).
const VLLM_KV_CACHE_HINT: &str = "vLLM's KV cache, in the GPU memory left after the weights and \
    activations, cannot hold one sequence of max_model_len: lower --max-model-len (the message \
    gives the longest that fits), raise --gpu-memory-utilization, store the KV cache in fp8 \
    (--kv-cache-dtype fp8), or spread the model over more GPUs.";

/// A rank lost its connection to the c10d store (two rows).
const C10D_STORE_RECV_HINT: &str = "A rank lost its connection to the job's c10d TCPStore: the \
    process that hosts it (rank 0, or torchrun's agent) exited or crashed, usually first. Find \
    that process's own error; if it is still alive, check the network between the hosts.";

const IB_COMPLETION_HINT: &str = "An InfiniBand/RoCE work request completed with an error: \
    check the HCA, cables and switch port of both peers (ibstat, link error counters).";
const NO_KERNEL_IMAGE_HINT: &str = "The binary has no kernel for this GPU's architecture: \
    install a PyTorch/extension build that includes this compute capability (TORCH_CUDA_ARCH_LIST).";
const WATCHDOG_HINT: &str = "A collective did not finish within the NCCL timeout: one rank is \
     stuck, dead or out of step. Check the lagging rank's log and node first (its own error comes \
     earlier).";
const NCCL_SOCKET_HINT: &str = "NCCL could not connect a socket to a peer (bootstrap or the \
    socket transport): check that the peer is alive, that NCCL_SOCKET_IFNAME picks an interface \
    both hosts can reach (not a link-local or docker address), and the firewall.";
const HIGH: u8 = 30;
const MID: u8 = 20;
pub(crate) const GENERIC: u8 = 10;

/// A row for a wrapper's or a library's own words around a CUDA failure, whose family only the
/// error it names can give: `unknown` until `cuda_catalog` or a later line names the error (the
/// rows of detect's `REFINED_ONLY` count only then).
/// Does `line` hold `ERROR_OUT_OF_MEMORY` as a word of its own, not the tail of
/// `CUDA_ERROR_OUT_OF_MEMORY` (or of another library's `…_ERROR_OUT_OF_MEMORY`)?
fn bare_result_name_oom(line: &str) -> bool {
    line.match_indices("ERROR_OUT_OF_MEMORY").any(|(at, _)| {
        !line[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// A row for the GPU's memory running out, in the words of one more program.
const fn gpu_oom(name: &'static str, literals: &'static [&'static str]) -> HeadlineRule {
    HeadlineRule {
        name,
        literals,
        kind: Kind::Oom,
        category: "cuda_oom",
        blame: Blame::Application,
        hint: OOM_HINT,
        priority: MID,
        requires_any: &[],
        refines: &[],
        guard: None,
    }
}

/// nvidia-smi's device-handle failure; the row of NVML's other "GPU is lost" messages shares it.
const NVML_GPU_LOST: HeadlineRule = HeadlineRule {
    // nvidia-smi (or any NVML client) cannot reach a GPU the driver still lists: "Unable to
    // determine the device handle for GPU 0000:0B:00.0: Unknown Error", "…: GPU is lost.
    // Reboot the system to recover this GPU" (NVML's `NVML_ERROR_UNKNOWN` and
    // `NVML_ERROR_GPU_IS_LOST` for `nvmlDeviceGetHandleByIndex`, whose strings are
    // `nvmlErrorString`'s in NVIDIA's NVML API reference). The GPU has almost always fallen
    // off the bus; its Xid 79 is in the kernel log. "…: Not Found" (a GPU the driver never
    // brought up, or a Jetson's integrated GPU that NVML does not manage) is not this.
    name: "nvml_gpu_lost",
    literals: &["device handle for GPU"],
    kind: Kind::CudaError,
    category: "nvml_gpu_lost",
    blame: Blame::Hardware,
    hint: "NVML (nvidia-smi, DCGM, the device plugin) can no longer reach this GPU: it has \
           usually fallen off the bus (look for Xid 79 or 'fallen off the bus' in the kernel \
           log). Drain the node; a GPU reset or a reboot brings it back, and one that keeps \
           dropping needs a hardware check.",
    priority: HIGH,
    requires_any: &["Unknown Error", "GPU is lost", "GPU requires restart"],
    refines: &[],
    guard: None,
};

const fn generic_cuda(name: &'static str, literals: &'static [&'static str]) -> HeadlineRule {
    HeadlineRule {
        name,
        literals,
        kind: Kind::CudaError,
        category: "unknown",
        blame: Blame::Unknown,
        hint: GENERIC_CUDA_HINT,
        priority: GENERIC,
        requires_any: &[],
        refines: &[],
        guard: None,
    }
}

/// The hint of the rows for a job that ran out of the node's RAM rather than the GPU's memory.
const HOST_OOM_HINT: &str = "The job ran out of host RAM, not GPU memory: check the node's free \
    memory and the job's memory limit (cgroup, Slurm --mem, the pod's limit), and what holds \
    host memory (DataLoader workers, pinned buffers, a checkpoint or dataset loaded whole).";

/// Lines that say ptxas failed (see the `ptxas_…` rules).
const PTXAS_FAILED: &[&str] = &[
    "Ptx assembly aborted due to errors",
    "PTXASError",
    "PTXAS error",
    "`ptxas` failed with error code",
    "ptxas exited with non-zero error code",
];

pub const HEADLINE_RULES: &[HeadlineRule] = &[
    HeadlineRule {
        // A failed Vulkan call (ncnn's upscalers, llama.cpp's and GPT4All's Vulkan backends),
        // named by its `VkResult` in any of the forms `detect::vulkan` reads; a line whose value
        // the table lacks reports nothing.
        name: super::vulkan::ROW,
        literals: super::vulkan::LITERALS,
        kind: Kind::CudaError,
        category: "unknown",
        blame: Blame::Unknown,
        hint: GENERIC_CUDA_HINT,
        priority: MID,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "cuda_device_assert",
        // The runtime's message after an error prefix in any wording a poster gave it ("CUDA
        // error: device-side assertion fired", a paste cut after "assert"), and a title's "CUDA
        // device-side assert (srcIndex < srcSelectDimSize) on …", which names the error and,
        // often, the failed expression in place of the message.
        literals: &[
            "device-side assert triggered",
            "rror: device-side assert",
            "CUDA device-side assert",
            "cudaErrorAssert",
            "CUDA_ERROR_ASSERT",
        ],
        kind: Kind::DeviceAssert,
        category: "unknown",
        blame: Blame::Application,
        hint: "A CUDA kernel assertion failed; the traceback line is asynchronous and likely \
               wrong. Replay the step with CUDA_LAUNCH_BLOCKING=1 or on CPU to get the real line.",
        priority: HIGH,
        requires_any: &[],
        // cuda-gdb: CUDA_EXCEPTION_12 "Warp Assert" (see cuda_error_generic).
        refines: &["Warp Assert"],
        guard: None,
    },
    HeadlineRule {
        // PyTorch Geometric's message passing when gathering node features by `edge_index`
        // fails on the GPU: it catches the CUDA error (an index out of range asserts in the
        // gather kernel) and raises "Encountered a CUDA error. Please ensure that all indices in
        // 'edge_index' point to valid indices in the interval [0, N) in your node feature matrix
        // and try again." (torch_geometric/nn/conv/message_passing.py, `_index_select` /
        // `_lift`). The assertion itself is not shown; the message says which index is at fault.
        name: "pyg_edge_index_cuda_error",
        literals: &["Encountered a CUDA error. Please ensure that all indices in 'edge_index'"],
        kind: Kind::DeviceAssert,
        category: "unknown",
        blame: Blame::Application,
        hint: "A graph's edge_index holds a node index outside [0, number of nodes) of the \
               feature matrix it gathers from (PyTorch Geometric caught the device-side assert): \
               check edge_index.max() against x.size(0) for the failing batch, on CPU.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // Julia's CUDA.jl: an exception in device code (a bounds check, a type error, a `throw`).
        // The device prints "ERROR: a <exception> was thrown during kernel execution." and
        // "Run Julia on debug level 2 for device stack traces." (src/device/runtime.jl,
        // `report_exception`; `<exception>` is the exception's name: "exception", "BoundsError",
        // "type error" …), and the host raises `KernelException`: "exception thrown during kernel
        // execution on device …" (src/compiler/exceptions.jl, `Base.showerror`).
        name: "julia_kernel_exception",
        literals: &["thrown during kernel execution"],
        kind: Kind::DeviceAssert,
        category: "kernel_exception",
        blame: Blame::Application,
        hint: JULIA_EXCEPTION_HINT,
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // CUDAnative.jl, CUDA.jl's predecessor, reported a device exception as "ERROR: a
        // <exception> exception occurred during kernel execution." (src/compiler/rtlib.jl and
        // src/device/runtime.jl, `ptx_report_exception`): Julia's tag and article must lead it, since a
        // host wrapper's "An exception occurred during kernel execution: CUDA error: …" is
        // another error's frame.
        name: "cudanative_kernel_exception",
        literals: &["exception occurred during kernel execution"],
        kind: Kind::DeviceAssert,
        category: "kernel_exception",
        blame: Blame::Application,
        hint: JULIA_EXCEPTION_HINT,
        priority: HIGH,
        requires_any: &["ERROR: a "],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "cuda_illegal_address",
        literals: &[
            "an illegal memory access was encountered",
            "CUDA_ERROR_ILLEGAL_ADDRESS",
            "cudaErrorIllegalAddress",
            // A title's shortening: "[Bug]: CUDA illegal memory access when calling
            // flash_attn_cuda.fwd_kvcache", also after a tag or a colon ("[CUDA] illegal memory
            // access when using …").
            "CUDA illegal memory access",
            "CUDA] illegal memory access",
            "CUDA: illegal memory access",
            // compute-sanitizer's (and cuda-memcheck's) memcheck report of the access itself:
            // "========= Invalid __global__ write of size 4 bytes" (Compute Sanitizer user
            // manual, "Memcheck Tool"; __shared__ and __local__ for the other address spaces).
            "Invalid __global__ read",
            "Invalid __global__ write",
            "Invalid __shared__ read",
            "Invalid __shared__ write",
            "Invalid __local__ read",
            "Invalid __local__ write",
        ],
        kind: Kind::CudaError,
        category: "illegal_memory_access",
        blame: Blame::Application,
        hint: "A kernel read or wrote outside its allocation (a custom/extension kernel, or an \
               index bug). Run the step under compute-sanitizer; if an Xid 31/13 names another \
               cause or it repeats on one GPU only, suspect the GPU.",
        priority: HIGH,
        requires_any: &[],
        // cuda-gdb: CUDA_EXCEPTION_1, 10, 14 and 5 (see cuda_error_generic).
        refines: &[
            "Lane Illegal Address",
            "Device Illegal Address",
            "Warp Illegal Address",
            "Warp Out-of-range Address",
        ],
        guard: None,
    },
    HeadlineRule {
        // ROCm's HSA runtime (ROCr) on a GPU page fault, before it aborts the process: "Memory
        // access fault by GPU node-1 (Agent handle: 0x…) on address 0x…. Reason: Page not
        // present or supervisor privilege." (ROCR-Runtime, core/runtime/runtime.cpp, its VM
        // fault handler). Keyed on "on address " so that the gate's existing " address" anchor
        // serves; the sentence's start must be on the line. HIP's `hipErrorIllegalAddress` is
        // the CUDA catalog's.
        name: "rocr_memory_access_fault",
        literals: &["on address "],
        kind: Kind::CudaError,
        category: "illegal_memory_access",
        blame: Blame::Application,
        hint: "A GPU kernel read or wrote an unmapped or read-only page (ROCm's page fault): a \
               custom/extension kernel or an index bug. Rerun with AMD_SERIALIZE_KERNEL=3 and \
               HIP_LAUNCH_BLOCKING=1 to find the kernel; if it repeats on one GPU only, suspect \
               the GPU.",
        priority: HIGH,
        requires_any: &["Memory access fault by GPU"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // ROCr's hardware-exception handler, when the kernel driver (KFD) signals that the GPU
        // hung or hit an ECC error and reset: "HW Exception by GPU node-1 (Agent handle: 0x…)
        // reason :GPU Hang", or "… reason :ECC" (ROCR-Runtime, core/runtime/runtime.cpp,
        // `Runtime::HwExceptionHandler`, which then aborts the process). The ECC reason is its
        // own row below.
        name: "rocr_hw_exception",
        literals: &["HW Exception by GPU"],
        kind: Kind::CudaError,
        category: "gpu_hang",
        blame: Blame::Unknown,
        hint: "The GPU stopped responding and the driver reset it, killing every process on it \
               (ROCm's GPU hang). Check dmesg for the ring timeout and `GPU reset`: one kernel \
               running for seconds on a GPU that also drives a display, or a runtime/firmware \
               fault, is the job's or the stack's; the same GPU hanging again across jobs is the \
               GPU's.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "rocr_hw_exception_ecc",
        literals: &["HW Exception by GPU"],
        kind: Kind::CudaError,
        category: "ecc_uncorrectable",
        blame: Blame::Hardware,
        hint: "The GPU reported an uncorrectable ECC error and the driver reset it (ROCm's \
               hardware exception): drain the node, check the GPU's RAS error counts \
               (amd-smi metric --ecc) and restart the job elsewhere.",
        priority: HIGH + 1,
        requires_any: &["reason :ECC", "reason: ECC"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "cuda_misaligned_address",
        literals: &[
            "misaligned address",
            "CUDA_ERROR_MISALIGNED_ADDRESS",
            "cudaErrorMisalignedAddress",
        ],
        kind: Kind::CudaError,
        category: "misaligned_address",
        blame: Blame::Application,
        hint: "A kernel used a misaligned pointer (often a custom or fused kernel on a \
               non-contiguous or offset tensor): try .contiguous() inputs and run under \
               compute-sanitizer.",
        priority: HIGH,
        requires_any: &[],
        // cuda-gdb: CUDA_EXCEPTION_6 and 11 (see cuda_error_generic).
        refines: &["Warp Misaligned Address", "Lane Misaligned Address"],
        guard: None,
    },
    HeadlineRule {
        name: "cuda_illegal_instruction",
        literals: &[
            "an illegal instruction was encountered",
            "CUDA_ERROR_ILLEGAL_INSTRUCTION",
            "cudaErrorIllegalInstruction",
        ],
        kind: Kind::CudaError,
        category: "illegal_instruction",
        blame: Blame::Application,
        hint: "A kernel executed an illegal instruction (a miscompiled or wrong-architecture \
               kernel): check the extension's build flags; if it is one GPU only, check Xids.",
        priority: HIGH,
        requires_any: &[],
        // cuda-gdb: CUDA_EXCEPTION_4 (see cuda_error_generic).
        refines: &["Warp Illegal Instruction"],
        guard: None,
    },
    HeadlineRule {
        // A kernel's call stack overflowed or was corrupted (`cudaErrorHardwareStackError`, 714,
        // "hardware stack error": its cudaGetErrorString text is read by the catalog); cuda-gdb
        // reports it as CUDA_EXCEPTION_9 "Warp Hardware Stack Overflow" or CUDA_EXCEPTION_3 "Lane
        // User Stack Overflow" (CUDA-GDB's "GPU Error Reporting" table).
        name: "cuda_hardware_stack_error",
        literals: &[
            "CUDA_ERROR_HARDWARE_STACK_ERROR",
            "cudaErrorHardwareStackError",
        ],
        kind: Kind::CudaError,
        category: "hardware_stack_error",
        blame: Blame::Application,
        hint: "A kernel overflowed or corrupted its call stack (deep recursion, large local \
               arrays): run it under compute-sanitizer, raise the stack size \
               (cudaDeviceSetLimit(cudaLimitStackSize)) or make the kernel use less stack; \
               despite the name this is a kernel bug, not broken hardware.",
        priority: HIGH,
        requires_any: &[],
        refines: &["Warp Hardware Stack Overflow", "Lane User Stack Overflow"],
        guard: None,
    },
    HeadlineRule {
        name: "cuda_launch_failure",
        literals: &[
            "unspecified launch failure",
            "CUDA_ERROR_LAUNCH_FAILED",
            "cudaErrorLaunchFailure",
        ],
        kind: Kind::CudaError,
        category: "unspecified_launch_failure",
        blame: Blame::Unknown,
        hint: "A kernel faulted without a specific cause: check the kernel log for an Xid at the \
               same time (13/31/43 point at the job, 79/48/119 at the GPU), then replay the step.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "cuda_ecc_uncorrectable",
        literals: &[
            "uncorrectable ECC error encountered",
            "CUDA_ERROR_ECC_UNCORRECTABLE",
            "cudaErrorECCUncorrectable",
        ],
        kind: Kind::CudaError,
        category: "ecc_uncorrectable",
        blame: Blame::Hardware,
        hint:
            "The GPU reported an uncorrectable ECC error: drain the node, reset the GPU and check \
               retired pages/remapped rows; restart the job elsewhere.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "cuda_nvlink_uncorrectable",
        literals: &[
            "uncorrectable NVLink error",
            "CUDA_ERROR_NVLINK_UNCORRECTABLE",
        ],
        kind: Kind::CudaError,
        category: "nvlink_uncorrectable",
        blame: Blame::Hardware,
        hint: "An uncorrectable NVLink error was detected: drain the node and check NVLink error \
               counters and Xid 74 in the kernel log.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // A kernel library that refuses the GPU's architecture outright: flash-attention's
        // `TORCH_CHECK(is_sm8x || is_sm90, "FlashAttention only supports Ampere GPUs or newer.")`
        // (csrc/flash_attn/flash_api.cpp), and the wrappers that reword it ("… only supports
        // Turing GPUs or newer"). The build has kernels; the card is too old for them.
        name: "unsupported_gpu",
        literals: &[" GPUs or newer", " GPUs and newer"],
        kind: Kind::CudaError,
        category: "unsupported_gpu",
        blame: Blame::Application,
        hint: "A library in the job supports only newer GPU architectures than this one (the \
               message names the oldest): run the job on such GPUs, or turn the library off \
               (for flash-attention, an attention implementation such as sdpa or eager).",
        priority: MID,
        requires_any: &["Error", "error", "ERROR"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // A communicator's initialisation reported as failed without NCCL's result ("RuntimeError:
        // ncclCommInitRank failed.", a binding's own check); a rule that names the result wins.
        name: "nccl_init_failed",
        literals: &[
            "ncclCommInitRank failed",
            "ncclCommInitAll failed",
            "ncclCommInitRankConfig failed",
        ],
        kind: Kind::NcclError,
        category: "nccl_init_failed",
        blame: Blame::Unknown,
        hint: "An NCCL communicator could not be created: rerun with NCCL_DEBUG=INFO (or WARN) \
               to see NCCL's reason; common ones are a full /dev/shm in containers, no usable \
               network interface (NCCL_SOCKET_IFNAME), and ranks that disagree on the world size.",
        priority: GENERIC,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "cuda_no_kernel_image",
        literals: &[
            "no kernel image is available for execution",
            // Capitalised where a page or a wrapper starts its sentence with it ("RuntimeError: No
            // kernel image is available for execution on the device").
            "No kernel image is available for execution",
            "CUDA_ERROR_NO_BINARY_FOR_GPU",
            "cudaErrorNoKernelImageForDevice",
        ],
        kind: Kind::CudaError,
        category: "no_kernel_image",
        blame: Blame::Application,
        hint: NO_KERNEL_IMAGE_HINT,
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // `cudaErrorInvalidDeviceFunction` (98) / `hipErrorInvalidDeviceFunction`: the launched
        // function has no code for this device (CUDA Runtime API, enum `cudaError`; the catalog
        // maps both names here). Mostly the same cause and remedy as a missing kernel image, but
        // reports name it by its own words, so it is its own family. Its message alone, as
        // `HANDLE_ERROR`-style checks print it: "KERNEL_ERROR: invalid device function in
        // …/cuda_ml_optimiser.cu at line 273 (error-code 8)". The words alone are any device
        // layer's, so the line must name CUDA, HIP or a CUDA source.
        name: "cuda_invalid_device_function",
        literals: &["invalid device function"],
        kind: Kind::CudaError,
        category: "invalid_device_function",
        blame: Blame::Application,
        hint: "The launched kernel has no code for this GPU: the binary or extension was built \
               for other architectures (install a build that includes this compute capability, \
               TORCH_CUDA_ARCH_LIST for extensions) or a ROCm build runs on a GPU it does not \
               target (HSA_OVERRIDE_GFX_VERSION only where the ISA matches).",
        priority: HIGH,
        requires_any: &["CUDA", "cuda", "Cuda", "HIP", "hip", ".cu", "error-code"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // PyTorch's check of the GPUs against the architectures its wheel was built for
        // (torch/cuda/__init__.py, `_check_capability`): a GPU newer than the build ("NVIDIA
        // GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch
        // installation. The current PyTorch install supports CUDA capabilities sm_50 … sm_90.")
        // or older than its minimum ("Found GPU0 GeForce GT 730 which is of cuda capability 3.5.
        // PyTorch no longer supports this GPU because it is too old."). It is a warning, but no
        // kernel of that build can run on the GPU: the first launch fails with "no kernel image is
        // available", which joins this incident.
        name: "torch_unsupported_capability",
        literals: &[
            "with CUDA capability sm_",
            "PyTorch no longer supports this GPU because it is too old",
        ],
        kind: Kind::CudaError,
        category: "no_kernel_image",
        blame: Blame::Application,
        hint: NO_KERNEL_IMAGE_HINT,
        priority: HIGH,
        requires_any: &["is not compatible with the current", "too old"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // Kokkos (LAMMPS's KOKKOS package, Idefix, Trilinos, …) checks at start-up that the
        // binary holds kernels for the GPU: "Kokkos::Cuda::initialize ERROR: likely mismatch of
        // architecture" when no kernel runs at all, "Kokkos::Cuda::initialize ERROR: running
        // kernels compiled for compute capability 8.0 on device with compute capability 7.0 is
        // not supported by CUDA!" when the build targets a newer GPU
        // (core/src/Cuda/Kokkos_Cuda_Instance.cpp), then `Kokkos::abort`s. Built with the wrong
        // `Kokkos_ARCH_*`, as a missing kernel image is. Only the second form holds a gate
        // anchor ("CUDA"); the first would need one of its own.
        name: "kokkos_arch_mismatch",
        literals: &["is not supported by CUDA!"],
        kind: Kind::CudaError,
        category: "no_kernel_image",
        blame: Blame::Application,
        hint: "Kokkos found no kernels built for this GPU: rebuild with the Kokkos_ARCH_* option \
               of this GPU's compute capability (or use the build made for it), or run the job on \
               the GPU model the binary was built for.",
        priority: HIGH,
        requires_any: &["Cuda::initialize ERROR: running kernels compiled for"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "cuda_launch_out_of_resources",
        literals: &[
            "too many resources requested for launch",
            "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
            "cudaErrorLaunchOutOfResources",
        ],
        kind: Kind::CudaError,
        category: "launch_out_of_resources",
        blame: Blame::Application,
        hint: "A kernel asked for more registers/shared memory than the GPU has per block: reduce \
               the block size or tile configuration of the failing kernel.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // Triton's compiler/launcher when a kernel's configuration needs more than the GPU
        // offers per block: `triton.runtime.errors.OutOfResources: out of resource: shared
        // memory, Required: 131072, Hardware limit: 101376. Reducing block sizes or `num_stages`
        // may help.` (triton/runtime/errors.py; "threads" and "registers" name the other
        // limits). A family of its own, not CUDA's launch error: Triton raises it before any
        // launch, when it compiles a configuration, and the remedy is the configuration's (block
        // sizes, `num_stages`, the autotuner's choices). The limit is the GPU's (48–228 KB of
        // shared memory per block by architecture), so a kernel tuned on a newer GPU fails on an
        // older one.
        name: "triton_out_of_resources",
        literals: &[
            "OutOfResources: out of resource",
            "out of resource: shared memory",
        ],
        kind: Kind::CudaError,
        category: "triton_out_of_resources",
        blame: Blame::Application,
        hint: "A Triton kernel's configuration needs more shared memory (or threads/registers) \
               per block than this GPU has (Required vs Hardware limit on the line): use smaller \
               block sizes or fewer num_stages for this GPU, let autotuning pick a config that \
               fits, or disable the Triton path (torch.compile, a fused attention kernel) on \
               older GPUs.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "cuda_device_unavailable",
        literals: &[
            "busy or unavailable",
            "CUDA_ERROR_DEVICE_UNAVAILABLE",
            "cudaErrorDevicesUnavailable",
        ],
        kind: Kind::CudaError,
        category: "device_unavailable",
        blame: Blame::Unknown,
        hint: "The GPU refused a new context: another process holds it in exclusive-process mode, \
               or the GPU is in a bad state (check nvidia-smi and Xids).",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "cuda_launch_timeout",
        literals: &[
            "the launch timed out and was terminated",
            "CUDA_ERROR_LAUNCH_TIMEOUT",
        ],
        kind: Kind::CudaError,
        category: "launch_timeout",
        blame: Blame::Application,
        hint: "A kernel ran past the display watchdog: run compute on a GPU without a display or \
               split the work.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // NVRTC, the runtime compiler that PyTorch's JIT fusers, CuPy and others call, rejects
        // an architecture it does not know: "nvrtc: error: invalid value for --gpu-architecture
        // (-arch)" in its compile log, which PyTorch follows with "nvrtc compilation failed"
        // (torch/csrc/jit/codegen/fuser/cuda/fused_kernel.cpp). The GPU is newer than the CUDA
        // toolkit the job carries.
        name: "nvrtc_invalid_arch",
        literals: &["invalid value for --gpu-architecture"],
        kind: Kind::CudaError,
        category: "nvrtc_invalid_arch",
        blame: Blame::Application,
        hint: "The job's runtime compiler (NVRTC) does not know this GPU's architecture: the \
               CUDA version the framework ships is older than the GPU. Install a build for a \
               newer CUDA, or turn the JIT fuser off (torch._C._jit_override_can_fuse_on_gpu).",
        priority: HIGH + 1,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // Any other failure of a kernel compiled at run time: PyTorch's "nvrtc compilation
        // failed" (NVRTC's `nvrtcResult` NVRTC_ERROR_COMPILATION).
        // CuPy raises NVRTC's result as `cupy.cuda.nvrtc.NVRTCError: NVRTC_ERROR_COMPILATION
        // (6)` (cupy/cuda/nvrtc.pyx, `check_status`), with the name its table gives the value,
        // "NVRTC_ERROR unknown (7)" for one it lacks.
        name: "nvrtc_compilation_failed",
        literals: &["nvrtc compilation failed", "NVRTCError: NVRTC_ERROR"],
        kind: Kind::CudaError,
        category: "nvrtc_compilation_failed",
        blame: Blame::Application,
        hint: "A kernel compiled at run time (NVRTC: a JIT fuser, CuPy, a custom kernel) failed \
               to compile: the compile log above the error says why; an unknown architecture \
               means the CUDA version is older than the GPU.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // ptxas, the PTX assembler that Triton and XLA run while a job compiles its kernels,
        // rejecting PTX newer than itself: "ptxas …, line 5; fatal   : Unsupported .version 8.6;
        // current version is '8.5'" (the job's compiler emits a PTX ISA this ptxas predates: the
        // mismatch of the runtime's `cudaErrorUnsupportedPtxVersion`, whose remedy is the
        // driver's, while here it is the assembler's). ptxas prints the reason on a line of its
        // own, which holds no gate anchor; the reason counts where a line that names the failure
        // carries it too (XLA's "ptxas exited with non-zero error code …, output: ptxas …", a
        // title, a wrapped paste). Elsewhere the closing line gives `ptxas_failed`.
        name: "ptxas_unsupported_ptx_version",
        literals: PTXAS_FAILED,
        kind: Kind::CudaError,
        category: "ptxas_unsupported_ptx_version",
        blame: Blame::Application,
        hint: "The PTX assembler (ptxas) the job's compiler calls is older than the PTX the \
               compiler emits: point it at the ptxas of a CUDA toolkit at least as new \
               (TRITON_PTXAS_PATH for Triton, the CUDA data directory for XLA) or use the ptxas \
               bundled with the compiler.",
        priority: HIGH + 1,
        requires_any: &["Unsupported .version"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // ptxas not knowing the GPU it is asked to assemble for: "ptxas fatal   : Value
        // 'sm_121a' is not defined for option 'gpu-name'" (a toolkit older than the GPU),
        // read where the line names the failure (XLA's one-line form).
        name: "ptxas_unsupported_arch",
        literals: PTXAS_FAILED,
        kind: Kind::CudaError,
        category: "ptxas_unsupported_arch",
        blame: Blame::Application,
        hint: "The PTX assembler (ptxas) the job's compiler calls does not know this GPU's \
               architecture: use the ptxas of a CUDA toolkit that supports the GPU \
               (TRITON_PTXAS_PATH for Triton, the CUDA data directory for XLA).",
        priority: HIGH + 1,
        requires_any: &["is not defined for option 'gpu-name'"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // Any other ptxas failure while a job compiles its kernels: ptxas' own closing line and
        // the compilers' wrappers of it (Triton 3's `PTXASError: PTXAS error: Internal Triton
        // PTX codegen error`, Triton 2's "`ptxas` failed with error code N", XLA's "ptxas exited
        // with non-zero error code N"). ptxas prints the reason on the lines before.
        name: "ptxas_failed",
        literals: PTXAS_FAILED,
        kind: Kind::CudaError,
        category: "ptxas_failed",
        blame: Blame::Application,
        hint: "The PTX assembler (ptxas) failed while the job compiled a kernel (Triton, \
               torch.compile, XLA): its lines above say why — most often a ptxas older than the \
               PTX or than the GPU (use the ptxas of a matching CUDA toolkit, \
               TRITON_PTXAS_PATH), else a kernel that needs more registers or shared memory \
               than the GPU has.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "cuda_driver_insufficient",
        literals: &["driver version is insufficient for CUDA runtime version"],
        kind: Kind::CudaError,
        category: "insufficient_driver",
        blame: Blame::Driver,
        hint: "The node's NVIDIA driver is older than the job's CUDA runtime needs: upgrade the \
               driver or use an image built for the installed driver.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "cublas_execution_failed",
        literals: &[
            "CUBLAS_STATUS_EXECUTION_FAILED",
            // TensorFlow's matmul/BLAS ops when the cuBLAS call fails: "Blas GEMM launch failed :
            // a.shape=…", "Blas xGEMMBatched launch failed", "Blas GEMV launch failed"
            // (tensorflow/core/kernels/matmul_op*.cc).
            "GEMM launch failed",
            "GEMMBatched launch failed",
            "GEMV launch failed",
        ],
        kind: Kind::CudaError,
        category: "cublas_execution_failed",
        blame: Blame::Unknown,
        hint: "A cuBLAS kernel failed to run: often the echo of an earlier asynchronous error or \
               an out-of-range input (e.g. an embedding index); replay the step synchronously.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "cublas_internal_error",
        literals: &["CUBLAS_STATUS_INTERNAL_ERROR"],
        kind: Kind::CudaError,
        category: "cublas_internal_error",
        blame: Blame::Unknown,
        hint: "cuBLAS reported an internal error: often memory pressure or an earlier \
               asynchronous error; replay the step synchronously.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // TensorFlow prints "failed to create cublas handle: CUBLAS_STATUS_NOT_INITIALIZED"
        // (stream_executor/cuda/cuda_blas.cc) when the GPU is out of memory at start-up.
        name: "cublas_not_initialized",
        literals: &["CUBLAS_STATUS_NOT_INITIALIZED"],
        kind: Kind::CudaError,
        category: "cublas_not_initialized",
        blame: Blame::Application,
        hint: LIBRARY_HANDLE_HINT,
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // "Resource allocation failed inside the cuBLAS library", usually a `cudaMalloc` that
        // failed (cuBLAS's status reference): the GPU's memory ran out when the handle or its
        // workspace was created.
        name: "cublas_alloc_failed",
        literals: &["CUBLAS_STATUS_ALLOC_FAILED"],
        kind: Kind::Oom,
        category: "cublas_alloc_failed",
        blame: Blame::Application,
        hint: LIBRARY_HANDLE_HINT,
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // DeepSpeed's check of `cublasCreate` in its kernels' context: "RuntimeError: Fail to
        // create cublas handle." (csrc/includes/context.h), which names no status. cuBLAS fails
        // to create a handle when it cannot get the memory for it, usually because the GPU is
        // already full.
        name: "cublas_handle_create_failed",
        literals: &["rror: Fail to create cublas handle"],
        kind: Kind::CudaError,
        category: "cublas_create_failed",
        blame: Blame::Application,
        hint: "cuBLAS could not create its handle, almost always for want of GPU memory at that \
               moment: check what else holds memory on the GPU (nvidia-smi) and whether this rank \
               picked the GPU another rank uses.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "cublas_invalid_value",
        literals: &["CUBLAS_STATUS_INVALID_VALUE"],
        kind: Kind::CudaError,
        category: "cublas_invalid_value",
        blame: Blame::Application,
        hint: LIBRARY_PARAM_HINT,
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "cublas_not_supported",
        literals: &["CUBLAS_STATUS_NOT_SUPPORTED", "CUBLAS_STATUS_ARCH_MISMATCH"],
        kind: Kind::CudaError,
        category: "cublas_not_supported",
        blame: Blame::Application,
        hint: LIBRARY_ARCH_HINT,
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "cublas_mapping_error",
        literals: &["CUBLAS_STATUS_MAPPING_ERROR"],
        kind: Kind::CudaError,
        category: "cublas_mapping_error",
        blame: Blame::Unknown,
        hint: "cuBLAS could not access GPU memory (mapping error): often an earlier asynchronous \
               error; replay the step synchronously.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "cudnn_execution_failed",
        literals: &["CUDNN_STATUS_EXECUTION_FAILED"],
        kind: Kind::CudaError,
        category: "cudnn_execution_failed",
        blame: Blame::Unknown,
        hint: "A cuDNN kernel failed to run: often the echo of an earlier asynchronous error; \
               replay the step synchronously and check the kernel log for Xids.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "cudnn_internal_error",
        literals: &[
            "CUDNN_STATUS_INTERNAL_ERROR",
            // TensorFlow's convolution ops: "Failed to get convolution algorithm. This is
            // probably because cuDNN failed to initialize, so try looking to see if a warning log
            // message was printed above." (tensorflow/core/kernels/conv_ops*). The warning it
            // points at is, in the reports that show it, "Could not create cudnn handle:
            // CUDNN_STATUS_INTERNAL_ERROR" (stream_executor/cuda/cuda_dnn.cc; e.g.
            // tensorflow/models#7088), cuDNN's failure to get memory for its handle.
            "cuDNN failed to initialize",
        ],
        kind: Kind::CudaError,
        category: "cudnn_internal_error",
        blame: Blame::Unknown,
        hint:
            "cuDNN reported an internal error: often memory pressure or a cuDNN/driver mismatch; \
               retry with torch.backends.cudnn.benchmark=False and check GPU memory.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "cudnn_mapping_error",
        literals: &["CUDNN_STATUS_MAPPING_ERROR"],
        kind: Kind::CudaError,
        category: "cudnn_mapping_error",
        blame: Blame::Unknown,
        hint: "cuDNN could not access GPU memory (mapping error): often an earlier asynchronous \
               error; replay the step synchronously.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // TensorFlow prints "Could not create cudnn handle: CUDNN_STATUS_NOT_INITIALIZED"
        // (stream_executor/cuda/cuda_dnn.cc) when the GPU is out of memory at start-up.
        name: "cudnn_not_initialized",
        literals: &["CUDNN_STATUS_NOT_INITIALIZED"],
        kind: Kind::CudaError,
        category: "cudnn_not_initialized",
        blame: Blame::Application,
        hint: LIBRARY_HANDLE_HINT,
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // "Resource allocation failed inside the cuDNN library", usually a `cudaMalloc` that
        // failed (cuDNN's status reference): the GPU's memory ran out when the handle or its
        // workspace was created.
        name: "cudnn_alloc_failed",
        literals: &["CUDNN_STATUS_ALLOC_FAILED"],
        kind: Kind::Oom,
        category: "cudnn_alloc_failed",
        blame: Blame::Application,
        hint: LIBRARY_HANDLE_HINT,
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // cuDNN 9 adds sub-codes after the major ones (`CUDNN_STATUS_NOT_SUPPORTED_SHAPE`,
        // `CUDNN_STATUS_BAD_PARAM_NULL_POINTER`, ...); the literal is their common prefix.
        name: "cudnn_not_supported",
        literals: &["CUDNN_STATUS_NOT_SUPPORTED", "CUDNN_STATUS_ARCH_MISMATCH"],
        kind: Kind::CudaError,
        category: "cudnn_not_supported",
        blame: Blame::Application,
        hint: LIBRARY_ARCH_HINT,
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "cudnn_bad_param",
        literals: &["CUDNN_STATUS_BAD_PARAM", "CUDNN_STATUS_INVALID_VALUE"],
        kind: Kind::CudaError,
        category: "cudnn_bad_param",
        blame: Blame::Application,
        hint: LIBRARY_PARAM_HINT,
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // No cuDNN algorithm or engine could run the convolution, usually because none fit in
        // the memory left for its workspace: PyTorch's "Unable to find a valid cuDNN algorithm to
        // run convolution" (aten/src/ATen/native/cudnn/Conv_v7.cpp) and "GET/FIND was unable to
        // find an engine to execute this computation" (Conv_v8.cpp), TensorFlow's
        // `NotFoundError: No algorithm worked!` (core/kernels/conv_ops*.cc).
        name: "cudnn_no_algorithm",
        literals: &[
            "Unable to find a valid cuDNN algorithm",
            "unable to find an engine to execute this computation",
            "No algorithm worked!",
        ],
        kind: Kind::CudaError,
        category: "cudnn_no_algorithm",
        blame: Blame::Application,
        hint: "No cuDNN algorithm could run this convolution, most often because the GPU had no \
               memory left for its workspace: lower the batch size, free other GPU memory \
               (TensorFlow: allow_growth), or try torch.backends.cudnn.benchmark=False.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "cudnn_version_mismatch",
        literals: &[
            "CUDNN_STATUS_VERSION_MISMATCH",
            "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH",
            "CUDNN_STATUS_RUNTIME_PREREQUISITE_MISSING",
        ],
        kind: Kind::CudaError,
        category: "cudnn_version_mismatch",
        blame: Blame::Driver,
        hint: "The cuDNN library does not match what the framework was built against (or a \
               sub-library is missing): install the cuDNN version the framework's wheel expects.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // Any other status of the cuBLAS `cublasStatus_t` / cuDNN `cudnnStatus_t` enums, as
        // PyTorch, TensorFlow and JAX print them.
        name: "cuda_library_status",
        literals: &[
            "CUBLAS_STATUS_",
            "CUDNN_STATUS_",
            // cuSOLVER, cuSPARSE and cuRAND statuses (`cusolverStatus_t`, `cusparseStatus_t`,
            // `curandStatus_t`), and PyTorch's cuFFT check ("cuFFT error: CUFFT_INTERNAL_ERROR",
            // aten/src/ATen/native/cuda/CuFFTUtils.h). `detect::cuda_catalog` names the family.
            "CUSOLVER_STATUS_",
            "CUSPARSE_STATUS_",
            "CURAND_STATUS_",
            "cuFFT error",
            // PaddlePaddle prints a numbered status: "(External) CUFFT error(5).", "CUBLAS
            // error(13).", "CUSOLVER error(7).", "CUSparse error(3).", "CURAND error(102)."
            // (paddle/phi/core/enforce.h, `build_nvidia_error_msg`); the catalog reads the value.
            "CUFFT error(",
            "CUBLAS error(",
            "CUSOLVER error(",
            "CUSparse error(",
            "CURAND error(",
            // Julia's CUDA.jl: "CUFFTError(code 2, cuFFT failed to allocate GPU or CPU memory)".
            "CUBLASError(code ",
            "CUDNNError(code ",
            "CUSOLVERError(code ",
            "CUSPARSEError(code ",
            "CURANDError(code ",
            "CUFFTError(code ",
            // Wrappers that print cuBLAS's status as a number or as `cublasGetStatusString`'s
            // sentence: llama.cpp's "cuBLAS error 15 at ggml-cuda.cu:7956: the requested
            // functionality is not supported", Theano's "CUBLAS error 'an access to GPU memory
            // space failed' while copying …" (the catalog reads either).
            "cuBLAS error ",
            "CUBLAS error ",
            // Oxford Nanopore's basecaller with the status's value after the location: "[guppy/
            // error] main: CuBLAS error at …/nn_caller_cuda.cpp:1138: 1".
            "CuBLAS error ",
            // Transformer Engine's `NVTE_CHECK_CUBLAS` ("cuBLAS Error: " and the status's
            // sentence) and CUDA Library Samples' "cuBLAS API failed with status 7".
            "cuBLAS Error: ",
            "cuBLAS API failed with status",
            // The same samples' `CHECK_CUSPARSE`: "CUSPARSE API failed at line 130 with error:
            // internal error (7)" (`cusparseGetErrorString`'s words, then the value).
            "CUSPARSE API failed at line",
            // TensorRT's wrapper names its function before the value: "cuBLAS Error in
            // CublasWrapper: 3 (Could not initialize cublas. …)".
            "cuBLAS Error in ",
            // The same wrappers in the other spellings of the library's name: Transformer
            // Engine's older `NVTE_CHECK_CUBLAS` ("CUBLAS Error: the requested functionality is
            // not supported", transformer_engine/common/include/transformer_engine/logging.h),
            // and a colon straight after the word ("CUBLAS error: …").
            "CUBLAS Error: ",
            "CUBLAS error: ",
            "cuBLAS error: ",
            // Lua Torch and PyTorch before 1.1 (THC's `THCublasCheck` / `THCusparseCheck`,
            // lib/THC/THCGeneral.c): "RuntimeError: cublas runtime error : the GPU program
            // failed to execute at /pytorch/aten/src/THC/THCBlas.cu:249".
            "cublas runtime error",
            "cusparse runtime error",
            // PyTorch's cuDNN v8/v9 frontend path: "cuDNN Frontend error: [cudnn_frontend]
            // Error: No execution plans support the graph." (aten/src/ATen/native/cudnn).
            "cuDNN Frontend error",
            // JAX's checks, the failed call and then JAX's words for the status
            // ("…/solver_kernels.cc:45: operation gpusolverDnCreate(&handle) failed: cuSolver
            // internal error"), and older jaxlib's exceptions that carry the words alone
            // ("RuntimeError: cuSolver internal error"); `cuda_catalog`'s JAX table names the
            // status.
            "failed: cuSolver ",
            "failed: cuBlas ",
            "failed: cuFFT ",
            "cuSolver internal error",
            "cuSolver execution failed",
            "cuSolver allocation failed",
            "cuBlas internal error",
            "cuBlas execution failed",
            "cuBlas allocation failure",
            "cuFFT internal error",
            "cuFFT execution failed",
            "cuFFT allocation failed",
        ],
        kind: Kind::CudaError,
        category: "unknown",
        blame: Blame::Unknown,
        hint: "A CUDA math library call (cuBLAS, cuDNN, cuSOLVER, cuSPARSE, cuRAND, cuFFT) \
               failed: replay the step with CUDA_LAUNCH_BLOCKING=1 and check the inputs' shapes \
               and dtypes and the GPU's memory.",
        priority: GENERIC,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    gpu_oom(
        "cuda_oom",
        &[
            "CUDA out of memory",
            // A title's capitals ("[Bug]CUDA OUT OF MEMORY").
            "CUDA OUT OF MEMORY",
            "OutOfMemoryError",
            "CUDA error: out of memory",
            "CUDA_ERROR_OUT_OF_MEMORY",
            "cudaErrorMemoryAllocation",
            // CNMeM, the memory pool of Triton's early releases, Theano and Caffe: its status
            // when the pool cannot grow (NVIDIA/cnmem, include/cnmem.h, `cnmemStatus_t`).
            "CNMEM_STATUS_OUT_OF_MEMORY",
            // TensorFlow: `ResourceExhaustedError` with "OOM when allocating tensor with shape[…]"
            // (tensorflow/core/common_runtime/bfc_allocator.cc, op_kernel.cc) and the BFC
            // allocator's "Allocator (GPU_0_bfc) ran out of memory trying to allocate".
            "ResourceExhaustedError",
            "OOM when allocating tensor",
            "ran out of memory trying to allocate",
            // The same sentence at the start of the line, as TensorFlow 0.x–1.x printed it: "Ran
            // out of memory trying to allocate 220.5KiB.  See logs for memory state."
            "Ran out of memory trying to allocate",
            // Theano's CUDA backend: "Error allocating 26214400 bytes of device memory (out of
            // memory). Driver report … bytes free and … bytes total" (theano/sandbox/cuda/
            // cuda_ndarray.cu, `device_malloc`; the parenthesis is `cudaGetErrorString`).
            "bytes of device memory (out of memory)",
            // PaddlePaddle's allocator exception when its pool cannot grow:
            // `paddle::memory::allocation::BadAlloc` (paddle/fluid/memory/allocation/
            // allocator.h), whose what() is the "Out of memory error on GPU" sentence below.
            "memory::allocation::BadAlloc",
            // JAX/XLA: "RESOURCE_EXHAUSTED: Out of memory while trying to allocate N bytes."
            // (xla/stream_executor and tsl BFC allocator, surfaced as XlaRuntimeError).
            "Out of memory while trying to allocate",
            // Blender Cycles' CUDA device: "Out of memory in cuStreamCreate(&cuda_stream_, …)
            // (…/intern/cycles/device/cuda/queue.cpp:21)" (`cuda_device_assert`, the driver
            // result's name from cuewErrorString, then the call).
            "Out of memory in cu",
            // XLA's device allocator: "Failed to allocate request for 1.00GiB (1073741824B) on
            // device ordinal 0" (xla/stream_executor/integrations/device_mem_allocator et al.);
            // XLA's host buffers, CuPy and others: "Out of memory allocating N bytes".
            "B) on device ordinal",
            "Out of memory allocating",
            // NVIDIA Warp's allocator: "RuntimeError: Memory allocation failed on device: cuda
            // for 120 bytes" (warp/context.py, `Device.allocator`'s callers raise it when the
            // CUDA allocation returns null).
            "allocation failed on device: cuda",
            // The body of PyTorch's caching-allocator message, which survives when the
            // `OutOfMemoryError` head was cut from a paste: "Tried to allocate 2.00 GiB (GPU 0;
            // 15.78 GiB total capacity; …)" and, since 2.1, "Tried to allocate 20.00 MiB. GPU 0 has
            // a total capacity of 79.15 GiB of which …" (c10/cuda/CUDACachingAllocator.cpp).
            "total capacity;",
            "has a total capacity of",
            // vLLM: "No available memory for the cache blocks. Try increasing
            // `gpu_memory_utilization`" (vllm/worker/worker.py, v1/core/kv_cache_utils.py).
            "No available memory for the cache blocks",
            // SGLang: "Not enough memory. Please try to increase --mem-fraction-static."
            // (sglang/srt/model_executor/model_runner.py).
            "Please try to increase --mem-fraction-static",
            // PaddlePaddle's allocator: "Out of memory error on GPU 0. Cannot allocate 1.5GB memory
            // on GPU 0, available memory is only 416.6MB." (paddle/fluid/memory/allocation).
            "Out of memory error on GPU",
            // Lua Torch / cutorch: "THCudaCheck FAIL file=… line=… error=2 : out of memory" and
            // "cuda runtime error (2) : out of memory" (lib/THC/THCGeneral.c).
            "error=2 : out of memory",
            "error (2) : out of memory",
            // Julia's CUDA.jl: `OutOfGPUMemoryError`, shown as "Out of GPU memory" and, when
            // the request's size is known, " trying to allocate 1.000 GiB", followed by the
            // pool's usage (src/pool.jl `Base.showerror`). The bare form only as Julia prints an
            // uncaught error (`ERROR: …`, `LoadError: …`): a README's "### Out of GPU memory"
            // heading is no event.
            "Out of GPU memory trying to allocate",
            "ERROR: Out of GPU memory",
            // Faiss's GPU allocations before its StandardGpuResources memory manager: "Faiss
            // assertion 'cudaMalloc(p, size) == cudaSuccess' failed in void
            // faiss::gpu::allocMemorySpace(…) at utils/MemorySpace.cpp:20; details: Failed to
            // cudaMalloc 16000000000 bytes" (faiss/gpu/utils/MemorySpace.cpp, the one assertion
            // of its allocator).
            "failed in void faiss::gpu::allocMemorySpace",
            // Thrust's temporary storage for an algorithm (cub's scratch space), allocated on the
            // GPU: "MemoryError: std::bad_alloc: temporary_buffer::allocate:
            // get_temporary_buffer failed" (thrust/detail/temporary_buffer.h), as RAPIDS shows it.
            "temporary_buffer::allocate: get_temporary_buffer failed",
            // Thrust's device allocations (`thrust::device_vector`, XGBoost's and cuML's
            // buffers): `thrust::system::detail::bad_alloc`, whose what() is "std::bad_alloc: "
            // and the CUDA error's text, "std::bad_alloc: out of memory" (later
            // "std::bad_alloc: cudaErrorMemoryAllocation: out of memory";
            // thrust/system/detail/bad_alloc.h). The host's own std::bad_alloc says just
            // "std::bad_alloc".
            "bad_alloc: out of memory",
            "bad_alloc: cudaErrorMemoryAllocation",
            // RMM's `rmm::bad_alloc` from a device memory resource, before RMM told out-of-memory
            // apart: "MemoryError: std::bad_alloc: CUDA error at: …/rmm/mr/device/
            // cuda_memory_resource.hpp:70: cudaErrorMemoryAllocation out of memory"
            // (`RMM_CUDA_TRY(cudaMalloc(…), rmm::bad_alloc)`); a title cuts it after the place.
            "bad_alloc: CUDA error at:",
            "LoadError: Out of GPU memory",
            "OutOfGPUMemoryError",
            // ggml / llama.cpp: "alloc_tensor_range: failed to allocate CUDA0 buffer of size N",
            // "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer", "unable to allocate CUDA0
            // buffer" (ggml-alloc.c, llama-model.cpp; the buffer type is named after the device).
            "failed to allocate CUDA",
            "unable to allocate CUDA",
            // TensorRT, after its allocator's warning "Requested amount of GPU memory (N bytes)
            // could not be allocated": "Error Code 2: OutOfMemory (no further information)".
            "Error Code 2: OutOfMemory",
            // TensorRT 7's "../rtSafe/WeightsPtr.cpp (92) - OutOfMemory Error in allocate: 0".
            // (Its allocator's "Requested amount of GPU memory (N bytes) could not be allocated"
            // before it is left out: the builder logs the same text as a warning while it skips
            // tactics that do not fit, and keying on it widened the gate's `ut of ` anchor to a
            // `t of ` that ordinary English hits, about 8 % of scan time.)
            "OutOfMemory Error in",
            // ONNX Runtime's BFC arena (onnxruntime/core/framework/bfc_arena.cc,
            // `BFCArena::AllocateRawInternal`): "Failed to allocate memory for requested buffer of
            // size N", behind "Non-zero status code returned while running <Op> node".
            "Failed to allocate memory for requested buffer of size",
            // The same message after the function's name, which a title cut short keeps:
            // "…bfc_arena.cc:342 onnxruntime::BFCArena::AllocateRawInternal Failed to allocate m".
            "BFCArena::AllocateRawInternal Failed to allocate",
            // ROCm builds: HIP's `hipErrorOutOfMemory` name (hip_runtime_api.h). PyTorch's
            // hipified "HIP error: out of memory" is the runtime-text row's.
            "hipErrorOutOfMemory",
            // MATLAB's Parallel Computing Toolbox (MatConvNet and other GPU code in MATLAB): "Out
            // of memory on device. To view more detail about available memory on the GPU, use
            // 'gpuDevice()'. If the problem persists, reset the GPU by calling 'gpuDevice(1)'."
            "Out of memory on device",
            // Darknet (src/cuda.c, `cuda_make_array`): "Cuda malloc failed" when cudaMalloc
            // returned no buffer.
            "Cuda malloc failed",
            // vLLM's start-up check (vllm/v1/worker/gpu_worker.py, `init_device`): "ValueError:
            // Free memory on device (3.22/4.0 GiB) on startup is less than desired GPU memory
            // utilization (0.9, 3.6 GiB). Decrease GPU memory utilization or reduce GPU memory
            // used by other processes."
            "on startup is less than desired GPU memory utilization",
            // PyTorch's caching allocator with expandable segments, when the driver cannot map
            // more physical memory into a segment: "expandable_segments: memory mapping failed
            // with OOM on device 0 while trying to map 20971520 bytes (free: …, total: …)"
            // (c10/cuda/CUDACachingAllocator.cpp; the `OutOfMemoryError` follows when nothing
            // can be freed).
            "memory mapping failed with OOM",
            // The RAPIDS Accelerator for Apache Spark, since 23.04: the GPU allocation that
            // failed is thrown as `com.nvidia.spark.rapids.jni.RetryOOM`, `SplitAndRetryOOM`
            // and, later, `GpuRetryOOM` / `GpuSplitAndRetryOOM` ("GPU OutOfMemory: could not split
            // inputs and retry"); the task retries, then fails (spark-rapids-jni, RmmSpark). Its
            // `CpuRetryOOM` is host memory and is left out.
            ".jni.RetryOOM",
            ".jni.SplitAndRetryOOM",
            "GpuRetryOOM",
            "GpuSplitAndRetryOOM",
            // PaddlePaddle 1.x's enforce on a failed CUDA allocation: "PaddleCheckError: out
            // of memory at [/paddle/paddle/fluid/platform/device_context.cc:219]" (the
            // runtime's `cudaGetErrorString` after the enforce's class).
            "PaddleCheckError: out of memory",
        ],
    ),
    HeadlineRule {
        // vLLM's check that one sequence of the configured length fits the KV cache left after
        // the weights and activations: "ValueError: To serve at least one request with the
        // model's max seq len (40960), (10.00 GiB KV cache is needed, which is larger than the
        // available KV cache memory (1.25 GiB). …" (vllm/v1/core/kv_cache_utils.py,
        // `check_enough_kv_cache_memory`; some releases spell it "models's") and the v0 engine's
        // "ValueError: The model's max seq len (32768) is larger than the maximum number of
        // tokens that can be stored in KV cache (18000). …" (vllm/worker/worker.py,
        // `raise_if_cache_size_invalid`). Keyed on the exception's head, which every paste
        // keeps while hard wraps split the rest anywhere.
        name: "vllm_kv_cache_too_small",
        literals: &["ValueError: To serve at least one request with the model"],
        kind: Kind::Oom,
        category: "cuda_oom",
        blame: Blame::Application,
        hint: VLLM_KV_CACHE_HINT,
        priority: MID,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // The v0 engine's wording (above); its head is any length check's, so the line must
        // name the KV cache.
        name: "vllm_kv_cache_too_small_v0",
        literals: &["ValueError: The model's max seq len ("],
        kind: Kind::Oom,
        category: "cuda_oom",
        blame: Blame::Application,
        hint: VLLM_KV_CACHE_HINT,
        priority: MID,
        requires_any: &["KV cache"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // XLA (JAX, TensorFlow on XLA) reports an exhausted device memory as an absl status
        // whose code it prints as `RESOURCE_EXHAUSTED:`, with the allocator's or compiler's
        // sentence after it. On TPUs: "Error allocating device buffer: Attempting to allocate
        // 15.65G. That was not possible. There are 11.08G free." (PJRT) and "XLA:TPU compile
        // permanent error. Ran out of memory in memory space hbm." (the compiler, also `vmem`).
        // The allocation's words are anyone's, so the line must carry the status code or PJRT's
        // whole sentence with the free memory; the GPU allocator's own sentence has a row above
        // ("Out of memory while trying to allocate").
        name: "xla_resource_exhausted",
        literals: &[
            "Attempting to allocate",
            "Ran out of memory in memory space",
        ],
        kind: Kind::Oom,
        category: "cuda_oom",
        blame: Blame::Application,
        hint: OOM_HINT,
        priority: MID,
        requires_any: &["RESOURCE_EXHAUSTED:", "That was not possible. There are"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // MXNet's GPU memory pool: "src/storage/./pooled_storage_manager.h:62: Memory allocation
        // failed." (`GPUPooledStorageManager::Alloc` after cudaMalloc failed, MXNet 0.x–1.x). The
        // words alone are any allocator's, so the storage manager's file must be on the line.
        name: "mxnet_storage_oom",
        literals: &["Memory allocation failed"],
        kind: Kind::Oom,
        category: "cuda_oom",
        blame: Blame::Application,
        hint: OOM_HINT,
        priority: MID,
        requires_any: &["storage_manager"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // TensorFlow's stream executor when the device allocation itself fails: "failed to
        // allocate 890.06M (933298432 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of
        // memory" (stream_executor/cuda/cuda_driver.cc; the ROCm build's rocm_driver.cc prints
        // `HIP_ERROR_OutOfMemory` or a bare `hipError_t(N)` there). The words "failed to
        // allocate" alone are any allocator's, so the device clause must follow.
        name: "tf_device_alloc_failed",
        literals: &["failed to allocate"],
        kind: Kind::Oom,
        category: "cuda_oom",
        blame: Blame::Application,
        hint: OOM_HINT,
        priority: MID,
        requires_any: &[" from device: "],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // CuPy before v5 (cupy/cuda/memory.pyx `OutOfMemoryError`): "out of memory to allocate
        // N bytes (total M bytes)"; Chainer prints it as "Exception in main training loop: out
        // of memory to allocate …". The words alone are any allocator's, so CuPy's tail counts.
        name: "cupy_oom",
        literals: &["out of memory to allocate"],
        kind: Kind::Oom,
        category: "cuda_oom",
        blame: Blame::Application,
        hint: OOM_HINT,
        priority: MID,
        requires_any: &[" bytes (total "],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // TVM's runtime allocators (MLC-LLM, TVM Unity on CUDA): "TVMError: Check failed:
        // (result) is false: Failed to allocate 99121664 bytes with alignment 16 bytes"
        // (src/runtime/memory/pooled_allocator.h and the device API's `AllocDataSpace`). The
        // words "Failed to allocate" alone are any allocator's, so the alignment clause must
        // follow.
        name: "tvm_alloc_failed",
        literals: &["Failed to allocate"],
        kind: Kind::Oom,
        category: "cuda_oom",
        blame: Blame::Application,
        hint: OOM_HINT,
        priority: MID,
        requires_any: &[" bytes with alignment "],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // Hugging Face text-generation-inference's warm-up, which runs the largest prefill
        // batch before serving: "RuntimeError: Not enough memory to handle 4096 prefill tokens.
        // You need to decrease `--max-batch-prefill-tokens`" (server/text_generation_server/
        // models/flash_causal_lm.py, `warmup`), raised from the CUDA OOM it caught.
        name: "tgi_warmup_oom",
        literals: &["rror: Not enough memory to handle"],
        kind: Kind::Oom,
        category: "cuda_oom",
        blame: Blame::Application,
        hint: "text-generation-inference could not fit its largest prefill batch in GPU memory \
               during warm-up: lower --max-batch-prefill-tokens (and --max-total-tokens), \
               quantise the model or shard it over more GPUs.",
        priority: MID,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // A device memory allocator's own failure, named with its size: PhysX's GPU allocator
        // under Isaac Gym and Omniverse ("PxgCudaDeviceMemoryAllocator fail to allocate memory
        // 2147483648 bytes!! Result = 2", where 2 is `cudaErrorMemoryAllocation`), and other
        // allocators' "failed to allocate memory … bytes" on a device. The words alone are any
        // allocator's, so the line must name CUDA, a GPU or device memory.
        name: "device_allocator_failed",
        literals: &["fail to allocate memory", "failed to allocate memory"],
        kind: Kind::Oom,
        category: "cuda_oom",
        blame: Blame::Application,
        hint: OOM_HINT,
        priority: MID,
        requires_any: &["Cuda", "CUDA", "GPU", "DeviceMemory", "device memory"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // Writers hyphenate the words as an adjective ("I'm getting a CUDA out-of-memory error")
        // or turn them round ("I get a \"RuntimeError: Out of CUDA memory\" error"); no program
        // prints them so, and guides and docstrings write them as often ("PyTorch then throws
        // the dreaded CUDA out-of-memory error"), so only a report in the first person counts
        // (`guards::first_person_report`).
        guard: Some(guards::first_person_report),
        ..gpu_oom(
            "cuda_oom_reported",
            &["CUDA out-of-memory", "Out of CUDA memory"],
        )
    },
    HeadlineRule {
        // The writer's run running out of GPU memory ("We ran out of GPU memory at batch size
        // 64", "I keep running out of CUDA memory"): a report only with the writer as the
        // subject, in the past or the progressive; the present is what code or a guide says
        // happens ("when we run out of GPU memory, the batch is split"), see
        // `guards::ran_out_in_first_person`. CUDA.jl's "Out of GPU memory trying to allocate"
        // is its own row.
        guard: Some(guards::ran_out_in_first_person),
        ..gpu_oom(
            "cuda_oom_ran_out",
            &[
                "ran out of GPU memory",
                "run out of GPU memory",
                "running out of GPU memory",
                "ran out of gpu memory",
                "running out of gpu memory",
                "ran out of CUDA memory",
                "running out of CUDA memory",
            ],
        )
    },
    HeadlineRule {
        // The CUDA runtime's own text for `cudaErrorMemoryAllocation` ("out of memory", from
        // `cudaGetErrorString`) as the common checking idioms print it after the failing call:
        // "<api> failed: %s" (cudaMalloc and friends, e.g. llama.cpp's ggml backend), glog's
        // "Check failed: error == cudaSuccess (2 vs. 0)  %s" (Caffe's CUDA_CHECK), "CUDA error
        // %d at %s:%d: %s" (CUDA_CHECK macros). The phrase alone is everyday English and the
        // kernel's OOM killer's, so the line must also name CUDA or the GPU.
        name: "cuda_oom_runtime_text",
        // Capitalised where a wrapper or a title starts its message with it ("CUDA Error: Out of
        // memory", "CUDA - Out of memory, acoustic model training");
        // mid-sentence ("what to do with CUDA Out of memory errors") it is someone's prose.
        literals: &["out of memory", ": Out of memory", "- Out of memory"],
        kind: Kind::Oom,
        category: "cuda_oom",
        blame: Blame::Application,
        hint: OOM_HINT,
        priority: MID,
        requires_any: &["cuda", "CUDA", "Cuda", "cuMem", "GPU", "HIP error"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // PyTorch's allocators when an allocation would pass the process's limit (the memory
        // fraction of `torch.cuda.set_per_process_memory_fraction`, or the `cudaMallocAsync`
        // backend's pool): "torch.OutOfMemoryError: Allocation on device 0 would exceed allowed
        // memory. (out of memory)" (c10/cuda/CUDACachingAllocator.cpp and
        // CUDAMallocAsyncAllocator.cpp, `TORCH_CHECK_WITH(OutOfMemoryError, false, "Allocation on
        // device ", device, " would exceed allowed memory. …")`). Releases that stream the device
        // as its 8-bit `DeviceIndex` write device 0 as a NUL byte, which ends the C string: the
        // message then reads "Allocation on device " and nothing more, as ComfyUI's error report
        // and log show it ("!!! Exception during processing !!! Allocation on device "). So the
        // words must end the line or go on with the limit (`guards::allocation_limit_tail`):
        // "Allocation on device 0 launch on device 1" is another program's log.
        guard: Some(guards::allocation_limit_tail),
        ..gpu_oom("torch_allocation_limit", &["Allocation on device"])
    },
    HeadlineRule {
        // Baidu's warp-ctc, the GPU CTC loss of DeepSpeech-era speech toolkits (deepspeech.pytorch,
        // ESPnet, wav2letter, PaddleSpeech and TensorFlow's contrib copy): its bindings throw the
        // call's name and `ctcGetStatusString` ("Error: compute_ctc_loss in gpu_ctc, stat =
        // execution failed", "Error: compute_ctc_loss, stat = cuda memcpy or memset failed";
        // include/ctc.h, `throw_on_error`). The loss kernel or its copies failed on the GPU.
        name: "warp_ctc_failed",
        literals: &[
            "Error: compute_ctc_loss",
            "Error: get_workspace_size in gpu_ctc",
        ],
        kind: Kind::CudaError,
        category: "ctc_loss_failed",
        blame: Blame::Unknown,
        hint: "warp-ctc's GPU loss failed: check that label lengths fit the input lengths and \
               that the labels avoid the blank index, and replay the step with \
               CUDA_LAUNCH_BLOCKING=1; an earlier asynchronous CUDA error can surface here too.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // PaddlePaddle's launcher (`python -m paddle.distributed.launch`) when a worker exits
        // non-zero: "LAUNCH ERROR 2023-08-17 16:45:31,525 Container failed !!!" and the next
        // line's "Container rank 0 status failed cmd […] code 1 log log/workerlog.0"
        // (python/paddle/distributed/launch/controllers/controller.py, `watch`), its
        // counterpart of torchrun's ChildFailedError: the worker's log holds the cause.
        name: "paddle_launch_container_failed",
        literals: &["Container failed !!!"],
        kind: Kind::NcclError,
        category: "paddle_launch_container_failed",
        blame: Blame::Unknown,
        hint: "A PaddlePaddle worker exited with an error and the launcher stopped the job: read \
               the failed rank's worker log (log/workerlog.N) for the first error.",
        priority: MID,
        requires_any: &["LAUNCH"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // Julia's CUDA.jl (`CuError`'s display: "CUDA error: out of memory (code 2,
        // ERROR_OUT_OF_MEMORY)") and other bindings that print the driver's `CUresult` name
        // without its `CUDA_` prefix (cuda.h: `CUDA_ERROR_OUT_OF_MEMORY = 2`). Only the bare
        // name: the prefixed one is `cuda_oom`'s, and its definitions stay quiet there.
        guard: Some(bare_result_name_oom),
        ..gpu_oom("cuda_result_name_oom", &["ERROR_OUT_OF_MEMORY"])
    },
    HeadlineRule {
        // PyTorch's host allocator when the node's RAM (or the job's memory limit) is exhausted:
        // "RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: can't
        // allocate memory: you tried to allocate 52428800 bytes. Error code 12 (Cannot allocate
        // memory)"; the Windows build says "not enough memory" (c10/core/impl/alloc_cpu.cpp,
        // `alloc_cpu`). Host memory, not the GPU's, but it ends the job on the GPU node all the
        // same, and the fix is the job's.
        name: "torch_host_allocator_exhausted",
        literals: &[
            "DefaultCPUAllocator: can't allocate memory",
            "DefaultCPUAllocator: not enough memory",
        ],
        kind: Kind::Oom,
        category: "host_oom",
        blame: Blame::Application,
        hint: HOST_OOM_HINT,
        priority: MID,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // TensorFlow's allocation failure on the host: "OOM when allocating tensor with
        // shape[1,416,416,3] and type float on /job:localhost/replica:0/task:0/device:CPU:0 by
        // allocator cpu" (tensorflow/core/framework/op_kernel.cc, the allocator named last: its
        // GPU's is `GPU_0_bfc`). The same words as the GPU's OOM, but host RAM ran out; it ranks
        // above the `cuda_oom` row that the words also open.
        name: "tf_host_allocator_exhausted",
        literals: &["by allocator cpu"],
        kind: Kind::Oom,
        category: "host_oom",
        blame: Blame::Application,
        hint: "TensorFlow ran out of host RAM (the CPU allocator), not GPU memory: check the \
               node's free memory and the job's memory limit (cgroup, Slurm --mem, the pod's \
               limit), and what the input pipeline holds in memory (shuffle and prefetch \
               buffers, a dataset cached whole).",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // RAPIDS Memory Manager's pool and arena resources when they may not grow (cuDF, cuML,
        // cuGraph, XGBoost and Dask-CUDA allocate through it): "std::bad_alloc: RMM failure
        // at:…/pool_memory_resource.hpp:182: Maximum pool size exceeded" (rmm/mr/device/
        // pool_memory_resource.hpp and arena.hpp, `RMM_FAIL("Maximum pool size exceeded",
        // rmm::out_of_memory)`), raised in Python as `MemoryError`. The words are any pool's
        // (a database driver's, a game's), so they count after RMM's own "RMM failure at:".
        name: "rmm_pool_exhausted",
        literals: &["RMM failure at:"],
        kind: Kind::Oom,
        category: "cuda_oom",
        blame: Blame::Application,
        hint: "The RMM memory pool reached its maximum size: raise the pool's limit \
               (rmm.reinitialize(maximum_pool_size=…), dask-cuda's --rmm-pool-size), spill to host \
               memory, or process the data in smaller partitions.",
        priority: MID,
        requires_any: &["Maximum pool size exceeded"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // `cudaErrorCudartUnloading` ("driver shutting down", code 4; 29 in CUDA 8 and older) and
        // the driver API's `CUDA_ERROR_DEINITIALIZED`: a CUDA call made while the process was
        // exiting, after the runtime had been unloaded (cudaGetErrorString, CUDA runtime API
        // reference). It is a consequence: an earlier error usually ended the process.
        name: "cuda_driver_shutting_down",
        literals: &["cudaErrorCudartUnloading", "CUDA_ERROR_DEINITIALIZED"],
        kind: Kind::CudaError,
        category: "driver_shutting_down",
        blame: Blame::Application,
        hint: "A CUDA call ran while the process was exiting (the CUDA runtime was already \
               unloaded): look for the error that ended the process before it, or a CUDA call \
               in a destructor or exit handler.",
        priority: MID,
        requires_any: &[],
        // The runtime's message after a generic prefix ("CUDA error: …", "cuda runtime error
        // (29) : …", "… == cudaSuccess (29 vs. 0)  …").
        refines: &["driver shutting down"],
        guard: None,
    },
    HeadlineRule {
        // CUTLASS's statuses as `cutlassGetStatusString` prints them (include/cutlass/cutlass.h):
        // TensorRT-LLM's "Failed to run cutlass fpA_intB gemm. Error: Error Internal",
        // xformers' and flash-attention's "Got cutlass error: Error Internal at: 71".
        // `cuda_catalog` names the status's family; the words count only where the line names
        // CUTLASS.
        name: "cutlass_status",
        literals: &CUTLASS_STATUS_TEXTS,
        kind: Kind::CudaError,
        category: "unknown",
        blame: Blame::Unknown,
        hint: "A CUTLASS kernel (a GEMM or attention kernel inside TensorRT-LLM, xformers, \
               flash-attention or a quantised-kernel library) returned an error status: check \
               that the kernel supports this GPU architecture, dtype and problem shape; an \
               internal error often follows an earlier CUDA error, so replay the step with \
               CUDA_LAUNCH_BLOCKING=1.",
        priority: GENERIC,
        requires_any: &CUTLASS_NAMES,
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // Julia's CUDAdrv.jl (CUDA.jl's predecessor) shows the driver API's `CUresult` as a
        // number: "ERROR: LoadError: CUDAdrv.CuError(701, nothing)" (src/error.jl, `CuError`'s
        // fields: the code, then an optional message); `cuda_catalog` names it. A number must
        // follow (`no method matching CuError(::String)` is Julia's dispatch error).
        name: "cudadrv_cuerror",
        literals: &["CuError("],
        kind: Kind::CudaError,
        category: "unknown",
        blame: Blame::Unknown,
        hint: "A CUDA call failed in Julia's CUDAdrv.jl: the code names the error; check the \
               kernel log for Xids on the same GPU.",
        priority: GENERIC,
        requires_any: &[
            "CuError(1",
            "CuError(2",
            "CuError(3",
            "CuError(4",
            "CuError(5",
            "CuError(6",
            "CuError(7",
            "CuError(8",
            "CuError(9",
        ],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // Caffe2's `CUDA_ENFORCE` / `CUDA_CHECK` (caffe2/core/common_gpu.h): "Error at:
        // <file>:<line>: <cudaGetErrorString>", e.g. "Error at: caffe2/core/context_gpu.cu:343:
        // out of memory". The runtime's message after it names the family (`cuda_catalog`); the
        // location must be a CUDA source, since "Error at:" heads other tools' messages too, and
        // a line the catalog cannot name reports nothing (`mod.rs`, `REFINED_ONLY`).
        name: "caffe2_cuda_enforce",
        literals: &["Error at: "],
        kind: Kind::CudaError,
        category: "unknown",
        blame: Blame::Unknown,
        hint: "A CUDA call failed inside Caffe2: the message after the location names the error; \
               replay the step with CUDA_LAUNCH_BLOCKING=1 and check the kernel log for Xids on \
               the same GPU.",
        priority: GENERIC,
        requires_any: &[".cu:", ".cuh:"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // "CUDA error" is also the subject of sentences about one (`guards::error_printed`).
        guard: Some(guards::error_printed),
        ..generic_cuda(
            "cuda_error_generic",
            &[
                "CUDA error: ",
                "cuda runtime error (",
                // With a Chinese input method's full-width parenthesis ("cuda runtime error（209）").
                "cuda runtime error\u{ff08}",
                // The checking macros of NVIDIA's inference libraries and their forks:
                // TensorRT-LLM's "[TensorRT-LLM][ERROR] CUDA runtime error in cudaMemcpyAsync(…):
                // invalid argument (…/cudaUtils.h:NN)", FasterTransformer's and TurboMind's "[FT][ERROR]
                // CUDA runtime error: invalid argument /…/cuda_utils.h:NN" (`check_cuda_error`); the
                // runtime's message after the call names the family.
                "CUDA runtime error",
                // PyTorch's check of a driver API call (`C10_CUDA_DRIVER_CHECK`, ATen/cuda/
                // Exceptions.h): "CUDA driver error: invalid argument", `cuGetErrorString`'s text.
                "CUDA driver error: ",
                "CUDA error ",
                "CUDA Error: ",
                // A title-case head before the number ("CUDA Error 700: Illegal Memory Access").
                "CUDA Error ",
                // The same head in lower case, as titles and wrappers write it ("Gym cuda error:
                // invalid resource handle"), and PaddlePaddle's "ExternalError: Cuda error(700), an
                // illegal memory access was encountered." (its enforce of a `cudaError_t`).
                "cuda error: ",
                "Cuda error(",
                // The driver API's `CUresult` names as XLA, cupy and TensorFlow print them.
                "CUDA_ERROR_",
                // The runtime API's `cudaError_t` names, e.g. a C++ `terminate` block's
                // "what():  …: cudaErrorLaunchFailure: unspecified launch failure" (thrust).
                "cudaError",
                // cutorch/THC: "THCudaCheck FAIL file=%s line=%i error=%i : %s" (lib/THC/THCGeneral.c).
                "THCudaCheck FAIL",
                // The "Cuda failure" of CUDA checking macros outside NCCL (cutlass and
                // FasterTransformer-style `check_cuda_error`, many samples): "Cuda failure: misaligned
                // address"; with NCCL on the line the NCCL row above wins. ONNX Runtime's CUDA
                // execution provider: "CUDA failure 700: an illegal memory access was encountered ;
                // GPU=0 ; hostname=… ; expr=…" (onnxruntime/core/providers/cuda/cuda_call.cc,
                // `CudaCall`, "%s failure %d: %s ; GPU=%d …" with the library's name first).
                "Cuda failure",
                "CUDA failure ",
                // glog's CHECK of a runtime call (Caffe's CUDA_CHECK): "Check failed: error ==
                // cudaSuccess (N vs. 0)  <message>", whatever the error.
                "error == cudaSuccess (",
                // cuda-gdb's exception codes (`CUDA_EXCEPTION_6, Warp Misaligned Address.`); those
                // with a family are refined by their rows, the rest (stack overflows, invalid PC or
                // address space, CUDA_EXCEPTION_0 "Device Unknown Exception") stay generic.
                "CUDA_EXCEPTION_",
                // Frameworks' own sentences for CUDA errors (`cuda_catalog::FRAMEWORK_WORDINGS`).
                "No CUDA GPUs are available",
                "CUDA driver initialization failed",
                "CUDA unknown error - this may be due to",
                "rror: CUDA unknown error",
                // ManagedCuda, the .NET binding of the driver API: "ManagedCuda.CudaException:
                // ErrorOutOfMemory: <the reference's description>" (its `CUResult` names are the
                // driver API's in CamelCase; `cuda_catalog` derives them).
                "CudaException: Error",
                // Numba's driver binding: "CudaAPIError: [716] Call to cuMemcpyDtoH results in
                // UNKNOWN_CUDA_ERROR" (numba/cuda/cudadrv/driver.py, `_check_error`): the code is
                // the driver API's `CUresult`, which `cuda_catalog` reads when no name is known.
                "CudaAPIError: [",
                // DeepSpeed's cuBLAS wrappers (csrc/includes/cublas_wrappers.h, cublas_gemm_ex and
                // friends): "!!!! kernel execution error. (m: 1280, n: 3075, k: 5120, error: 13)",
                // the value a `cublasStatus_t` (`cuda_catalog` names it).
                "kernel execution error. (",
                // Wrappers that print the runtime's message in capitals ("[CUDA ERROR]: Too many
                // resources requested for launch"); `cuda_catalog` reads the message in any case.
                "CUDA ERROR",
                // ROCm: HIP's `hipError…` names mirror the runtime's `cudaError…` ones, and
                // PyTorch's hipified checks print "HIP error: <hipGetErrorString>" (with "HIP kernel
                // errors might be asynchronously reported …"); `cuda_catalog` refines both, as it
                // does CUDA's ("the operation cannot be performed in the present state" is HIP's
                // text for hipErrorIllegalState too). Out of memory, illegal access and device
                // asserts have rows of their own.
                "hipError",
                "HIP error: ",
                // Checking macros of the CUDA SDK's era and their copies: "Cuda error: invalid
                // argument in file 'foo.cu' in line 33" (cutil's `CUDA_SAFE_CALL`), "Cuda error in
                // file …"; the message after it names the family.
                "Cuda error: ",
                "Cuda error in ",
                // thrust's exception for a failed CUDA call (thrust/system/system_error.h, with
                // `cuda_category()`): "terminate called after throwing an instance of
                // 'thrust::system::system_error'" with "what():  parallel_for failed: invalid device
                // function" after it, or on one line where a log flattened them.
                "thrust::system::system_error",
            ],
        )
    },
    // A checking macro's "<call> failed with error <cudaGetErrorString>": tiny-cuda-nn's and
    // instant-ngp's `CUDA_CHECK_THROW` ("…/gpu_memory.h:601 cudaDeviceSynchronize() failed
    // with error an illegal memory access was encountered", include/tiny-cuda-nn/common.h).
    // The words are any call's ("Call to ibv_reg_mr failed with error Cannot allocate
    // memory"), so the line counts only where `cuda_catalog` names the error after them, also
    // when a title cut the message short (detect's `REFINED_ONLY`).
    // CTranslate2 (faster-whisper, WhisperX) throws the bare "CUDA failed with error
    // <cudaGetErrorString>" (src/cuda/utils.h, `CUDA_CHECK`), and TensorFlow's device setup
    // "CUDA runtime implicit initialization on GPU:0 failed. Status: <cudaGetErrorString>"
    // (core/common_runtime/gpu/gpu_device.cc). spconv's and cumm's tensorview check prints the
    // file and line, then "cuda execution failed with error 98" with the `cudaError_t` value,
    // and its message only in later releases (tensorview/include/tensorview/cuda_utils.h,
    // `TV_CHECK_CUDA_ERR`).
    generic_cuda(
        "cuda_call_failed_with_error",
        &[
            ") failed with error ",
            "CUDA failed with error ",
            "initialization on GPU:",
            "cuda execution failed with error ",
        ],
    ),
    HeadlineRule {
        // jaxlib's GPU custom calls turn a failed CUDA or library call into a status that names
        // the expression and the library's message: "INTERNAL: CustomCall failed:
        // jaxlib/cuda_prng_kernels.cc:30: operation cudaGetLastError() failed: the provided PTX
        // was compiled with an unsupported toolchain." (jaxlib/gpu/gpu_kernel_helpers.cc,
        // `AsStatus`: "%s:%d: operation %s failed: %s"). Counted only where `cuda_catalog` names
        // the message (detect's `REFINED_ONLY`): the words are any call's.
        name: "jaxlib_operation_failed",
        literals: &[") failed: "],
        kind: Kind::CudaError,
        category: "unknown",
        blame: Blame::Unknown,
        hint: GENERIC_CUDA_HINT,
        priority: GENERIC,
        requires_any: &[": operation "],
        refines: &[],
        guard: None,
    },
    // The CUDA samples' checks, which the GPU Operator's validator and many programs copied:
    // "Failed to allocate device vector A (error code system not yet initialized)!"
    // (Samples/0_Introduction/vectorAdd/vectorAdd.cu, `cudaGetErrorString` in parentheses).
    // HAMi-core, the GPU-sharing layer of Kubernetes clusters, logs a driver call's
    // `CUresult` by number: "[HAMI-core ERROR (pid:7 thread=… allocator.c:115)]:
    // cuMemoryAllocate failed res=2". Both counted only where
    // `cuda_catalog` names the error (detect's `REFINED_ONLY`).
    generic_cuda(
        "cuda_error_code_in_words",
        &["(error code ", " failed res="],
    ),
    // A program's own line that names the failed driver or runtime call and the value it
    // returned: DeepStream's "nvbufsurftransform:cuInit failed : 804", Isaac Gym's
    // "cudaImportExternalMemory failed on rgbImage buffer with error 999", SAPIEN's
    // "SynchronizeStreams cuEventRecord failed with error 700". Counted only where
    // `cuda_catalog` names the value after a `cu…`/`cuda…` call (detect's `REFINED_ONLY`).
    HeadlineRule {
        guard: Some(super::cuda_catalog::names_failed_call_value),
        ..generic_cuda(
            "cuda_call_failed_numbered",
            &[" with error ", " failed : ", "cuInit failed"],
        )
    },
    HeadlineRule {
        // A title's or a sentence's shorthand for an error, its value and words of its message:
        // "CUDA 700 (illegal memory access) in crb/factor_m CSR path on sm_89", `crashes with a
        // CUDA 700 "illegal memory access"`. Only where the words agree with the value's message
        // (`cuda_catalog::code_with_its_words`), which names the family.
        guard: Some(super::cuda_catalog::names_code_with_its_words),
        ..generic_cuda("cuda_code_with_its_words", &["CUDA "])
    },
    HeadlineRule {
        // A checking macro that prints the runtime's message right after an error word:
        // "Error invalid device ordinal at line 393 in file …/pythonInterface.c" (the
        // `CUDA_CHECK_RETURN` of NVIDIA's Nsight template, copied by bitsandbytes and others),
        // "RuntimeError: invalid device ordinal". Only where a whole catalog
        // message follows the word (`cuda_catalog::message_after_error_word`), which names the
        // family.
        guard: Some(super::cuda_catalog::message_after_error_word),
        ..generic_cuda(
            "cuda_message_after_error_word",
            &["Error ", "Error:", "error ", "error:"],
        )
    },
    // PhysX's CUDA context manager, when a module does not load: "PhysX error: Failed to load
    // CUDA module data. Cuda error code 222." (the `CUresult`).
    generic_cuda("cuda_error_code_numbered", &["Cuda error code "]),
    HeadlineRule {
        // HAMi-core refusing an allocation past the container's share of GPU memory:
        // "[HAMI-core ERROR (pid:30 thread=… allocator.c:53)]: Device 0 OOM 3171158016 /
        // 3145728000" (the memory the container would use, then its limit). Its allocator's
        // source file stands in its log prefix.
        name: "hami_vgpu_oom",
        literals: &["allocator.c:"],
        kind: Kind::Oom,
        category: "cuda_oom",
        blame: Blame::Application,
        hint: "The container asked for more GPU memory than its HAMi share allows (the first \
               number is the memory it would use, the second its limit): raise the pod's \
               nvidia.com/gpumem (or gpumem-percentage) request, or lower the batch size; the \
               GPU itself may have memory free.",
        priority: HIGH,
        requires_any: &[" OOM "],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // The NVIDIA container runtime's hook could not give the container its GPUs, so the
        // container never started: "nvidia-container-cli: initialization error: nvml error:
        // driver not loaded: unknown", "… initialization error: load library failed:
        // libnvidia-ml.so.1: cannot open shared object file", "nvidia-container-cli: device
        // error: 1: unknown device" (libnvidia-container, src/cli/common.c and nvc.c), and the
        // later stages of `configure` (src/cli/configure.c): "nvidia-container-cli: detection
        // error: driver error: timed out" (a driver that no longer answers, as on a GPU that
        // fell off the bus), "… mount error: …", "… ldcache error: …".
        name: "nvidia_container_cli_failed",
        literals: &[
            "container-cli: initialization error",
            "container-cli: device error",
            "container-cli: detection error",
            "container-cli: mount error",
            "container-cli: ldcache error",
            // The GPU Operator's toolkit container installs the binary under this name.
            "container-cli.real: initialization error",
            "container-cli.real: device error",
            "container-cli.real: detection error",
            "container-cli.real: mount error",
            "container-cli.real: ldcache error",
        ],
        kind: Kind::CudaError,
        category: "nvidia_container_init_failed",
        blame: Blame::Driver,
        hint: "The NVIDIA container runtime could not set up the GPUs for the container: the \
               node's driver is not loaded or not the one the toolkit expects (nvml error, driver \
               rpc error), libnvidia-ml is missing from the host, or the requested device does \
               not exist (NVIDIA_VISIBLE_DEVICES). Check nvidia-smi on the node and the \
               nvidia-container-toolkit's version; cordon the node until nvidia-smi works.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    NVML_GPU_LOST,
    HeadlineRule {
        // An internal check of PyTorch's CUDA caching allocator: `TORCH_INTERNAL_ASSERT` prints
        // "RuntimeError: NVML_SUCCESS == r INTERNAL ASSERT FAILED at
        // \"/pytorch/c10/cuda/CUDACachingAllocator.cpp\":1015, please report a bug to PyTorch."
        // (c10/util/Exception.h; c10/cuda/CUDACachingAllocator.cpp). `NVML_SUCCESS == r` is the
        // allocator's NVML query failing where NVML cannot see the device (a MIG instance, a
        // container without NVML, a driver and NVML library that disagree); the allocator's
        // other checks are its own invariants.
        name: "torch_cuda_allocator_internal_assert",
        literals: &["CUDACachingAllocator.cpp"],
        kind: Kind::CudaError,
        category: "cuda_allocator_internal_assert",
        blame: Blame::Unknown,
        hint: "An internal check of PyTorch's CUDA caching allocator failed. 'NVML_SUCCESS == r' \
               means the allocator's NVML query failed: check that nvidia-smi works in the \
               job's container (MIG instances and containers without NVML access fail it) and \
               try without PYTORCH_CUDA_ALLOC_CONF options such as expandable_segments. Other \
               conditions are allocator bugs: look above for a first CUDA error, upgrade \
               PyTorch, and report the assertion with the PyTorch version.",
        priority: MID,
        requires_any: &["INTERNAL ASSERT FAILED"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // Any other NVML query that meets a GPU gone from the bus: `NVML_ERROR_GPU_IS_LOST`,
        // whose `nvmlErrorString` is "GPU is lost", as the clients print it after their own words:
        // slurmstepd's "error: NVML: Failed to get usage(15): GPU is lost", the Go bindings'
        // "error creating nvml.Device 5: nvml: GPU is lost" (the Kubernetes device plugin). The
        // line must name NVML: "the GPU is lost" alone is anyone's words. The enum's name
        // (`NVML_ERROR_GPU_IS_LOST`) is the documentation's and the code's, not output.
        name: "nvml_gpu_is_lost",
        literals: &[" GPU is lost"],
        requires_any: &["NVML", "nvml", "Reboot the system to recover"],
        ..NVML_GPU_LOST
    },
    HeadlineRule {
        // The driver and the user-space NVML library disagree, after a driver upgrade without a
        // reboot or a container that brings its own libnvidia-ml: "Failed to initialize NVML:
        // Driver/library version mismatch" (`NVML_ERROR_LIB_RM_VERSION_MISMATCH`, NVML API
        // reference). Every CUDA program on the node fails the same way until it is fixed.
        name: "nvml_driver_library_mismatch",
        literals: &["initialize NVML: Driver/library version mismatch"],
        kind: Kind::CudaError,
        category: "driver_library_mismatch",
        blame: Blame::Driver,
        hint: "The loaded kernel driver and the NVML/CUDA user-space libraries are different \
               versions (a driver upgrade without a reboot, or a container shipping its own \
               libnvidia-ml): reboot the node or reload the nvidia kernel modules, and keep \
               driver libraries out of images.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // NVML could not start at all, so nvidia-smi, DCGM and the Kubernetes device plugin see
        // no GPU: "Failed to initialize NVML: Unknown Error" (a container that lost its
        // /dev/nvidia* device rules after a systemd or cgroup reload), "…: could not load NVML
        // library" (k8s-device-plugin without the nvidia runtime), "…: Driver Not Loaded",
        // "…: Insufficient Permissions", "…: GPU access blocked by the operating system" (WSL 2).
        // The reasons are `nvmlErrorString`'s (NVML API reference); a version mismatch is the row
        // above.
        name: "nvml_init_failed",
        literals: &["Failed to initialize NVML", "failed to initialize NVML"],
        kind: Kind::CudaError,
        category: "nvml_init_failed",
        blame: Blame::Driver,
        hint: "NVML could not be initialised, so this process (or container) sees no GPU: in a \
               container, check that the NVIDIA runtime is the one that started it and that a \
               systemd or cgroup reload did not drop its device access (restart the pod); on \
               the node, check that the nvidia kernel module is loaded and nvidia-smi works.",
        priority: MID,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // A CUDA library that the job loads at its first GPU call is missing or does not load,
        // and the call fails: CTranslate2 (faster-whisper, WhisperX) raises "RuntimeError:
        // Library libcublas.so.12 is not found or cannot be loaded" / "… cublas64_11.dll …"
        // (src/cuda/utils.cc, its dlopen of cuBLAS), and cuDNN 8 aborts with "Could not load
        // library libcudnn_cnn_infer.so.8. Error: libcuda.so: cannot open shared object file"
        // or, on Windows, "Could not load library cudnn_ops_infer64_8.dll. Error code 126"
        // (its sub-library loader). TensorFlow's "Could not load dynamic library …" is a
        // warning after which it runs on the CPU, and stays out.
        name: "cuda_library_load_failed",
        literals: &["Error: Library ", ". Error: ", ". Error code "],
        kind: Kind::CudaError,
        category: "cuda_library_load_failed",
        blame: Blame::Application,
        hint: "A CUDA library (cuBLAS, cuDNN) that the job needs could not be loaded: install \
               the CUDA and cuDNN versions this build of the framework expects (the file name \
               gives the major version), or put their directory on LD_LIBRARY_PATH / PATH; in a \
               container, check that the image ships them.",
        priority: MID,
        requires_any: &[
            "is not found or cannot be loaded",
            "Could not load library ",
        ],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // ONNX Runtime's CUDA execution provider, before it printed the status (1.x releases'
        // `CudaCall`, onnxruntime/core/providers/cuda/cuda_call.cc): "Status Message: CUDNN error
        // executing cudnnConvolutionForward(s_.handle, …)", also "CUDA error executing
        // cudaMemcpyAsync(…)" and "CUBLAS error executing cublasGemmHelper(…)". The line names
        // the call, not the status; a status on another line of the report refines it.
        name: "ort_library_call_failed",
        literals: &[
            "CUDNN error executing ",
            "CUDA error executing ",
            "CUBLAS error executing ",
            "CUFFT error executing ",
            "CURAND error executing ",
        ],
        kind: Kind::CudaError,
        category: "unknown",
        blame: Blame::Unknown,
        hint: "A CUDA or CUDA-library call of ONNX Runtime's CUDA execution provider failed (the \
               call is named after 'executing'): rerun with CUDA_LAUNCH_BLOCKING=1 and the \
               session's log severity at verbose to see the status, and check that the cuDNN \
               and CUDA versions are the ones this onnxruntime-gpu release was built for.",
        priority: GENERIC,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // Open MPI's CUDA-aware transport reports a failed CUDA IPC call in a help message: "The
        // call to cuIpcGetMemHandle failed. This means the GPU RDMA protocol cannot be used."
        // (also cuIpcOpenMemHandle, cuIpcGetEventHandle, cuIpcOpenEventHandle), followed by the
        // call's `CUresult` ("cuIpcGetMemHandle return value:   1"); `mpirun` folds the copies of
        // other ranks into "N more processes have sent help message help-mpi-common-cuda.txt /
        // cuIpcGetMemHandle failed" (opal/mca/common/cuda/help-mpi-common-cuda.txt, the topics
        // in brackets). IPC between processes fails where they cannot share the device: separate
        // containers or IPC namespaces, GPUs hidden from one another, or too little free memory
        // to map the peer's buffer.
        name: "openmpi_cuda_ipc_failed",
        literals: &[
            "The call to cuIpcGetMemHandle failed",
            "The call to cuIpcOpenMemHandle failed",
            "The call to cuIpcGetEventHandle failed",
            "The call to cuIpcOpenEventHandle failed",
            "help-mpi-common-cuda.txt / cuIpcGetMemHandle failed",
            "help-mpi-common-cuda.txt / cuIpcOpenMemHandle failed",
            "help-mpi-common-cuda.txt / cuIpcGetEventHandle failed",
            "help-mpi-common-cuda.txt / cuIpcOpenEventHandle failed",
        ],
        kind: Kind::CudaError,
        category: "cuda_ipc_failed",
        blame: Blame::Unknown,
        hint: "Open MPI could not share GPU memory between ranks through CUDA IPC (GPU RDMA is \
               off, and an open that fails aborts the job): check that the ranks of one node \
               share the container or IPC namespace and see each other's GPUs \
               (CUDA_VISIBLE_DEVICES), that the GPU has free memory, and look up the return \
               value printed below the message in cuda.h (CUresult).",
        priority: MID,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // Open MPI's other CUDA help messages of the same shape, for the calls its CUDA support
        // makes outside IPC: "The call to cuMemcpyAsync failed. This is a unrecoverable error and
        // will cause the program to abort.", cuEventCreate, cuEventRecord, cuEventQuery,
        // cuStreamCreate, cuStreamWaitEvent, cuMemcpy, cuStreamSynchronize, cuMemGetAddressRange
        // (help-mpi-common-cuda.txt; "cuEventDestory" is its spelling). The error itself is the
        // `CUresult` on the following line, which the family leaves to a line that names it.
        // The cuCtxGetCurrent topics are warnings that the run continues after, and stay out, as
        // does cuMemHostRegister, whose message puts the call's arguments before "failed".
        name: "openmpi_cuda_call_failed",
        literals: &[
            "The call to cuMemcpyAsync failed",
            "The call to cuMemcpy failed",
            "The call to cuEventCreate failed",
            "The call to cuEventRecord failed",
            "The call to cuEventQuery failed",
            "The call to cuEventDestory failed",
            "The call to cuStreamCreate failed",
            "The call to cuStreamWaitEvent failed",
            "The call to cuStreamSynchronize failed",
            "The call to cuMemGetAddressRange failed",
        ],
        kind: Kind::CudaError,
        category: "unknown",
        blame: Blame::Unknown,
        hint: "A CUDA call of Open MPI's CUDA-aware transport failed: look up the return value \
               printed below the message in cuda.h (CUresult) and check the job's own CUDA \
               errors and this GPU's Xids from the same minute.",
        priority: GENERIC,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // PhysX's GPU pipeline (Isaac Gym, Isaac Sim/Lab, SAPIEN) reports a kernel it could not
        // launch through its error callback: "GPU solveSelfConstraints fail to launch kernel!!"
        // (physx/source/gpu*/src/*.cpp, `PxGetFoundation().error(PxErrorCode::eINTERNAL_ERROR,
        // …)` after `cuLaunchKernel` fails; a few sites say "fail to launch!!"), printed as
        // "…/PxgArticulationCore.cpp (859) : internal error : GPU … fail to launch kernel!!" or
        // by Omniverse as "[omni.physx.plugin] PhysX error: GPU … fail to launch kernel!!".
        // The launch fails because the context already holds an error, which the log names
        // later, if at all ("Gym cuda error: an illegal memory access was encountered"): the
        // family stays `unknown` so that a line naming the error refines it.
        name: "physx_kernel_launch_failed",
        literals: &["internal error : GPU ", "PhysX error: GPU "],
        kind: Kind::CudaError,
        category: "unknown",
        blame: Blame::Unknown,
        hint: "PhysX could not launch a GPU kernel: the simulation's CUDA context is usually \
               broken by an earlier error (an illegal address in the GPU pipeline, often when \
               contacts or pairs outgrow the GPU buffers: raise the PxGpuDynamicsMemoryConfig \
               capacities the log names) or the GPU ran out of memory. Find the first PhysX or \
               CUDA error above; fewer environments or a smaller scene confirm a capacity cause.",
        priority: MID,
        requires_any: &["fail to launch"],
        refines: &[],
        guard: None,
    },
    // PhysX's own CUDA failures without a launch: "PhysX Internal CUDA error. Simulation
    // cannot continue! Error code 700!" (physx/source/physx/src/NpScene.cpp, the `CUresult`
    // at the end in later releases) and Omniverse's PhysX extension once the context holds
    // an error other than out-of-memory: "Cuda context manager error, simulation will be
    // stopped and new cuda context manager will be created." The number, where printed,
    // names the error; a later line's family refines the incident.
    generic_cuda(
        "physx_cuda_error",
        &[
            "PhysX Internal CUDA error",
            "Cuda context manager error, simulation",
        ],
    ),
    // PhysX's checks that print a CUDA driver call's `CUresult`: "PhysX error:
    // SynchronizeStreams cuEventRecord failed with error 700", "PhysX error: Synchronizing
    // GPU Narrowphase failed! 700" (physx/source/gpucommon/include/PxgCudaUtils.h,
    // gpunarrowphase/src/PxgNarrowphaseCore.cpp). Counted only where `cuda_catalog` names the
    // number (detect's `REFINED_ONLY`): PhysX's other errors (a buffer capacity to raise)
    // are not CUDA failures.
    generic_cuda("physx_error_numbered", &["PhysX error: "]),
    // Blender Cycles' CUDA device checks every driver call and prints the `CUresult` in the CUDA
    // extension wrangler's words before the call it failed in: "Illegal address in
    // cuCtxSynchronize() (…/intern/cycles/device/cuda/queue.cpp:123)", "Invalid context in
    // cuStreamCreate(&cuda_stream_, CU_STREAM_NON_BLOCKING) (…)" (intern/cycles/device/cuda/
    // util.h, `cuda_device_assert`: "%s in %s (%s:%d)"; the words are `cuewErrorString`'s,
    // extern/cuew/src/cuew.c). `cuda_catalog` names the error from the words (the driver names'
    // short forms, and cuew's own wordings in its `FRAMEWORK_WORDINGS`); counted only where it
    // does (detect's `REFINED_ONLY`), and only where a driver call follows "in"
    // (`guards::driver_call_follows`). "Out of memory in cu…" is the OOM row's.
    HeadlineRule {
        guard: Some(guards::driver_call_follows),
        ..generic_cuda(
            "cuew_driver_call",
            &[
                "Illegal address in cu",
                "Misaligned address in cu",
                "Launch failed in cu",
                "Launch exceeded timeout in cu",
                "Invalid context in cu",
                "Invalid value in cu",
                "Invalid handle in cu",
                "Invalid kernel image in cu",
                "No binary for GPU in cu",
                "Hardware stack error in cu",
                "Uncorrectable ECC error detected in cu",
                "Unknown error in cu",
            ],
        )
    },
    // llama.cpp's CUDA backend (ggml-cuda) compiles a device function that traps for GPU
    // architectures the build left out: "ERROR: ggml-cuda was compiled without support for the
    // current GPU architecture." (ggml-cuda's `bad_arch`, printed from the device before
    // `__trap()`), the same failure as the runtime's "no kernel image is available". Named by
    // `cuda_catalog::FRAMEWORK_WORDINGS`.
    generic_cuda(
        "ggml_cuda_bad_arch",
        &["was compiled without support for the current GPU architecture"],
    ),
    // TensorFlow's driver wrapper names a failed driver call and the `CUresult` after it, by name
    // ("failed call to cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected") or, for
    // a value its table lacks, by number ("failed call to cuInit: UNKNOWN ERROR (34)";
    // stream_executor/cuda/cuda_driver.cc and its successors, `ToString(CUresult)`). Counted only
    // where `cuda_catalog` names the result (detect's `REFINED_ONLY`).
    generic_cuda("tf_failed_driver_call", &["failed call to cu"]),
    // OpenCV's CUDA module (`cv::cuda::checkCudaError`, modules/core/include/opencv2/core/
    // private.cuda.hpp) raises error -217 with the runtime's message: OpenCV 2 and 3 print
    // "OpenCV Error: Gpu API call (out of memory) in allocate, file …", OpenCV 4 "error:
    // (-217:Gpu API call) out of memory in function 'allocate'". Counted only where the catalog
    // names the message (detect's `REFINED_ONLY`).
    generic_cuda(
        "opencv_gpu_api_call",
        &["rror: Gpu API call (", "rror: (-217:Gpu API call)"],
    ),
    // Wrappers that put the runtime's error after their own words, counted only where
    // `cuda_catalog` names the error (detect's `REFINED_ONLY`): the words alone also head a
    // FAQ's section. Triton's launcher and driver checks: "Triton Error [CUDA]: an illegal
    // memory access was encountered" (triton/backends/nvidia/driver.c, `gpuAssert`, with the
    // driver's `cuGetErrorString` text), read also when a title cut the message short.
    // TensorRT's check of the runtime before it builds or loads an engine: "CUDA
    // initialization failure with error: 35. Please check your CUDA installation"
    // (`createInferBuilder`, `createInferRuntime`, runtime.cpp `isCudaInstalledCorrectly`),
    // the number a `cudaError_t`. PyCUDA's driver errors: "pycuda._driver.LaunchError:
    // cuLaunchKernel failed: too many resources requested for launch" (src/cpp/cuda.hpp,
    // `error::make_message`: the call, " failed: ", `cuGetErrorString`'s text; the class is
    // `LogicError`, `MemoryError`, `LaunchError` or `RuntimeError`). LightGBM's CUDA checks:
    // "[CUDA] unknown error cuda_column_data.cpp 18" (include/LightGBM/cuda/cuda_utils.hu,
    // `gpuAssert`, which logs "[CUDA] %s %s %d" with `cudaGetErrorString`, file and line).
    generic_cuda(
        "cuda_error_wrapped",
        &[
            "Triton Error [CUDA]",
            "CUDA initialization failure with error",
            // PyTorch's count of the devices when the runtime fails to initialise, warned once
            // and then every CUDA call fails (`torch.cuda.is_available()` is False): "UserWarning:
            // CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some
            // cuda functions before calling NumCudaDevices() that might have already set an
            // error? Error 803: system has unsupported display driver / cuda driver combination"
            // (c10/cuda/CUDAFunctions.cpp, `device_count_impl`).
            "Unexpected error from cudaGetDeviceCount()",
            // Thrust's CUDA backend names the algorithm before the runtime's message:
            // "parallel_for failed: out of memory" (thrust/system/cuda/detail/parallel_for.h,
            // `throw_on_error`), also without the terminate block around it.
            "parallel_for failed: ",
            "_driver.LaunchError: ",
            "_driver.LogicError: ",
            "_driver.MemoryError: ",
            "_driver.RuntimeError: ",
            "_driver.Error: ",
            "[CUDA] ",
            // LAMMPS' GPU package (lib/gpu/geryon/nvd_macros.h, `CU_SAFE_CALL`): "Cuda driver
            // error 804 in call at file '…/nvd_device.h' in line 333." with the `CUresult`;
            // OpenMM's older context, for a code its table lacked: "Error synchronizing CUDA
            // context: Invalid error code (700)" (platforms/cuda/src/CudaContext.cpp).
            "Cuda driver error ",
            "Invalid error code (",
            // The OpenACC runtime of the PGI and NVIDIA HPC compilers: "call to
            // cuStreamSynchronize returned error 700: Illegal address during kernel execution"
            // (the driver API's value; counted only where a `cuX` call precedes it), and TensorRT
            // 5 to 7's "runtime.cpp (16) - Cuda Error in allocate: 2" (a `cudaError_t`).
            " returned error ",
            "Cuda Error in ",
            // dlib's CUDA, cuDNN and cuBLAS checks: "Error while calling cudaMemcpy(…) in file
            // dlib/dnn/gpu_data.cpp:62. code: 11, reason: invalid argument" (dlib/cuda/
            // cuda_utils.h, `CHECK_CUDA`; older releases print "code 11,reason :…").
            "Error while calling cu",
        ],
    ),
    HeadlineRule {
        // TensorRT 8 and later log a failed CUDA call with the runtime's or the driver's message
        // in parentheses: "[TRT] [E] 1: [defaultAllocator.cpp::deallocate::42] Error Code 1: Cuda
        // Runtime (invalid argument)", "… Error Code 1: Cuda Driver (an illegal memory access was
        // encountered)" (`nvinfer1::ILogger`, the `ErrorCode` value before the library's name);
        // `cuda_catalog` names the family from the message.
        name: "tensorrt_cuda_error",
        literals: &["Error Code "],
        kind: Kind::CudaError,
        category: "unknown",
        blame: Blame::Unknown,
        hint: GENERIC_CUDA_HINT,
        priority: GENERIC,
        requires_any: &[": Cuda Runtime (", ": Cuda Driver ("],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // The description of a timed-out collective, kept where a title or a wrap cut the
        // watchdog's sentence before "before timing out": "WorkNCCL(SeqNum=5125,
        // OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1807734
        // millisecond" (ProcessGroupNCCL.cpp, `WorkNCCL::checkTimeout`; the work's `Timeout(ms)=`
        // field is printed only inside a work's description), and the blocking wait's "Work
        // WorkNCCL(…, Timeout(ms)=600000) timed out in blocking wait" (`WorkNCCL::synchronize`).
        name: "nccl_work_timed_out",
        literals: &["Timeout(ms)="],
        kind: Kind::NcclError,
        category: "nccl_watchdog_timeout",
        blame: Blame::Unknown,
        hint: WATCHDOG_HINT,
        priority: HIGH,
        requires_any: &[") ran for ", "timed out in blocking wait"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "nccl_watchdog_timeout",
        literals: &[
            // "Watchdog caught collective operation timeout: WorkNCCL(…)", also where a title cut
            // the last word.
            "Watchdog caught collective operation",
            // ProcessGroupNCCL's line after a timed-out collective: "Some NCCL operations have
            // failed or timed out. Due to the asynchronous nature of CUDA kernels, …".
            "Some NCCL operations have failed or timed out",
            "watchdog detected a collective timeout",
            // The heartbeat monitor dumping debug state because a collective timed out, here or
            // on another rank: "Received a dump signal due to a collective timeout from this
            // local rank and we will try our best to dump the debug info." / "Received a global
            // timeout from another rank and will start to dump the debug info."
            // (ProcessGroupNCCL.cpp, the heartbeat monitor's loop). The monitor only reports
            // the timeout; its own failure is "Heartbeat monitor timed out" below.
            "Received a dump signal due to a collective timeout",
            "Received a global timeout from another rank",
            // The message's core again, apart: a hard wrap inside "Watchdog" still leaves an
            // anchor on the other piece (ProcessGroupNCCL.cpp, WorkNCCL::checkTimeout).
            "collective operation timeout",
            // What the other collectives of that process group raise once the watchdog has
            // aborted the communicator: "RuntimeError: NCCL communicator was aborted on rank 19.
            // Original reason for failure was: …" (ProcessGroupNCCL.cpp, WorkNCCL's exception;
            // `DistBackendError` since 2.1). Only as a raised exception's message: the words in a
            // sentence describe the mechanism.
            "Error: NCCL communicator was aborted",
            // The C++ stack of that exception without its message (a paste that kept the
            // frames): only `WorkNCCL::checkTimeout` throws it, and c10's trace names the
            // function ("frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<…>)
            // + 0x1d2 (… libtorch_cuda.so)", "Exception raised from checkTimeout at …").
            "WorkNCCL::checkTimeout(",
            "Exception raised from checkTimeout at",
        ],
        kind: Kind::NcclError,
        category: "nccl_watchdog_timeout",
        blame: Blame::Unknown,
        hint: WATCHDOG_HINT,
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // ProcessGroupNCCL's heartbeat monitor thread (torch/csrc/distributed/c10d/
        // ProcessGroupNCCL.cpp, `HeartbeatMonitor::runLoop` / older `heartbeatMonitor`): the
        // watchdog itself stopped making progress (often a hung CUDA call or a GIL deadlock).
        name: "nccl_heartbeat_monitor_timeout",
        literals: &[
            "Heartbeat monitor timed out",
            // "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress …";
            // titles quote it without the duration, web copies curl the apostrophe or drop it.
            "watchdog got stuck",
        ],
        kind: Kind::NcclError,
        category: "nccl_heartbeat_monitor_timeout",
        blame: Blame::Unknown,
        hint: "ProcessGroupNCCL's heartbeat monitor killed the process: its watchdog made no \
               progress (a hung CUDA call, a GIL deadlock). Find the first rank that logged an \
               error or a hang; raise TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC only when the watchdog is \
               merely slow.",
        priority: HIGH - 1,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "nccl_unhandled_cuda_error",
        // nccl-tests and some NCCL builds quote the text with CUDA in capitals ("Test NCCL
        // failure common.cu:1005 'unhandled CUDA error'").
        literals: &[
            // NCCL's text, also capitalised where it opens a title or a sentence ("Unhandled
            // CUDA error in ProcessGroupNCCL.cpp").
            "nhandled cuda error",
            "nhandled CUDA error",
            "ncclUnhandledCudaError",
            // CuPy's and Ray's name of the result (cupy/cuda/nccl.pyx, its table of
            // `ncclResult_t` names: "NcclError: NCCL_ERROR_UNHANDLED_CUDA_ERROR: unhandled cuda
            // error"), which titles quote alone. The table's other names come with NCCL's text
            // after them, which the other rows read; alone they would cost a gate anchor.
            "NCCL_ERROR_UNHANDLED_CUDA_ERROR",
            // glog's CHECK_EQ of a call's result (Caffe's `NCCL_CHECK`): "Check
            // failed: result == ncclSuccess (1 vs. 0) unhandled cuda error" prints the
            // `ncclResult_t` value first (src/nccl.h: 1 unhandled CUDA error, 2 system error, 3
            // internal error, 4 invalid argument, 5 invalid usage, 6 remote error), and NCCL
            // 1.x's shorter texts after it ("(2 vs. 0) system error").
            "failed: result == ncclSuccess (1 vs. 0)",
        ],
        kind: Kind::NcclError,
        category: "nccl_unhandled_cuda_error",
        blame: Blame::Unknown,
        hint: NCCL_CUDA_HINT,
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // NCCL's CUDACHECK: "NCCL WARN Cuda failure 'an illegal memory access was encountered'"
        // (newer: "Cuda failure 700 '…'"), after which the call returns ncclUnhandledCudaError
        // (src/include/checks.h). The CUDA message names the error, but the failure is NCCL's:
        // it ranks above the CUDA rows so that the line keeps NCCL's family. Other programs'
        // "Cuda failure" macros print no NCCL tag and stay with the CUDA rows. NCCL 1.x printed
        // no tag either, only the level and its source file: "WARN src/reduce.cu:126 Cuda
        // failure 'invalid resource handle'" (src/core.h, `printf("WARN %s:%d ", __FILE__,
        // __LINE__)`, its sources all under `src/`).
        name: "nccl_cuda_failure",
        literals: &[
            "Cuda failure ",
            // The transport's own checks of the IPC calls: "NCCL WARN cudaIpcGetMemHandle failed
            // : invalid argument", and RCCL's hipified "hipIpcGetMemHandle failed : …"
            // (src/transport/p2p.cc).
            "IpcGetMemHandle failed",
            "IpcOpenMemHandle failed",
        ],
        kind: Kind::NcclError,
        category: "nccl_unhandled_cuda_error",
        blame: Blame::Unknown,
        hint: NCCL_CUDA_HINT,
        priority: HIGH + 1,
        requires_any: &["NCCL", "nccl", "WARN src/"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "nccl_unhandled_system_error",
        literals: &[
            "nhandled system error",
            "ncclSystemError",
            "failed: result == ncclSuccess (2 vs. 0)",
        ],
        kind: Kind::NcclError,
        category: "nccl_unhandled_system_error",
        blame: Blame::Unknown,
        hint: "NCCL hit a system call or network failure (sockets, shared memory, IB): check \
               /dev/shm size, network interfaces (NCCL_SOCKET_IFNAME) and NCCL_DEBUG=INFO output.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // NCCL's socket layer giving up on a connection (src/misc/socket.cc): "socketStartConnect:
        // Connect to 10.0.0.2<43369> failed : Software caused connection abort" and "socketPollConnect
        // to … failed with error …" return ncclSystemError; "exceeded timeouts" (ETIMEDOUT) and
        // "poll() failed" end the attempt too. Refusals that exceed their retries are
        // `nccl_connection_refused` below.
        name: "nccl_socket_connect_failed",
        literals: &[
            "socketStartConnect: Connect to",
            "socketPollConnect to",
            "socketPollConnect poll() failed",
            "socketStartConnect: exceeded timeouts",
            "socketPollConnect: exceeded timeouts",
        ],
        kind: Kind::NcclError,
        category: "nccl_unhandled_system_error",
        blame: Blame::Unknown,
        hint: NCCL_SOCKET_HINT,
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // The same message where a caller wraps it without the function's name: "NCCL Connect to
        // 192.168.0.157<47713> failed : Software caused connection abort". NCCL prints a peer's
        // address as `ip<port>` (src/misc/socket.cc, `ncclSocketToString`), which ties the words
        // to its socket layer.
        name: "nccl_socket_connect_failed_bare",
        literals: &["> failed : "],
        kind: Kind::NcclError,
        category: "nccl_unhandled_system_error",
        blame: Blame::Unknown,
        hint: NCCL_SOCKET_HINT,
        priority: MID,
        requires_any: &["NCCL Connect to ", "NCCL WARN"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // The same layer after ECONNREFUSED on every retry (src/misc/socket.cc).
        name: "nccl_socket_refused_retries",
        literals: &[
            "socketStartConnect: exceeded retries",
            "socketPollConnect: exceeded retries",
        ],
        kind: Kind::NcclError,
        category: "nccl_connection_refused",
        blame: Blame::Unknown,
        hint: "A rank could not connect to a peer: the peer died or a firewall/interface choice \
               blocks it (NCCL_SOCKET_IFNAME).",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "nccl_internal_error",
        literals: &[
            "ncclInternalError",
            "internal error - please report this issue to the NCCL",
            // NCCL 2.7 and older say just "internal error"; PyTorch prints it as "NCCL error in:
            // <file>:<line>, internal error, NCCL version …" (c10d NCCLUtils.hpp) or, before
            // 1.1, "NCCL Error 3: internal error" (`ncclResult_t` 3 is ncclInternalError).
            ", internal error, NCCL version",
            "NCCL Error 3: internal error",
            "failed: result == ncclSuccess (3 vs. 0)",
            // XLA's "NCCL operation …(…) failed: internal error" (see nccl_invalid_usage).
            "failed: internal error",
            // `ncclGetErrorString` after PyTorch's "NCCL error in: <file>:<line>, " and after
            // "NCCL error: ", where a paste cut the sentence short ("internal error - please
            // report this issue to t").
            ", internal error",
            "NCCL error: internal error",
        ],
        kind: Kind::NcclError,
        category: "nccl_internal_error",
        blame: Blame::Unknown,
        hint: "NCCL reported an internal error: rerun with NCCL_DEBUG=INFO and check NCCL and \
               driver versions across ranks.",
        priority: HIGH,
        // Other libraries fail with "internal error" too: XLA's wording counts only where the
        // line names NCCL, as all the other literals do.
        requires_any: &["NCCL", "nccl", "Nccl"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // PyTorch's NCCL process group on a process that sees no GPU: "ValueError:
        // ProcessGroupNCCL is only supported with GPUs, no GPUs found!"
        // (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, the constructor's check of
        // `at::cuda::getNumGPUs()`).
        name: "nccl_process_group_without_gpu",
        literals: &["ProcessGroupNCCL is only supported with GPUs"],
        kind: Kind::NcclError,
        category: "nccl_backend_unavailable",
        blame: Blame::Application,
        hint: "The job created an NCCL process group in a process that sees no GPU: check \
               CUDA_VISIBLE_DEVICES, the container's or the scheduler's GPU request and \
               nvidia-smi on the node, or use the gloo backend for a CPU run.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // CNMeM's other statuses where a program sets up or uses its pool: Triton's "Failed to
        // finalize CUDA memory manager: CNMEM_STATUS_INVALID_ARGUMENT" (server.cc, its early
        // releases), after which it serves the model on the CPU.
        name: "cnmem_status",
        literals: &["CNMEM_STATUS_"],
        kind: Kind::CudaError,
        category: "cuda_memory_pool_init_failed",
        blame: Blame::Unknown,
        hint: "The CNMeM memory pool could not be set up on the GPU (a pool size larger than the \
               free memory, an unsupported GPU or a driver mismatch): check the pool's size \
               settings against the GPU's free memory and the driver.",
        priority: MID,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // NCCL itself could not be loaded: XLA's "NCCL operation ncclGetUniqueId(&id) failed:
        // Unable to load NCCL library. Multi-GPU collectives will not work." (xla/service/gpu,
        // also TensorFlow's collective ops as "NCCL: Unable to load NCCL library"), CuPy's and
        // Chainer's `RuntimeError('Unable to load NCCL library')`.
        name: "nccl_library_load_failed",
        literals: &["Unable to load NCCL library"],
        kind: Kind::NcclError,
        category: "nccl_library_load_failed",
        blame: Blame::Application,
        hint: "The process found no loadable NCCL library, so no collective can run: install the \
               NCCL that the framework was built against (e.g. the nvidia-nccl wheel) and make it \
               visible (LD_LIBRARY_PATH, the container image), or run on one GPU.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "nccl_invalid_usage",
        literals: &[
            "ncclInvalidUsage",
            "invalid usage (run with NCCL_DEBUG",
            ", invalid usage, NCCL version",
            "NCCL Error 5: invalid usage",
            "failed: result == ncclSuccess (5 vs. 0)",
            // Two ranks on one GPU: "NCCL WARN Duplicate GPU detected : rank 2 and rank 0 both
            // on CUDA device 1000" (src/init.cc, which then returns ncclInvalidUsage). Keyed on
            // the message's end, which the gate's `CUDA` anchor already covers.
            "both on CUDA device",
            // XLA's NCCL calls (xla/service/gpu nccl_utils, nccl_all_reduce_thunk, also in
            // TensorFlow's copy): "NCCL operation ncclAllReduce(…) failed: invalid usage", with
            // `ncclGetErrorString`'s text after "failed: " (so also in the rows for internal
            // errors and invalid arguments). CUDA has no "invalid usage" message.
            "failed: invalid usage",
        ],
        kind: Kind::NcclError,
        category: "nccl_invalid_usage",
        blame: Blame::Application,
        hint: "NCCL was called incorrectly (e.g. two ranks on one GPU, mismatched collectives): \
               check device assignment per rank.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // A PyTorch build without NCCL asked for the NCCL backend: "RuntimeError: Distributed
        // package doesn't have NCCL built in" (torch/distributed/distributed_c10d.py; the Windows
        // and macOS wheels and CPU builds have no NCCL). The job stops in init_process_group.
        name: "nccl_backend_unavailable",
        // Programs built on CuPy check `cupy.cuda.nccl.available` and stop the same way when
        // their CuPy has none: "RuntimeError: NCCL is not available. Please confirm that NCCL
        // is enabled in CuPy." (seen under Azure ML as "UserError: User program failed with
        // RuntimeError: …").
        literals: &[
            "rror: Distributed package doesn't have NCCL built in",
            "rror: NCCL is not available",
        ],
        kind: Kind::NcclError,
        category: "nccl_backend_unavailable",
        blame: Blame::Application,
        hint: "This build has no NCCL (PyTorch's Windows and macOS wheels and CPU builds, a \
               CuPy without its NCCL module): use the gloo backend there \
               (init_process_group(backend=\"gloo\")), or a Linux CUDA build with NCCL.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // torchrun's store on a PyTorch build without libuv: since 2.4 TCPStore uses its libuv
        // backend by default (the PyTorch tutorial "Introduction to Libuv TCPStore Backend",
        // which also gives the ways back to the legacy one), and the Windows wheels lack it:
        // "RuntimeError: use_libuv was requested but PyTorch was build without libuv support"
        // (torch/csrc/distributed/c10d/TCPStore.cpp; later releases spell it "built").
        name: "c10d_libuv_unavailable",
        literals: &["rror: use_libuv was requested but PyTorch was buil"],
        kind: Kind::NcclError,
        category: "c10d_libuv_unavailable",
        blame: Blame::Application,
        hint: "The job asked TCPStore for its libuv backend, which this PyTorch build lacks \
               (Windows wheels): set USE_LIBUV=0 in the environment, or add use_libuv=0 to the \
               init_method URL.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // ProcessGroupWrapper's check that every rank runs the same collective, on when
        // TORCH_DISTRIBUTED_DEBUG=DETAIL: "RuntimeError: Detected mismatch between collectives on
        // ranks. Rank 0 is running collective: CollectiveFingerPrint(OpType=BROADCAST, …), but
        // Rank 1 is running collective: …" (torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp,
        // `CollectiveFingerPrint::verify`). Wrappers put their own words before it ("Exception:
        // Capture cuda graph failed: Detected mismatch …"); the sentence also refines the row
        // wherever another head brought the line here.
        name: "collective_mismatch",
        literals: &[
            "rror: Detected mismatch between collectives",
            "failed: Detected mismatch between collectives",
        ],
        kind: Kind::NcclError,
        category: "collective_mismatch",
        blame: Blame::Application,
        hint: "The ranks called different collectives (or the same one with other shapes or \
               dtypes) at the same step: a code path that depends on the rank or the data (a \
               skipped batch, an early stop, an all_reduce inside an if) runs on some ranks only. \
               The two fingerprints in the message name the diverging calls.",
        priority: HIGH,
        requires_any: &[],
        refines: &["Detected mismatch between collectives"],
        guard: None,
    },
    HeadlineRule {
        // ProcessGroupNCCL's check of every tensor a collective or a send/recv is given:
        // "Tensors must be CUDA and dense" (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp,
        // `check_gpu_single_tensor`, a ValueError since 2.1 and a RuntimeError before; Paddle's
        // NCCL group says "Tensors must be CUDA and dense tensor."). A CPU or sparse tensor
        // reached an NCCL collective: a metric or a counter built on the CPU, most often.
        name: "nccl_tensor_not_cuda",
        literals: &["Tensors must be CUDA and dense"],
        kind: Kind::NcclError,
        category: "nccl_tensor_not_cuda",
        blame: Blame::Application,
        hint: "A tensor on the CPU (or a sparse one) was passed to a collective of the NCCL \
               backend, which only moves dense GPU tensors: move it to the rank's device first \
               (often a metric or a counter created without device=), or use a gloo group for \
               CPU tensors.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // JAX's and XLA's multi-host runtime rendezvous through a coordination service
        // (tsl/distributed_runtime/coordination, xla/pjrt/distributed/client.cc): a task that
        // cannot register or heartbeat in time reports "Coordination service agent in error
        // status: DEADLINE_EXCEEDED: Deadline Exceeded", and a key that another process should
        // publish (the NCCL clique id among them) ends in "DEADLINE_EXCEEDED: GetKeyValue() timed
        // out with key: …". Both are the torch store timeouts' counterpart: another host is
        // missing, late or unreachable.
        name: "coordination_service_timeout",
        literals: &[
            "Coordination service agent in error status",
            "GetKeyValue() timed out",
        ],
        kind: Kind::NcclError,
        category: "coordination_service_timeout",
        blame: Blame::Unknown,
        hint: "A JAX/XLA process waited on the distributed coordination service (its \
               registration, a barrier or a key another host publishes) and timed out: another \
               host died, started late or cannot reach the coordinator's address and port. Check \
               every host's log from its start and the coordinator address the job was given.",
        priority: MID + 2,
        requires_any: &["DEADLINE_EXCEEDED", "timed out", "Deadline Exceeded"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // A collective timeout named in a report's own words rather than PyTorch's, as issue
        // titles and chat posts name it: "NCCL timeout during validation", "WorkNCCL Timeout",
        // "NCCL watchdog timeout when …", "NCCL rank desync timeout with …". The words are also a
        // setting's and an advice's ("increase the NCCL timeout", "NCCL timeout of 30 minutes"),
        // so `mod.rs` keeps the row only where the words name something that happened
        // (`guards::timeout_named_as_event`).
        name: "nccl_timeout_named",
        literals: &[
            "CCL timeout",
            "CCL Timeout",
            "ccl timeout",
            "watchdog timeout",
            "desync timeout",
            "collective timeout",
            "Watchdog timeout",
        ],
        kind: Kind::NcclError,
        category: "nccl_watchdog_timeout",
        blame: Blame::Unknown,
        hint: WATCHDOG_HINT,
        priority: GENERIC,
        requires_any: &["NCCL", "nccl", "Nccl"],
        refines: &[],
        guard: Some(guards::timeout_named_as_event),
    },
    HeadlineRule {
        // A collective that PyTorch's NCCL process group does not implement, or only implements
        // with a newer NCCL: "RuntimeError: ProcessGroupNCCL does not support scatter" (before
        // 1.13), "ProcessGroupNCCL does not support recvAnysource", "RuntimeError:
        // ProcessGroupNCCL only supports alltoall* for NCCL lib version >= 2.7.0"
        // (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, `C10_THROW_ERROR`/`TORCH_CHECK`).
        // The job stops at the call; keyed on the raised error, whose class the gate's `rror`
        // anchor covers.
        name: "process_group_nccl_unsupported",
        literals: &[
            "rror: ProcessGroupNCCL does not support",
            "rror: ProcessGroupNCCL only supports",
        ],
        kind: Kind::NcclError,
        category: "nccl_unsupported_operation",
        blame: Blame::Application,
        hint: "The NCCL process group does not implement this collective (or needs a newer NCCL \
               for it): use a collective it supports, a build with a newer NCCL, or the gloo \
               backend for this call.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // `ncclInvalidArgument`, "invalid argument (run with NCCL_DEBUG=WARN for details)"
        // (ncclGetErrorString, src/init.cc).
        name: "nccl_invalid_argument",
        literals: &[
            "ncclInvalidArgument",
            "invalid argument (run with NCCL_DEBUG",
            ", invalid argument, NCCL version",
            "NCCL Error 4: invalid argument",
            "failed: result == ncclSuccess (4 vs. 0)",
            "failed: invalid argument",
            // NCCL 1.x's `ncclGetErrorString` for its finer argument results (ncclInvalidType,
            // ncclInvalidDevicePointer, ncclInvalidRank; src/core.cu), which NCCL 2 folds into
            // ncclInvalidArgument: Horovod's "ncclAllReduce failed: invalid data type".
            "failed: invalid data type",
            "failed: invalid device pointer",
            "failed: invalid rank",
            // The text after PyTorch's "NCCL error in: <file>:<line>, " (c10d NCCLUtils.hpp, as
            // for internal errors) and PaddlePaddle's "Nccl error, " (its enforce of an
            // `ncclResult_t`: "OSError: (External) Nccl error, invalid data type, detail: …").
            ", invalid argument",
            ", invalid data type",
            ", invalid device pointer",
            ", invalid rank",
        ],
        kind: Kind::NcclError,
        category: "nccl_invalid_argument",
        blame: Blame::Application,
        hint: "NCCL rejected an argument (a buffer on the wrong device, a count or datatype that \
               differs between ranks): rerun with NCCL_DEBUG=WARN to see which.",
        priority: HIGH,
        // As for internal errors: CUDA's own "invalid argument" must not read as NCCL's.
        requires_any: &["NCCL", "nccl", "Nccl"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "nccl_remote_error",
        literals: &[
            "ncclRemoteError",
            "remote process exited or there was a network error",
            "failed: result == ncclSuccess (6 vs. 0)",
        ],
        kind: Kind::NcclError,
        category: "nccl_remote_error",
        blame: Blame::Unknown,
        hint: "A peer rank died or the network dropped: find the first failing rank's error.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // A peer's end of a connection went away: NCCL's socket layer ("socketProgressOpt:
        // Connection closed by remote peer", "Call to recv from … failed : Connection reset by
        // peer", src/misc/socket.cc), and Gloo's TCP pairs ("Connection closed by peer",
        // "Connection reset by peer", gloo/transport/tcp/pair.cc). Usually the peer process died
        // first; the phrases are everyday socket errors, so the line must name the library.
        name: "nccl_peer_connection_closed",
        literals: &[
            "Connection closed by remote peer",
            "Connection closed by peer",
            "Connection reset by peer",
            // EPIPE from a send or recv to a peer that is gone (`Call to recv from … failed :
            // Broken pipe`, misc/socket.cc).
            " failed : Broken pipe",
            " failed: Broken pipe",
        ],
        kind: Kind::NcclError,
        category: "nccl_remote_error",
        blame: Blame::Unknown,
        hint: "A peer rank closed its connection: it most likely died first (find the first \
               failing rank's own error), or the network between the hosts dropped.",
        // Above `c10d_store_connect_failed` and the rendezvous errors, whose exception classes
        // may head the same line.
        priority: MID + 2,
        // Not `DistNetworkError` alone: c10d raises it from its store's sockets (c10d Utils.hpp
        // `sendBytes`/`recvBytes`, socket.cpp), so "DistNetworkError: Connection reset by peer"
        // is the store's connection, which `c10d_store_connect_failed` names.
        requires_any: &[
            "NCCL",
            "nccl",
            "gloo",
            "c10d",
            "ProcessGroup",
            "socketProgress",
        ],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // An InfiniBand verbs call on NCCL's data path failed: "NCCL WARN Call to ibv_reg_mr
        // failed with error Cannot allocate memory", "Call to ibv_modify_qp failed with 110
        // Connection timed out, …", "Call to ibv_create_qp failed" (src/misc/ibvwrap.cc), each
        // followed by ncclSystemError. Calls made while probing devices at start-up
        // (ibv_open_device, ibv_fork_init, ibv_query_*) and the optional ECE calls are left out:
        // NCCL warns and goes on without them. The rest follow the wrappers of ibvwrap.cc that
        // return ncclSystemError on the data path (memory registration, queue pairs, completion
        // queues, protection domains).
        name: "nccl_ib_verbs_failed",
        // Keyed on "<call> failed", which the gate's ` failed` anchor covers.
        literals: &[
            "ibv_reg_mr failed",
            "ibv_reg_mr_iova2 failed",
            "ibv_reg_dmabuf_mr failed",
            "ibv_dereg_mr failed",
            "ibv_modify_qp failed",
            "ibv_create_qp failed",
            "ibv_create_cq failed",
            "ibv_alloc_pd failed",
            "ibv_post_send failed",
            "ibv_post_recv failed",
        ],
        kind: Kind::NcclError,
        category: "nccl_unhandled_system_error",
        blame: Blame::Unknown,
        hint: "An InfiniBand verbs call failed on NCCL's data path: check the HCA and its port \
               (ibstat), the locked-memory limit (ulimit -l; ibv_reg_mr failing with \
               \"Cannot allocate memory\"), and GPUDirect RDMA (nvidia-peermem) on both peers.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // The same wrapper when moving a queue pair to its connected state timed out ("NCCL WARN
        // Call to ibv_modify_qp failed with error Connection timed out", older "… failed with
        // 110 Connection timed out"): the peer's HCA never answered the connection, which is a
        // fabric or addressing problem (RoCE GID index, subnet, a port that is down), not a
        // failed transfer.
        name: "nccl_ib_connect_timeout",
        literals: &["ibv_modify_qp failed"],
        kind: Kind::NcclError,
        category: "nccl_ib_connect_timeout",
        blame: Blame::Unknown,
        hint: "NCCL timed out connecting an InfiniBand/RoCE queue pair to a peer: check that both \
               HCAs' ports are up (ibstat), that the peers can reach each other on that fabric, \
               and on RoCE the GID index (NCCL_IB_GID_INDEX, show_gids) and the VLAN/subnet; \
               NCCL_IB_HCA can exclude a port that is down.",
        priority: HIGH + 1,
        requires_any: &["Connection timed out", "ETIMEDOUT"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // NCCL's topology check when NVML reports peer access disabled between two GPUs that
        // NVLink connects: "P2P is disabled between NVLINK connected GPUs 1 and 0. This should
        // not be the case given their connectivity, and is probably due to a hardware issue. …"
        // (src/graph/paths.cc, followed by `return ncclUnhandledCudaError`; the generated WARN
        // catalog reads that site as one NCCL goes on from, because the branch before it sets
        // the pair to no-P2P when NCCL_IGNORE_DISABLED_P2P is set). A link that is down, or on
        // NVSwitch systems a GPU the fabric manager has not admitted to the fabric.
        name: "nccl_nvlink_p2p_disabled",
        literals: &["P2P is disabled between NVLINK connected GPUs"],
        kind: Kind::NcclError,
        category: "nccl_nvlink_p2p_disabled",
        blame: Blame::Hardware,
        hint: "NVML reports peer access disabled between two NVLink-connected GPUs, and NCCL \
               stops: check the links (nvidia-smi nvlink -s), on NVSwitch systems the fabric \
               manager and the GPUs' fabric state (nvidia-smi -q, Fabric), and the kernel log for \
               NVLink Xids; drain the node until it is fixed. NCCL_IGNORE_DISABLED_P2P=1 only \
               hides the check.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // NCCL's bootstrap found no interface to use (src/bootstrap.cc, "Bootstrap : no socket
        // interface found", returning ncclInvalidUsage): NCCL_SOCKET_IFNAME names an interface
        // this host or container does not have, or only loopback and docker bridges exist.
        name: "nccl_bootstrap_no_socket_interface",
        literals: &["NCCL WARN Bootstrap : no socket interface found"],
        kind: Kind::NcclError,
        category: "nccl_bootstrap_no_socket_interface",
        blame: Blame::Application,
        hint: "NCCL found no network interface for its bootstrap: set NCCL_SOCKET_IFNAME to an \
               interface that exists on every host (ip -br addr; in a container, the pod's own \
               interface, or run with host networking), or unset it to let NCCL choose.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // NCCL's socket layer could not bind to the address it chose (include/socket.h, "Call to
        // bind failed : Cannot assign requested address"): the interface's address is not this
        // host's (a docker bridge address, a stale NCCL_SOCKET_IFNAME).
        name: "nccl_socket_bind_failed",
        literals: &["Call to bind failed"],
        kind: Kind::NcclError,
        category: "nccl_socket_bind_failed",
        blame: Blame::Application,
        hint: "NCCL could not bind a socket to the interface it chose: point NCCL_SOCKET_IFNAME \
               at an interface whose address belongs to this host and that the peers can reach \
               (not a docker bridge), or run the containers with host networking.",
        priority: HIGH,
        requires_any: &["NCCL WARN", "socket.h", "socket.cc"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // Horovod's stall inspector (horovod/common/stall_inspector.cc): "One or more tensors were
        // submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for
        // remainder of ranks for more than 60 seconds. …", then the stalled tensors and the
        // ranks that did not submit them. Past HOROVOD_STALL_SHUTDOWN_TIME_SECONDS it shuts the
        // job down.
        name: "horovod_stall",
        literals: &["are waiting for remainder of ranks"],
        kind: Kind::NcclError,
        category: "horovod_stall",
        blame: Blame::Unknown,
        hint: "Some ranks submitted a collective that the others never did: the missing ranks \
               (listed after the warning) are stuck, dead, or run a different code path \
               (a data-dependent branch, an uneven last batch). Check those ranks' logs and nodes \
               first.",
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // Horovod's error for an operation after the job shut down (horovod/common/common.h,
        // `SHUT_DOWN_ERROR`): "Horovod has been shut down. This was caused by an exception on one
        // of the ranks or an attempt to allreduce, allgather or broadcast a tensor after one of
        // the ranks finished execution. …". The cause is another rank's.
        name: "horovod_shutdown",
        literals: &["after one of the ranks finished execution"],
        kind: Kind::NcclError,
        category: "horovod_shutdown",
        blame: Blame::Unknown,
        hint: "Horovod shut down because a rank raised an exception or finished early: find the \
               first rank's exception before the first shutdown message, or make every rank run \
               the same number of steps.",
        priority: MID,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "nccl_ib_completion_error",
        // NCCL net_ib.cc: "NET/IB : Got completion from peer %s with error %d, opcode %d, len %d,
        // vendor err %d" (2.x), older "NET/IB : Got completion with error %d, opcode %d, …". NCCL
        // prints them under `NCCL WARN`, but launchers and log shippers often strip that prefix.
        literals: &["Got completion from peer", "Got completion with error"],
        kind: Kind::NcclError,
        category: "nccl_ib_completion_error",
        blame: Blame::Hardware,
        hint: IB_COMPLETION_HINT,
        priority: HIGH,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // Titles shorten the same message: "NCCL WARN NET/IB Got completion error 12". Those
        // words are any completion queue's (storage and RPC clients print them), so the line
        // must name NCCL or InfiniBand.
        name: "nccl_ib_completion_error_short",
        literals: &["Got completion error"],
        kind: Kind::NcclError,
        category: "nccl_ib_completion_error",
        blame: Blame::Hardware,
        hint: IB_COMPLETION_HINT,
        priority: HIGH,
        requires_any: &["NET/IB", "NCCL", "nccl", "ibv", "InfiniBand", "RoCE"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "nccl_connection_refused",
        literals: &["Connection refused"],
        kind: Kind::NcclError,
        category: "nccl_connection_refused",
        blame: Blame::Unknown,
        hint: "A rank could not connect to a peer: the peer died or a firewall/interface choice \
               blocks it (NCCL_SOCKET_IFNAME).",
        // Above `c10d_store_connect_failed` and the rendezvous errors, so the socket error the
        // store or rendezvous names keeps its family.
        priority: MID + 2,
        // NCCL's socket layer without an `NCCL` tag on the line: "include/socket.h:185 WARN Call
        // to connect failed : Connection refused", "socketPollConnect: connect to … returned
        // Connection refused" (misc/socket.cc).
        requires_any: &[
            "NCCL",
            "nccl",
            "c10d",
            "TCPStore",
            "client socket",
            "socket.h",
            "socket.cc",
            "socketPollConnect",
            "WARN Call to connect",
            "DistNetworkError",
            // NCCL's socket layer on a transfer: "Net : Call to recv from 10.0.0.2<56843>
            // failed : Connection refused" (misc/socket.cc, `ncclSocketProgressOpt`).
            "Call to recv from",
            "Call to send to",
        ],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // torch/csrc/distributed/c10d/socket.cpp ("The client socket has failed to connect to any
        // network address of (host, port)", "The client socket has timed out after …", "The
        // server socket has failed to listen on any local network address") and TCPStore.cpp
        // ("Timed out after N seconds waiting for clients", the store's own `DistStoreError`).
        name: "c10d_store_connect_failed",
        literals: &[
            "has failed to connect to any network address",
            "The client socket has timed out after",
            // PyTorch 1.x's c10d TCPStore client ("RuntimeError: Socket Timeout").
            "Socket Timeout",
            // PyTorch 1.x's TCPStore client connect (c10d Utils.cpp, `tcputil::connect`):
            // "connect() timed out. Original timeout was 60000 ms."
            "connect() timed out. Original timeout was",
            // torch.distributed's exception classes for the store and its sockets
            // (torch/distributed/__init__.py). c10d raises `DistNetworkError` from the store's
            // own sockets, so its "Connection reset by peer" is the store's; a socket error on a
            // line that names NCCL, Gloo, c10d or ProcessGroup, and "Connection refused", rank
            // higher.
            "DistNetworkError",
            "DistStoreError",
        ],
        kind: Kind::NcclError,
        category: "c10d_store_connect_failed",
        blame: Blame::Unknown,
        hint: "A rank could not reach the job's c10d TCPStore, or the store reset its connection: \
               the host of rank 0 (MASTER_ADDR) died, has not started or is overwhelmed by ranks \
               connecting at once, or MASTER_ADDR/MASTER_PORT, DNS or a firewall is wrong; check \
               the rank that hosts the store first.",
        priority: MID,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // init_process_group's barrier over the store (torch/distributed/distributed_c10d.py,
        // `_store_based_barrier`, PyTorch 1.x–2.x): every rank adds one to a store key and waits
        // until the count reaches the world size: "Timed out initializing process group in store
        // based barrier on rank: 3, for key: store_based_barrier_key:1 (world_size=8,
        // worker_count=4, timeout=0:30:00)". The store answered, so the connection worked; the
        // ranks did not all arrive. A title may quote the message's opening words only ("Timed
        // out initializing process group with --num_nodes=2").
        name: "c10d_store_barrier_timeout",
        literals: &["Timed out initializing process group"],
        kind: Kind::NcclError,
        category: "c10d_store_barrier_timeout",
        blame: Blame::Unknown,
        hint: "Not every rank reached init_process_group's store-based barrier in time: compare \
               worker_count with world_size in the message. Fewer means some ranks crashed or \
               hang before init_process_group (read their logs) or fewer processes started than \
               world_size; more means ranks of another run or process group share the store \
               (a stale MASTER_PORT, or world_size set lower than the ranks started).",
        priority: MID + 1,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // The store's server could not take its port (torch/csrc/distributed/c10d/socket.cpp):
        // "The server socket has failed to listen on any local network address. The server
        // socket has failed to bind to [::]:29500 (errno: 98 - Address already in use)."
        name: "c10d_store_bind_failed",
        literals: &[
            "has failed to listen on any local network address",
            "The server socket has failed to bind to",
        ],
        kind: Kind::NcclError,
        category: "c10d_store_bind_failed",
        blame: Blame::Unknown,
        hint: "The c10d TCPStore could not listen on MASTER_PORT on the rank-0 host: another \
               process holds the port (a leftover run, or two jobs with the same MASTER_PORT on \
               one node). Pick a free port (torchrun --master-port, or --rdzv-endpoint \
               host:0 with c10d rendezvous) or end the stale process.",
        // Above `c10d_store_connect_failed`, whose exception class may head the same line.
        priority: MID + 1,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // The store's server waited for every rank to connect (TCPStore.cpp, the server side of
        // `TCPStore::waitForWorkers`): "Timed out after 901 seconds waiting for clients. 1/2
        // clients joined."
        name: "c10d_store_wait_clients_timeout",
        literals: &["seconds waiting for clients"],
        kind: Kind::NcclError,
        category: "c10d_store_wait_clients_timeout",
        blame: Blame::Unknown,
        hint: STORE_WAIT_HINT,
        priority: MID + 1,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // The same wait as PyTorch 2.2 and later word it (pytorch/pytorch#111805, TCPStore.cpp
        // `waitForWorkers`): "Timed out after 6 seconds waiting for workers. 1/2 workers
        // joined." The words alone are any pool's, so the count's tail must follow.
        name: "c10d_store_wait_workers_timeout",
        literals: &["seconds waiting for workers"],
        kind: Kind::NcclError,
        category: "c10d_store_wait_clients_timeout",
        blame: Blame::Unknown,
        hint: STORE_WAIT_HINT,
        priority: MID + 1,
        requires_any: &[" workers joined"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // A rank fetching the NCCL unique id that rank 0 publishes in the store gave up waiting
        // (ProcessGroupNCCL.cpp, `broadcastUniqueNCCLID`): "[1] is setting up NCCL communicator
        // and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but
        // store->get('0') got error: wait timeout after 600000ms" (PyTorch 1.x spelled it
        // "retreiving" and ended "got exception: Socket Timeout"). Rank 0 never reached its
        // first collective, or reached it with another process group. Keyed on the store's
        // timeout (`doWait`'s "wait timeout after …", the 1.x client's "Socket Timeout") with
        // the unique id on the line: another error of the same fetch has its own row.
        name: "c10d_store_get_timeout",
        // The store's own wording when its wait ran out: "store->get('0') got error: Timeout
        // waiting for key: default_pg/0/0 after 1800000 ms" (TCPStore.cpp, `doWait`, releases of
        // 2022).
        literals: &[
            "wait timeout after",
            "Socket Timeout",
            "Timeout waiting for key",
        ],
        kind: Kind::NcclError,
        category: "c10d_store_get_timeout",
        blame: Blame::Unknown,
        hint: "This rank waited for rank 0 to publish the NCCL unique id and timed out: rank 0 \
               died, is stuck before its first collective, or the ranks disagree on the \
               process group or collective order. Look at rank 0's log first.",
        priority: MID + 2,
        requires_any: &["ncclUniqueId"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // A store client lost its connection mid-run (TCPStore.cpp's `receiveValue`: "[c10d]
        // recvValue failed on SocketImpl(fd=76, addr=…, remote=…:29500): Connection reset by
        // peer", or c10d's Utils.hpp "Failed to recv, got 0 bytes. Connection was likely closed.
        // Did the remote server shutdown or crash?"): the store's host process is gone.
        name: "c10d_store_recv_failed",
        literals: &[
            "recvValue failed on",
            // The store client's sibling that reads a list (TCPStore.cpp, `recvVector`).
            "recvVector failed on",
            "Connection was likely closed. Did the remote server shutdown or crash",
            // ProcessGroupNCCL's heartbeat monitor reading the store: "Failed to check the
            // \"should dump\" flag on TCPStore, (maybe TCPStore server has shut down too early),
            // with error: Connection reset by peer" (ProcessGroupNCCL.cpp).
            // Keyed on the message's tail, which the gate's ` error` anchor covers.
            "server has shut down too early), with error",
        ],
        kind: Kind::NcclError,
        category: "c10d_store_recv_failed",
        blame: Blame::Unknown,
        hint: C10D_STORE_RECV_HINT,
        // Above `nccl_peer_connection_closed`, whose socket error ends the same line.
        priority: MID + 3,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // ProcessGroupNCCL's monitor reading the job's store fails with the socket's error glued
        // to its own sentence: "Failed to get exception dump flag from the global store.Connection
        // reset by peer" (ProcessGroupNCCL.cpp, `heartbeatMonitor`, which appends `e.what()`).
        // The socket error is the store's connection, not a peer rank's, so this row outranks
        // `nccl_peer_connection_closed` where the line names the store it read.
        name: "c10d_store_read_socket_error",
        literals: &["Connection reset by peer", "Connection closed by peer"],
        kind: Kind::NcclError,
        category: "c10d_store_recv_failed",
        blame: Blame::Unknown,
        hint: C10D_STORE_RECV_HINT,
        priority: MID + 3,
        requires_any: &["global store.Connection", "global store. Connection"],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // PyTorch 1.x's c10d raised its store sockets' errors as a bare RuntimeError (c10d
        // Utils.hpp `recvBytes`/`sendBytes` throwing `std::system_error`): a traceback through
        // `init_process_group` or the store-based barrier ends in "RuntimeError: Connection reset
        // by peer", or its send side's "RuntimeError: Broken pipe". Any Python program raises the
        // same words, so
        // the incident engine keeps this row's line only right after a traceback whose frames
        // are in `torch/distributed/` ([`SOCKET_ERROR_IN_C10D_TRACEBACK`]).
        name: SOCKET_ERROR_IN_C10D_TRACEBACK,
        literals: &[
            "RuntimeError: Connection reset by peer",
            "RuntimeError: Broken pipe",
        ],
        kind: Kind::NcclError,
        category: "c10d_store_recv_failed",
        blame: Blame::Unknown,
        hint: C10D_STORE_RECV_HINT,
        // Below every row that the line's own words name (NCCL, Gloo, c10d, ProcessGroup).
        priority: MID + 1,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // torch.distributed.elastic's rendezvous errors (torch/distributed/elastic/rendezvous/
        // api.py): `RendezvousConnectionError` ("The connection to the C10d store has failed",
        // c10d_rendezvous_backend.py; the etcd backend raises it too), `RendezvousTimeoutError`,
        // `RendezvousClosedError`.
        name: "rendezvous_connection_failed",
        literals: &[
            "The connection to the C10d store has failed",
            "RendezvousConnectionError",
            "RendezvousClosedError",
        ],
        kind: Kind::NcclError,
        category: "rendezvous_connection_failed",
        blame: Blame::Unknown,
        hint: "torchrun's rendezvous failed: its backend (the c10d store or etcd endpoint in \
               --rdzv-endpoint) is unreachable, or not every node joined within the rendezvous \
               timeout; check the endpoint host and that all nodes started.",
        // Above `c10d_store_connect_failed`: a line that names both ("RendezvousConnectionError
        // / DistNetworkError (Connection reset by peer)") is about the rendezvous. Below the
        // socket errors that name NCCL, Gloo or c10d (MID + 2).
        priority: MID + 1,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        // `RendezvousTimeoutError` (torch/distributed/elastic/rendezvous/api.py), raised when
        // not enough nodes joined within `--rdzv-conf join_timeout` (dynamic_rendezvous.py) or
        // the store did not answer in time; not a broken connection.
        name: "rendezvous_timeout",
        literals: &["RendezvousTimeoutError"],
        kind: Kind::NcclError,
        category: "rendezvous_timeout",
        blame: Blame::Unknown,
        hint: "torchrun's rendezvous timed out: not every node joined within the join timeout \
               (--nnodes larger than the nodes that started, a node stuck before torchrun, or a \
               slow or unreachable --rdzv-endpoint); check that all nodes started and reach the \
               endpoint.",
        priority: MID,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
    HeadlineRule {
        name: "nccl_error_generic",
        literals: &[
            "NCCL error",
            // PyTorch before 1.1: "NCCL Error 2: unhandled system error" (THD / c10d
            // NCCLUtils.hpp), with the `ncclGetErrorString` text that the rows above key on.
            "NCCL Error",
            // ProcessGroupNCCL.cpp ncclCommWatchdog: the watchdog's exception, whose own text
            // (a CUDA error, a timeout) usually names a more specific family on the same line
            // ("NCCL watchdog thread …" before 2.3, "Process group watchdog thread …" since).
            "watchdog thread terminated with exception",
        ],
        kind: Kind::NcclError,
        category: "unknown",
        blame: Blame::Unknown,
        hint: "An NCCL collective failed: rerun with NCCL_DEBUG=INFO and find the first failing \
               rank.",
        priority: GENERIC,
        requires_any: &[],
        refines: &[],
        guard: None,
    },
];

/// `ncclGetErrorString`'s sentences (NCCL src/init.cc), each with the row that names its family,
/// for a wrapper that prints the sentence after words of its own: TensorRT-LLM's `NCCLCHECK`
/// ("Failed, NCCL error cpp/tensorrt_llm/plugins/ncclPlugin/allreducePlugin.cpp:183 'internal
/// error'", tensorrt_llm/common/cudaUtils.h). Read only on a line that the generic NCCL row
/// matched and no specific row did; the sentences are lowercase in every NCCL 2 release.
pub const NCCL_RESULT_TEXT: [(&str, &str); 6] = [
    ("unhandled cuda error", "nccl_unhandled_cuda_error"),
    ("unhandled system error", "nccl_unhandled_system_error"),
    ("internal error", "nccl_internal_error"),
    ("invalid usage", "nccl_invalid_usage"),
    ("remote process exited", "nccl_remote_error"),
    ("invalid argument", "nccl_invalid_argument"),
];

/// Literals that only mark a line as belonging to an open failure (hint and teardown lines).
/// They never open an incident, so they are not gate literals: such lines are inspected only in
/// the follow window of a gated line.
pub const CONTINUATION_LITERALS: &[&str] = &[
    "CUDA kernel errors might be asynchronously reported",
    "CUDA_LAUNCH_BLOCKING",
    "TORCH_USE_CUDA_DSA",
    "device-side assertion",
    "Search for `cuda",
    "terminate called",
    "what():",
    "frame #",
    "Exception raised from",
    "CUDA_LOG_FILE",
    "detected by watchdog",
    "To avoid data inconsistency",
    // Open MPI's "mpirun noticed that process rank …" has no anchor of its own: it opens an
    // incident (`MPI_SUMMARIES`) where the line passes the gate for other words.
    MPI_SUMMARIES[0],
    // The fields of torchrun's ChildFailedError summary (`_FAILURE_FORMAT_TEMPLATE` in
    // torch/distributed/elastic/multiprocessing/errors/__init__.py).
    "host      : ",
    "(local_rank: ",
    "exitcode  : ",
    "error_file: ",
];

/// Lines of torchrun's `ChildFailedError` summary that open its root-cause section. They join
/// the open incident like continuations, but they pass the gate so that the field lines after
/// them (see [`CONTINUATION_LITERALS`]) are inspected.
pub const SUMMARY_LITERALS: &[&str] = &[
    "ChildFailedError",
    "Root Cause (first observed failure)",
    // The elastic agent's log line just before the summary: "api.py:869] failed (exitcode: -6)
    // local_rank: 0 (pid: 218624) of binary: /usr/bin/python" (torch/distributed/elastic/
    // multiprocessing/api.py). Keyed with the space before it, which the gate's ` failed`
    // anchor covers, and in Python's bare logging format (`ERROR:torch.distributed.elastic.
    // multiprocessing.api:failed (exitcode: -6) …`), where a colon comes before it.
    " failed (exitcode: ",
    ":failed (exitcode: ",
    // One failure's record with the summary's newlines lost ("… exitcode : -6 (pid: 189)
    // error_file: <N/A> traceback : …", detect::elastic::parse_all): only there does a value's
    // closing parenthesis come right before `error_file`.
    ") error_file: ",
    // A failed process's record without its header: its last field, "traceback : To enable
    // traceback see: https://pytorch.org/docs/stable/elastic/errors.html" (the engine checks the
    // field's shape; detect::elastic::record_traceback_field).
    "elastic/errors.html",
    // Other launchers' summaries of a failed rank (`MPI_SUMMARIES`): Open MPI's two and
    // Horovod's, which share one anchor ("non-zero").
    MPI_SUMMARIES[1],
    MPI_SUMMARIES[2],
];

/// Open MPI's (`mpirun`, and PRRTE's `prterun` in Open MPI 5) summaries of a failed rank, from
/// its help texts (orte/tools/orterun/help-orterun.txt, prrte's help-prterun.txt): "mpirun
/// noticed that process rank 3 with PID 1167 on node n2 exited on signal 11 (Segmentation
/// fault).", "Primary job terminated normally, but 1 process returned / a non-zero exit code.
/// Per user-direction, the job has been aborted." and "mpirun detected that one or more processes
/// exited with non-zero status, thus causing / the job to be terminated."; Horovod's launcher
/// raises the last one's words (horovod/runner/gloo_run.py: "Horovod detected that one or more
/// processes exited with non-zero status, thus causing the job to be terminated."). The first
/// has no gate anchor of its own and is a [`CONTINUATION_LITERALS`] entry; the other two are
/// [`SUMMARY_LITERALS`]. The engine opens an `mpirun_job_aborted` incident on one where no
/// failure came before it (incidents::engine::evidence).
pub const MPI_SUMMARIES: [&str; 3] = [
    "noticed that process rank",
    "non-zero exit code. Per user-direction",
    "exited with non-zero status, thus causing",
];

/// How lines name CUTLASS, which its status texts need beside them.
pub const CUTLASS_NAMES: [&str; 3] = ["cutlass", "CUTLASS", "Cutlass"];

/// CUTLASS's status texts (`cutlassGetStatusString`, include/cutlass/cutlass.h), but `Success`
/// and `Invalid status`; `cuda_catalog` maps each to its family.
pub const CUTLASS_STATUS_TEXTS: [&str; 10] = [
    "Error Misaligned Operand",
    "Error Invalid Data Type",
    "Error Invalid Layout",
    "Error Invalid Problem",
    "Error Not Supported",
    "Error Workspace Null",
    "Error Internal",
    "Error Insufficient Driver",
    "Error Architecture Mismatch",
    "Error Memory Allocation failed",
];

/// Literals that a numeric blow-up line must contain (case-sensitive): a non-finite token in
/// value position after `:`, `=`, `is` or a bare key, a non-finite tensor, or a loss scaler's
/// message. `detect::numeric` then decides whether the key is a loss, a gradient norm or a loss
/// scale. Kept specific so ordinary `loss=` progress lines never reach the regexes.
pub const NUMERIC_LITERALS: &[&str] = &[
    "non-finite",
    // Stable Baselines' `VecCheckNan` and ML-Agents' observation check (`numeric`).
    "found nan in ",
    "found inf in ",
    "had a NaN observation",
    "had a NaN reward",
    "NaN or Inf found in input tensor",
    ": nan",
    ":nan",
    "=nan",
    "= nan",
    "=-nan",
    ": -nan",
    "is nan",
    // `oss …` rather than `loss …`: the key may be capitalised (`Loss nan`).
    "oss nan",
    "norm nan",
    ": NaN",
    "=NaN",
    "= NaN",
    "is NaN",
    ": inf",
    "=inf",
    "= inf",
    ": -inf",
    "=-inf",
    "is inf",
    "oss inf",
    "norm inf",
    ": Inf",
    "=Inf",
    ": NAN",
    // The JVM's and JavaScript's `NaN`/`Infinity` and C's `%F` `NAN` in the bare and verbal
    // forms (numeric.rs's TOKEN). (`INF` alone is left out: its anchor would start like the
    // `INFO` of ordinary log lines.)
    "is Infinity",
    "is NAN",
    // OpenMM's check of the positions it writes (numeric.rs).
    "position is infinite",
    "oss NaN",
    "oss NAN",
    "oss Infinity",
    "norm NaN",
    "norm NAN",
    "\"nan\"",
    "\"inf\"",
    // Python's repr of a dict with string values (`'loss': 'nan'`, PaddleDetection's log), and
    // an infinite value glued to its key as `:nan` is (`loss:inf`).
    "'nan'",
    ":inf",
    // A value between column paddings (a YOLO trainer's progress row).
    " nan ",
    "(nan)",
    "(inf)",
    " nan,",
    " nan]",
    // A fetched value printed as the array it is (PaddlePaddle's `loss: [nan]`, a script's
    // `print("loss", loss.numpy())`; numpy's padded `[ nan]` passes on ` nan`). `[inf` is left
    // out: its anchor would also pass every `[info]` tag.
    "[nan",
    // A bracketed key: `| [Loss] nan |` (loguru tables).
    "] nan",
    "] NaN",
    "] inf",
    " inf,",
    "tensor(nan",
    "tensor(inf",
    "tensor(-inf",
    "infinite or NaN",
    "NaN or Inf",
    "Inf or NaN",
    "loss scale to",
    "loss_scale to",
    // A scale printed as a metric (numeric.rs's `scale_metric`).
    "loss_scale=",
    "loss_scale:",
    // fairseq's `| loss_scale 0.000 |` (its simple progress format: key, space, value).
    "loss_scale ",
    // Capitalised at the start of a warning (`Non-finite norm encountered`), and autograd's
    // anomaly-mode check (numeric.rs).
    "Non-finite",
    "returned nan values in its",
    // The runtimes' own non-finite checks (numeric.rs): TensorFlow, Megatron-LM, Keras'
    // TerminateOnNaN and MindSpore ("Invalid loss, terminating training"), Lightning ("Detected
    // nan and/or inf values in …"); JAX's "invalid value (nan) encountered in" passes `(nan)`.
    "Invalid loss, terminating",
    "nan and/or inf values",
    // A NaN at the end of a sentence that tells what became of a value ("the training loss
    // became NaN", "grad_norm is always nan": numeric.rs's `changed_state`). The gate's own
    // anchors, so only lines that pass it for them reach the regexes; `inf` stays out, as
    // ` info` and ` infer` would bring every INFO line.
    " nan",
    " NaN",
    " NAN",
    // A value padded into a fixed-width column (`loss        nan`, numeric.rs's `bare`).
    "  nan",
    "  NaN",
    "  inf",
    // Chinese reports join key and value with a copula (`loss为 nan`, `loss是 nan`). The
    // spaceless `loss为nan` would cost a gate anchor of its own and is left out.
    "为 nan",
    "是 nan",
    // A value quoted as a title quotes it ('Average loss approaches to "-nan"').
    "\"-nan\"",
    "'-nan'",
    // torch.distributions rejecting a NaN parameter (numeric.rs's `RUNTIME_CHECKS`).
    "but found invalid values",
    "has invalid values",
    "NanLossDuringTrainingError",
    "oss in not finite",
    "oss is not finite",
    "Tensor had NaN values",
    "Tensor had Inf values",
    // A model's non-finite output (numeric.rs's `nan_output` checks).
    " NaNs was produced in",
    " NaN's was produced in",
    "Error: probability tensor contains either",
    "Model diverged with loss = NaN",
    // NumPy's warning when a cast to integers meets NaN or inf (numeric.rs's `RUNTIME_CHECKS`).
    "invalid value encountered in cast",
    // A glog value after a spaced `=` (Caffe's solver: "Iteration 100, loss = -nan").
    "= -nan",
    "found NaN in local",
    "found Inf in local",
    // Megatron-LM's result validation: "Unexpected result nan (message='…')" (numeric.rs).
    "Unexpected result nan",
    "Unexpected result inf",
    "Unexpected result -inf",
    "loss_scale':",
    "loss_scale\":",
    "reducing to ",
    // Also capitalised where a report quotes it ("DeepSpeed提示Loss scale already at minimum").
    "oss scale already at minimum",
    "Minimum loss scale reached",
    "FloatingPointError: Minimum loss",
    // k2/icefall's trainers stop when the AMP grad scaler's scale falls below 1e-5 (numeric.rs's
    // `SCALER_CHECKS`).
    "rror: grad_scale is too small",
    // fairseq's trainer and NaN detector, torch.normal's check of its standard deviation,
    // torch.distributions' parameter check, and physics engines whose state went non-finite
    // (numeric.rs's `RUNTIME_CHECKS`).
    "Error: gradients are Nan/Inf",
    " NaN detected in output of",
    " Inf detected in output of",
    "Error: normal expects",
    "Error: Expected parameter ",
    "Nan, Inf or huge value in ",
    "Particle coordinate is nan",
    "Particle coordinate is NaN",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_names_are_unique_and_snake_case() {
        let mut names: Vec<_> = HEADLINE_RULES.iter().map(|r| r.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
        for n in names {
            assert!(
                n.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{n}"
            );
        }
    }

    #[test]
    fn every_literal_is_long_enough_for_the_prefilter() {
        for r in HEADLINE_RULES {
            for l in r.literals.iter().chain(r.refines) {
                assert!(l.len() >= 4, "{}: {l:?}", r.name);
            }
        }
        for l in NUMERIC_LITERALS
            .iter()
            .chain(CONTINUATION_LITERALS)
            .chain(SUMMARY_LITERALS)
        {
            assert!(l.len() >= 4, "{l:?}");
        }
    }
}
