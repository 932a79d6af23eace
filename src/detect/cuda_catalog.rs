//! The CUDA error catalog, built into the binary: an error's name or message → its family.
//!
//! `cuda_errors.tsv` lists the CUDA runtime's `cudaError_t` values with the driver API's
//! `CUresult` twin where there is one, the text `cudaGetErrorString` / `cuGetErrorString` return
//! for them, and this project's family, blame and hint. Codes, names and meanings are NVIDIA's
//! (CUDA Runtime API, "Data types used by CUDA Runtime", enum `cudaError`; CUDA Driver API, enum
//! `CUresult`; the messages as the CUDA 13.2 runtime's `cudaGetErrorString` returns them). The
//! values the runtime API marks deprecated (texture references, the profiler's start and stop,
//! `cudaErrorInvalidPitchValue` …) are kept with the messages the runtimes that returned them
//! print, since builds linked against them still run (`CUDA error 12 at ggml-cuda.cu:…: invalid
//! pitch argument`). The families and hints are this project's reading of them. A hint of `-` means a
//! headline row of `detect::rules` owns the family and its hint.
//!
//! The catalog names no gate anchors of its own. It refines a line that a generic CUDA row
//! (`CUDA error: `, `cuda runtime error (`, `cudaError…`, `CUDA_ERROR_…`, `THCudaCheck FAIL`, glog's
//! `== cudaSuccess (`) already brought to inspection, so that every value of the enum — not only
//! the ones reports have shown so far — gets its own family instead of `unknown`. Status names of
//! the CUDA math libraries (`CUBLAS_STATUS_…`, `CUDNN_STATUS_…`, `CUSOLVER_STATUS_…`,
//! `CUSPARSE_STATUS_…`, `CURAND_STATUS_…`, cuFFT's `CUFFT_…`) are refined the same way, by a rule
//! rather than a list: the library and the status, lower-cased (`cusolver_execution_failed`).

use super::prose::{cached, window_before};
use crate::detect::rules::{CUTLASS_NAMES, CUTLASS_STATUS_TEXTS, HEADLINE_RULES};
use crate::model::{Blame, Kind};
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex::Regex;
use std::sync::OnceLock;

const TSV: &str = include_str!("cuda_errors.tsv");

/// One value of the CUDA error enums.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaError {
    pub code: u32,
    /// `cudaError…` (runtime API).
    pub runtime_name: &'static str,
    /// `CUDA_ERROR_…` (driver API), when the driver API has the same error.
    pub driver_name: Option<&'static str>,
    /// What `cudaGetErrorString` returns.
    pub message: &'static str,
    pub kind: Kind,
    pub category: &'static str,
    pub blame: Blame,
    /// `None` where a headline row owns the family (its hint applies).
    pub hint: Option<&'static str>,
}

impl CudaError {
    /// The hint to show: the catalog's own, or that of the headline row that owns the family.
    pub fn hint_text(&self) -> Option<&'static str> {
        self.hint.or_else(|| {
            HEADLINE_RULES
                .iter()
                .find(|r| r.kind == self.kind && r.category == self.category)
                .map(|r| r.hint)
        })
    }
}

/// Frameworks' own sentences for some of the same errors, matched like the runtime's messages.
/// PyTorch: c10/cuda/CUDAFunctions.cpp (`device_count_impl`, the `cudaErrorNoDevice`,
/// `cudaErrorUnknown` and `cudaErrorInitializationError` branches). Each is also a literal of the
/// generic CUDA row (or part of one, where the row wants more words around it), so that it opens
/// an incident.
pub const FRAMEWORK_WORDINGS: &[(&str, &str)] = &[
    ("No CUDA GPUs are available", "cudaErrorNoDevice"),
    (
        "CUDA driver initialization failed",
        "cudaErrorInitializationError",
    ),
    // "CUDA unknown error - this may be due to an incorrectly set up environment, …", also where
    // a title or a notebook cut it after its first words ("RuntimeError: CUDA unknown error").
    ("CUDA unknown error", "cudaErrorUnknown"),
    // The CUDA extension wrangler's words for driver results whose enum names its other words
    // do not spell (`cuewErrorString`, extern/cuew/src/cuew.c in Blender, printed by Cycles as
    // "Launch exceeded timeout in cuCtxSynchronize() (…)"). Its "Launch exceeded resources" holds
    // none of the gate's anchors and is left out.
    ("Launch exceeded timeout", "cudaErrorLaunchTimeout"),
    ("Invalid kernel image", "cudaErrorInvalidKernelImage"),
    (
        "Uncorrectable ECC error detected",
        "cudaErrorECCUncorrectable",
    ),
    // llama.cpp's CUDA backend for a build without the GPU's architecture (ggml-cuda's
    // `bad_arch`).
    (
        "was compiled without support for the current GPU architecture",
        "cudaErrorNoKernelImageForDevice",
    ),
];

/// Libraries whose status names refine a generic line, with the prefix their names carry.
const LIBRARY_STATUS_PREFIXES: [(&str, &str); 6] = [
    ("CUBLAS_STATUS_", "cublas_"),
    ("CUDNN_STATUS_", "cudnn_"),
    ("CUSOLVER_STATUS_", "cusolver_"),
    ("CUSPARSE_STATUS_", "cusparse_"),
    ("CURAND_STATUS_", "curand_"),
    ("CUFFT_", "cufft_"),
];

struct Catalog {
    errors: Vec<CudaError>,
    /// Names, messages and framework wordings; pattern `i` belongs to `owner[i]`.
    needles: AhoCorasick,
    owner: Vec<usize>,
}

/// The shorter spellings of a driver API name that programs built on the driver API print:
/// the name without its `CUDA_ERROR_` prefix (`ILLEGAL_ADDRESS in cuMemAlloc(…)`) and that
/// suffix as words (`Illegal address in cuMemcpyDtoH(…)`, the CUDA extension wrangler's
/// `cuewErrorString` used by Blender Cycles and others), and the CamelCase name ManagedCuda's
/// `CUResult` enum gives it (`ErrorIllegalAddress`). Only names of two or more words give
/// them: a single word (`UNKNOWN`, `Timeout`) is too common to name an error by itself.
fn driver_short_forms(driver_name: &str) -> Vec<String> {
    let Some(suffix) = driver_name.strip_prefix("CUDA_ERROR_") else {
        return Vec::new();
    };
    if !suffix.contains('_') {
        return Vec::new();
    }
    let sentence = capitalised(&suffix.replace('_', " "));
    // ManagedCuda's `CUResult` names: `Error` and the words in CamelCase (`ErrorOutOfMemory`).
    let camel: String = std::iter::once("Error".to_owned())
        .chain(suffix.split('_').map(capitalised))
        .collect();
    vec![suffix.to_owned(), sentence, camel]
}

/// `s` in lower case with its first letter in upper case (`OUT OF MEMORY` → `Out of memory`).
fn capitalised(s: &str) -> String {
    let lower = s.to_ascii_lowercase();
    let mut cs = lower.chars();
    cs.next()
        .map(|c| c.to_ascii_uppercase())
        .into_iter()
        .chain(cs)
        .collect()
}

/// The catalog's rows, parsed once.
pub fn errors() -> &'static [CudaError] {
    &catalog().errors
}

fn catalog() -> &'static Catalog {
    static C: OnceLock<Catalog> = OnceLock::new();
    C.get_or_init(|| {
        let errors: Vec<CudaError> = TSV.lines().skip(1).filter_map(parse_row).collect();
        let mut pats: Vec<String> = Vec::new();
        let mut owner = Vec::new();
        for (i, e) in errors.iter().enumerate() {
            for p in [Some(e.runtime_name), e.driver_name, Some(e.message)]
                .into_iter()
                .flatten()
            {
                pats.push(p.to_owned());
                owner.push(i);
            }
            let short = e.driver_name.map(driver_short_forms).unwrap_or_default();
            // HIP's `hipError_t` names are the runtime's `cudaError…` names with `hip` for
            // `cuda` (`hipErrorInvalidDeviceFunction`), or the driver API's in CamelCase where
            // the two APIs differ (`hipErrorOutOfMemory`, `hipErrorInvalidHandle`;
            // hip_runtime_api.h): both spellings are derived here rather than listed.
            let hip = e
                .runtime_name
                .strip_prefix("cuda")
                .into_iter()
                .chain(
                    short
                        .iter()
                        .map(String::as_str)
                        .filter(|f| f.starts_with("Error")),
                )
                .map(|tail| format!("hip{tail}"))
                .collect::<Vec<_>>();
            for p in short.iter().cloned().chain(hip) {
                pats.push(p);
                owner.push(i);
            }
        }
        for (wording, name) in FRAMEWORK_WORDINGS {
            if let Some(i) = errors.iter().position(|e| e.runtime_name == *name) {
                pats.push((*wording).to_owned());
                owner.push(i);
            }
        }
        // Leftmost-longest: `cudaErrorInvalidDeviceFunction` rather than its prefix
        // `cudaErrorInvalidDevice`, "operation not permitted when stream is capturing" rather
        // than "operation not permitted".
        // ASCII case aside: wrappers that print the runtime's message capitalise it ("[CUDA
        // ERROR]: Too many resources requested for launch"); the names differ in more than case.
        let needles = AhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostLongest)
            .ascii_case_insensitive(true)
            .build(&pats);
        match needles {
            Ok(needles) => Catalog {
                errors,
                needles,
                owner,
            },
            // The table is static and its test builds it; an automaton over it cannot fail.
            Err(e) => unreachable!("CUDA error catalog automaton: {e}"),
        }
    })
}

fn parse_row(line: &'static str) -> Option<CudaError> {
    let f: Vec<&'static str> = line.split('\t').collect();
    let [code, runtime_name, driver_name, message, kind, category, blame, hint] = f[..] else {
        return None;
    };
    Some(CudaError {
        code: code.parse().ok()?,
        runtime_name,
        driver_name: (!driver_name.is_empty()).then_some(driver_name),
        message,
        kind: Kind::parse(kind)?,
        category,
        blame: Blame::parse(blame)?,
        hint: (hint != "-").then_some(hint),
    })
}

/// What a generic CUDA line says more precisely.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refined {
    /// A value of the CUDA error enums, by name, message or a framework's wording of it.
    Error(&'static CudaError),
    /// A math library's status (`cusolver_execution_failed`).
    LibraryStatus(String),
}

/// The most specific CUDA error `line` names: a math library's status by number or sentence,
/// else the longest catalog name or message on it, else a math library's status name.
pub fn refine(line: &str) -> Option<Refined> {
    if let Some(e) = code_with_its_words(line) {
        return Some(Refined::Error(e));
    }
    // A math library's status printed by number or in its own sentence is more precise than a
    // runtime message the sentence may contain ("… is not supported").
    if let Some(status) = status_code(line)
        .or_else(|| cublas_status_text(line))
        .or_else(|| jaxlib_status_text(line))
        .or_else(|| cusparse_status_text(line))
        .or_else(|| cutlass_status(line))
        .or_else(|| cudnn_frontend_unsupported(line))
    {
        return Some(Refined::LibraryStatus(status));
    }
    // TensorFlow's "UNKNOWN ERROR (34)" is a value, not the runtime's "unknown error".
    if line.contains("UNKNOWN ERROR (") {
        if let Some(e) = numbered_error(line) {
            return Some(Refined::Error(e));
        }
    }
    let c = catalog();
    let best = c
        .needles
        .find_iter(line)
        .filter(|m| {
            (word_bounded(line, m.start(), m.end())
                || (line[m.start()..m.end()].contains(' ') && emphasised(line, m.start(), m.end())))
                && !compared(line, m.start(), m.end())
        })
        .max_by_key(|m| m.len());
    if let Some(m) = best {
        return Some(Refined::Error(&c.errors[c.owner[m.pattern().as_usize()]]));
    }
    library_status(line)
        .map(Refined::LibraryStatus)
        .or_else(|| numbered_error(line).map(Refined::Error))
        .or_else(|| cut_message(line).map(Refined::Error))
}

/// The error that a title or a sentence gives as "CUDA", its value and some words of its message
/// in parentheses or quotes: "CUDA 700 (illegal memory access) in crb/factor_m CSR path",
/// `crashes with a CUDA 700 "illegal memory access"`. The value alone could be any number; its
/// words, two or more, must all occur in that value's message, in order.
pub fn code_with_its_words(line: &str) -> Option<&'static CudaError> {
    static R: OnceLock<Regex> = OnceLock::new();
    if !line.contains("CUDA ") {
        return None;
    }
    let c = cached(
        &R,
        r#"\bCUDA (?:error )?(\d{1,3}) ?[("'\x{201c}] ?([A-Za-z][A-Za-z ]{3,60}?) ?[)"'\x{201d}]"#,
    )
    .captures(line)?;
    let e = by_value(c[1].parse().ok()?, false)?;
    let words: Vec<String> = c[2]
        .split_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    if words.len() < 2 {
        return None;
    }
    let message = e.message.to_ascii_lowercase();
    let mut at = 0;
    for w in &words {
        let found = message[at..]
            .split(|ch: char| !ch.is_ascii_alphanumeric())
            .position(|m| m == w.as_str())?;
        // Step past the word just found.
        let skip: usize = message[at..]
            .split(|ch: char| !ch.is_ascii_alphanumeric())
            .take(found + 1)
            .map(|m| m.len() + 1)
            .sum();
        at = (at + skip).min(message.len());
    }
    Some(e)
}

/// A checking macro's line that prints the runtime's message right after an error word, with no
/// "CUDA" before it: the `CUDA_CHECK_RETURN` of NVIDIA's Nsight project template and of the
/// libraries that copied it ("Error invalid device ordinal at line 393 in file …/pythonInterface.c",
/// bitsandbytes' csrc), an exception that carries the bare message ("RuntimeError: invalid
/// device ordinal"). The message must follow the error word at once (a number or a colon between
/// them at most) and be a whole catalog message. A message whose words any program could print
/// ("out of memory", "invalid argument", "operation not permitted") counts only where the line
/// has a macro's shape after it: "at line N", or a source file (CUDA, C or C++) and its line.
/// Only lines with "Error" or "error" reach this check: a head in capitals ("ERROR: …") holds no
/// gate anchor.
pub fn message_after_error_word(line: &str) -> bool {
    static HEAD: OnceLock<Regex> = OnceLock::new();
    static WHERE: OnceLock<Regex> = OnceLock::new();
    let head = cached(
        &HEAD,
        r"\b(?:[A-Z][A-Za-z]*)?(?:Error|ERROR)(?:\s+\d{1,4})?\s*[:=]?\s*|\berror(?:\s+\d{1,4})?\s*[:=]?\s*",
    );
    let at_line = cached(
        &WHERE,
        r"^\s*(?:at line \d+|\S+\.(?:cu|cuh|cpp|cc|c|h|hpp)[ :(]\d+)",
    );
    head.find_iter(line).take(8).any(|m| {
        // "CUDA error: …" and "HIP error: …" are the generic rows' (with their guards for
        // code and prose).
        let named = window_before(line, m.start(), 8).to_ascii_lowercase();
        if named.ends_with("cuda ") || named.ends_with("hip ") {
            return false;
        }
        let rest = &line[m.end()..];
        errors().iter().any(|e| {
            let Some(lead) = rest.get(..e.message.len()) else {
                return false;
            };
            if !lead.eq_ignore_ascii_case(e.message)
                || rest[e.message.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
            {
                return false;
            }
            // As printed, with its first letter capitalised, or in capitals; a title's Title
            // Case is not output.
            let first_up = lead.get(1..) == e.message.get(1..)
                && lead.as_bytes().first()
                    == e.message
                        .as_bytes()
                        .first()
                        .map(u8::to_ascii_uppercase)
                        .as_ref();
            let printed =
                lead == e.message || first_up || lead.bytes().all(|b| !b.is_ascii_lowercase());
            if !printed {
                return false;
            }
            let after = &rest[e.message.len()..];
            says_cuda(e.message) || at_line.is_match(after)
        })
    })
}

/// Does a runtime message speak of CUDA's own objects (a device, a kernel, a launch, PTX, a
/// stream …) rather than in words any program prints?
fn says_cuda(message: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    const PLAIN: [&str; 3] = [
        "device not ready",
        "named symbol not found",
        "shared object symbol not found",
    ];
    !PLAIN.contains(&message)
        && cached(
            &R,
            r"(?i)device|kernel|launch|ptx|peer|context|stream|texture|symbol|pitch|ecc|nvlink|cuda|gpu|graph|captur|cooperative|memory access|instruction|address|assert|ordinal|driver|grid|configuration|pointer|channel|surface|__|jit|resource|program counter|hardware|memcpy",
        )
        .is_match(message)
}

/// The headline rows' guard for [`code_with_its_words`].
pub fn names_code_with_its_words(line: &str) -> bool {
    code_with_its_words(line).is_some()
}

/// What comes before a runtime message on a generic line: "CUDA error: an illegal memory access"
/// cut by a title's length, Triton's "Triton Error [CUDA]: …" (triton/backends/nvidia/driver.c,
/// `gpuAssert`, which prints `cuGetErrorString`'s text), a checking macro's "cudaMemcpy(…) failed
/// with error …" (tiny-cuda-nn's `CUDA_CHECK_THROW`).
const MESSAGE_HEADS: [&str; 7] = [
    "Triton Error [CUDA]",
    "CUDA error: ",
    "CUDA Error: ",
    "cuda error: ",
    "HIP error: ",
    "CUDA error ",
    ") failed with error ",
];

/// The error whose message a title or a paste cut short: the words after a [`MESSAGE_HEADS`]
/// prefix start a catalog message and then stop or go elsewhere ("CUDA error: an illegal memory
/// access on vLLM 0.11.2", "CUDA error: device-side assert"). At least three words must agree, or
/// two that end the text; the messages that agree on the most words must all be of one family
/// ("peer access" starts three).
fn cut_message(line: &str) -> Option<&'static CudaError> {
    let (head, at) = MESSAGE_HEADS
        .iter()
        .find_map(|h| line.find(h).map(|at| (h, at)))?;
    let text = line[at + head.len()..].trim_start_matches([':', ' ', '_', '*', '`']);
    let words: Vec<String> = text
        .split_whitespace()
        .take(12)
        .map(|w| {
            w.trim_end_matches([',', '.', ';', ':', '_', '*', '`', '!', '?', ')'])
                .to_ascii_lowercase()
        })
        .collect();
    // A title cut inside a word ("device-side assert trigg"): the text's last word may be the
    // start of the message's word there (two letters at least), where the text ends.
    let ended = text.split_whitespace().nth(words.len()).is_none();
    let last = words.len().wrapping_sub(1);
    let agrees = |i: usize, m: &str, w: &str| {
        m.eq_ignore_ascii_case(w)
            || (ended
                && i == last
                && w.len() >= 2
                && m.len() > w.len()
                && m.get(..w.len()).is_some_and(|p| p.eq_ignore_ascii_case(w)))
    };
    let mut best: Vec<&'static CudaError> = Vec::new();
    let mut most = 0;
    for e in errors() {
        let agree = e
            .message
            .split_whitespace()
            .zip(&words)
            .enumerate()
            .take_while(|&(i, (m, w))| agrees(i, m, w))
            .count();
        if agree == 0 || agree < most {
            continue;
        }
        if agree > most {
            most = agree;
            best.clear();
        }
        best.push(e);
    }
    let first = *best.first()?;
    let ends = words.len() == most;
    let enough = most >= 3 || (most == 2 && ends);
    (enough && best.iter().all(|e| e.category == first.category)).then_some(first)
}

/// A library's status enum: value and the status's name, lower-cased without its prefix.
type StatusTable = &'static [(u32, &'static str)];

/// `cublasStatus_t` by value (cublas_api.h), for wrappers that print the number only.
const CUBLAS_STATUS: StatusTable = &[
    (1, "not_initialized"),
    (3, "alloc_failed"),
    (7, "invalid_value"),
    (8, "arch_mismatch"),
    (11, "mapping_error"),
    (13, "execution_failed"),
    (14, "internal_error"),
    (15, "not_supported"),
    (16, "license_error"),
];

/// `cudnnStatus_t` by value as cuDNN 7 and 8 number it (cudnn.h, cudnn_ops_infer.h); cuDNN 9
/// renumbered its statuses in the thousands, and prints their names.
const CUDNN_STATUS: StatusTable = &[
    (1, "not_initialized"),
    (2, "alloc_failed"),
    (3, "bad_param"),
    (4, "internal_error"),
    (5, "invalid_value"),
    (6, "arch_mismatch"),
    (7, "mapping_error"),
    (8, "execution_failed"),
    (9, "not_supported"),
    (10, "license_error"),
    (11, "runtime_prerequisite_missing"),
    (12, "runtime_in_progress"),
    (13, "runtime_fp_overflow"),
    (14, "version_mismatch"),
];

/// Each library's status table, by the family prefix of [`LIBRARY_STATUS_PREFIXES`].
const STATUS_TABLES: [(&str, StatusTable); 6] = [
    ("cublas_", CUBLAS_STATUS),
    ("cudnn_", CUDNN_STATUS),
    ("cusolver_", CUSOLVER_STATUS),
    ("cusparse_", CUSPARSE_STATUS),
    ("curand_", CURAND_STATUS),
    ("cufft_", CUFFT_RESULT),
];

/// `cufftResult` by value (cufft.h).
const CUFFT_RESULT: StatusTable = &[
    (1, "invalid_plan"),
    (2, "alloc_failed"),
    (3, "invalid_type"),
    (4, "invalid_value"),
    (5, "internal_error"),
    (6, "exec_failed"),
    (7, "setup_failed"),
    (8, "invalid_size"),
    (9, "unaligned_data"),
    (10, "incomplete_parameter_list"),
    (11, "invalid_device"),
    (12, "parse_error"),
    (13, "no_workspace"),
    (14, "not_implemented"),
    (15, "license_error"),
    (16, "not_supported"),
];

/// `cusolverStatus_t` by value (cusolver_common.h).
const CUSOLVER_STATUS: StatusTable = &[
    (1, "not_initialized"),
    (2, "alloc_failed"),
    (3, "invalid_value"),
    (4, "arch_mismatch"),
    (5, "mapping_error"),
    (6, "execution_failed"),
    (7, "internal_error"),
    (8, "matrix_type_not_supported"),
    (9, "not_supported"),
    (10, "zero_pivot"),
    (11, "invalid_license"),
];

/// `cusparseStatus_t` by value (cusparse.h).
const CUSPARSE_STATUS: StatusTable = &[
    (1, "not_initialized"),
    (2, "alloc_failed"),
    (3, "invalid_value"),
    (4, "arch_mismatch"),
    (5, "mapping_error"),
    (6, "execution_failed"),
    (7, "internal_error"),
    (8, "matrix_type_not_supported"),
    (9, "zero_pivot"),
    (10, "not_supported"),
    (11, "insufficient_resources"),
];

/// `curandStatus_t` by value (curand.h).
const CURAND_STATUS: StatusTable = &[
    (100, "version_mismatch"),
    (101, "not_initialized"),
    (102, "allocation_failed"),
    (103, "type_error"),
    (104, "out_of_range"),
    (105, "length_not_multiple"),
    (106, "double_precision_required"),
    (201, "launch_failure"),
    (202, "preexisting_failure"),
    (203, "initialization_failed"),
    (204, "arch_mismatch"),
    (999, "internal_error"),
];

/// Wrappers that print a math library's status as a number: the text that heads the message,
/// the text right before the number (empty when the head ends there) and the library's family
/// prefix, whose enum [`STATUS_TABLES`] holds:
/// - DeepSpeed's cuBLAS wrappers: "!!!! kernel execution error. (m: 1280, n: 3075, k: 5120,
///   error: 13)" (csrc/includes/cublas_wrappers.h and its .cu);
/// - PaddlePaddle's `PADDLE_ENFORCE_GPU_SUCCESS`: "CUBLAS error(13).", "CUFFT error(5).",
///   "CUSOLVER error(7).", "CUSparse error(3).", "CURAND error(102)." (paddle/phi/core/
///   enforce.h, `build_nvidia_error_msg`; the status's name follows on a `[Hint: …]` line only
///   where Paddle's error table is installed). Its "CUDNN error(N), <name>." names the status;
/// - llama.cpp's `CUBLAS_CHECK`: "cuBLAS error 15 at ggml-cuda.cu:7956: the requested
///   functionality is not supported" (ggml-cuda, the value and then `cublasGetStatusString`).
const STATUS_BY_CODE: &[(&str, &str, &str)] = &[
    ("kernel execution error. (", "error: ", "cublas_"),
    ("cuBLAS error ", "", "cublas_"),
    // A wrapper that puts the source location first and the status after `code=`: "cuBLAS error
    // at csrc/gemm/gemm_runner.cu:125 code=15" (the CUDA samples' `check` helper prints the same
    // "code=N" after the file and line).
    ("cuBLAS error", " code=", "cublas_"),
    ("CUBLAS error", " code=", "cublas_"),
    ("CUBLAS Error", " code=", "cublas_"),
    ("CuBLAS error at ", ": ", "cublas_"),
    // TensorRT's cuBLAS wrapper: "cuBLAS Error in CublasWrapper: 3 (Could not initialize cublas.
    // Please check CUDA installation.)", "cuBLAS Error in initializeCommonContext: 3 (…)"; the
    // value is the `cublasStatus_t` (3, `CUBLAS_STATUS_ALLOC_FAILED`, where memory ran out).
    ("cuBLAS Error in ", ": ", "cublas_"),
    // CUDA Library Samples' cuBLASLt helper, `checkCublasStatus`: "cuBLAS API failed with
    // status 7", then `std::logic_error("cuBLAS API failed")`.
    ("cuBLAS API failed with status ", "", "cublas_"),
    ("CUBLAS error(", "", "cublas_"),
    ("CUFFT error(", "", "cufft_"),
    ("CUSOLVER error(", "", "cusolver_"),
    ("CUSparse error(", "", "cusparse_"),
    ("CURAND error(", "", "curand_"),
    // Julia's CUDA.jl shows a library's status in its error's fields: "CUFFTError(code 2, cuFFT
    // failed to allocate GPU or CPU memory)" (lib/cufft/error.jl and its siblings).
    ("CUBLASError(code ", "", "cublas_"),
    ("CUDNNError(code ", "", "cudnn_"),
    ("CUSOLVERError(code ", "", "cusolver_"),
    ("CUSPARSEError(code ", "", "cusparse_"),
    ("CURANDError(code ", "", "curand_"),
    ("CUFFTError(code ", "", "cufft_"),
];

/// cuBLAS's own sentences for its statuses, as `cublasGetStatusString` returns them and as
/// wrappers print them after "CUBLAS error" (the descriptions of `cublasStatus_t` in the cuBLAS
/// documentation; Theano's "RuntimeError: CUBLAS error 'an access to GPU memory space failed'
/// while copying …", llama.cpp's "cuBLAS error 15 at …: the requested functionality is not
/// supported"). Lua Torch's `THCublasCheck` (THCGeneral.c) prints the first seven the same way
/// after "cublas runtime error : ", with "resource allocation failed" lacking the article, so the
/// row leaves it out. Read only on a line that names cuBLAS.
const CUBLAS_STATUS_TEXT: &[(&str, &str)] = &[
    ("the library was not initialized", "not_initialized"),
    ("resource allocation failed", "alloc_failed"),
    (
        "an invalid numeric value was used as an argument",
        "invalid_value",
    ),
    (
        "an absent device architectural feature is required",
        "arch_mismatch",
    ),
    ("an access to GPU memory space failed", "mapping_error"),
    ("the GPU program failed to execute", "execution_failed"),
    ("an internal operation failed", "internal_error"),
    (
        "the requested functionality is not supported",
        "not_supported",
    ),
    (
        "error detected trying to check the license",
        "license_error",
    ),
    // The same statuses in the words of the `cublasStatus_t` reference and of
    // `cublasGetStatusString` in CUDA 11 and later: Transformer Engine's "cuBLAS Error: an
    // unsupported value or parameter was passed to the function" (its `NVTE_CHECK_CUBLAS`),
    // llama.cpp's "CUDA error: an unsupported value or parameter …" after a cuBLAS call.
    ("the cuBLAS library was not initialized", "not_initialized"),
    (
        "an unsupported value or parameter was passed to the function",
        "invalid_value",
    ),
    (
        "the function requires a feature absent from the device architecture",
        "arch_mismatch",
    ),
    (
        "the functionality requested is not supported",
        "not_supported",
    ),
];

/// JAX's words for the math libraries' statuses (jaxlib/gpu/gpu_kernel_helpers.cc, `ErrorString`
/// for `cusolverStatus_t`, `cublasStatus_t` and `cufftResult`), which its checks print after the
/// failed call: "jaxlib/gpu/solver_kernels.cc:45: operation gpusolverDnCreate(&handle) failed:
/// cuSolver internal error" (`JAX_AS_STATUS`), and older jaxlib raised as they are
/// ("RuntimeError: cuSolver internal error"). Each library's name is spelled as JAX spells it,
/// which no other program does ("cuBlas"); the longest sentence on the line wins.
const JAXLIB_STATUS_TEXT: &[(&str, &str)] = &[
    (
        "cuSolver has not been initialized",
        "cusolver_not_initialized",
    ),
    ("cuSolver allocation failed", "cusolver_alloc_failed"),
    ("cuSolver invalid value error", "cusolver_invalid_value"),
    (
        "cuSolver architecture mismatch error",
        "cusolver_arch_mismatch",
    ),
    ("cuSolver mapping error", "cusolver_mapping_error"),
    ("cuSolver execution failed", "cusolver_execution_failed"),
    ("cuSolver internal error", "cusolver_internal_error"),
    (
        "cuSolver matrix type not supported error",
        "cusolver_matrix_type_not_supported",
    ),
    ("cuSolver not supported error", "cusolver_not_supported"),
    ("cuSolver zero pivot error", "cusolver_zero_pivot"),
    ("cuSolver invalid license error", "cusolver_invalid_license"),
    ("cuBlas has not been initialized", "cublas_not_initialized"),
    ("cuBlas allocation failure", "cublas_alloc_failed"),
    ("cuBlas invalid value error", "cublas_invalid_value"),
    ("cuBlas architecture mismatch", "cublas_arch_mismatch"),
    ("cuBlas mapping error", "cublas_mapping_error"),
    ("cuBlas execution failed", "cublas_execution_failed"),
    ("cuBlas internal error", "cublas_internal_error"),
    ("cuBlas not supported error", "cublas_not_supported"),
    ("cuBlas license error", "cublas_license_error"),
    ("cuFFT invalid plan", "cufft_invalid_plan"),
    ("cuFFT allocation failed", "cufft_alloc_failed"),
    ("cuFFT invalid type", "cufft_invalid_type"),
    ("cuFFT invalid value", "cufft_invalid_value"),
    ("cuFFT internal error", "cufft_internal_error"),
    ("cuFFT execution failed", "cufft_exec_failed"),
    ("cuFFT setup failed", "cufft_setup_failed"),
    ("cuFFT invalid size", "cufft_invalid_size"),
    ("cuFFT unaligned data", "cufft_unaligned_data"),
    ("cuFFT invalid device", "cufft_invalid_device"),
    ("cuFFT no workspace", "cufft_no_workspace"),
    ("cuFFT not implemented", "cufft_not_implemented"),
    ("cuFFT not supported", "cufft_not_supported"),
];

/// The status whose JAX sentence ([`JAXLIB_STATUS_TEXT`]) `line` prints.
fn jaxlib_status_text(line: &str) -> Option<String> {
    if !line.contains("cuSolver ") && !line.contains("cuBlas ") && !line.contains("cuFFT ") {
        return None;
    }
    JAXLIB_STATUS_TEXT
        .iter()
        .filter(|(text, _)| {
            line.match_indices(text)
                .any(|(at, _)| word_bounded(line, at, at + text.len()))
        })
        .max_by_key(|(text, _)| text.len())
        .map(|(_, status)| (*status).to_owned())
}

/// The cuBLAS status whose sentence ([`CUBLAS_STATUS_TEXT`]) a line naming cuBLAS prints.
fn cublas_status_text(line: &str) -> Option<String> {
    if !line.contains("CUBLAS") && !line.contains("cuBLAS") && !line.contains("cublas") {
        return None;
    }
    // The reference capitalises its sentences, `cublasGetStatusString` does not.
    let lower = line.to_ascii_lowercase();
    CUBLAS_STATUS_TEXT
        .iter()
        .find(|(text, _)| lower.contains(&text.to_ascii_lowercase()))
        .map(|(_, status)| format!("cublas_{status}"))
}

/// cuSPARSE's (and cuSPARSELt's) words for its statuses, as `cusparseGetErrorString` returns
/// them in CUDA 10.2 and later, by `cusparseStatus_t` value: PyTorch's sparse checks print them
/// after "CUDA error: " and before the call ("CUDA error: insufficient resources when calling
/// `cusparseSpGEMM_workEstimation(…)`", "CUDA error: operation not supported when calling
/// `cusparseCreate(handle)`", "… architecture mismatch when calling `cusparseLtInit(&handle)`",
/// `TORCH_CUDASPARSE_CHECK` in aten/src/ATen/cuda/Exceptions.h), the CUDA Library Samples'
/// `CHECK_CUSPARSE` after "with error: " ("CUSPARSE API failed at line 130 with error: internal
/// error (7)"). Several are also runtime messages ("operation not supported", "out of memory");
/// on a line that names cuSPARSE they are the library's, which is why this is read before the
/// runtime's catalog.
const CUSPARSE_STATUS_TEXT: &[(&str, &str)] = &[
    ("initialization error", "not_initialized"),
    ("out of memory", "alloc_failed"),
    ("invalid value", "invalid_value"),
    ("architecture mismatch", "arch_mismatch"),
    ("texture memory mapping error", "mapping_error"),
    ("kernel launch failure", "execution_failed"),
    ("internal error", "internal_error"),
    ("matrix type not supported", "matrix_type_not_supported"),
    ("zero pivot", "zero_pivot"),
    ("operation not supported", "not_supported"),
    ("insufficient resources", "insufficient_resources"),
];

/// The cuSPARSE status whose words ([`CUSPARSE_STATUS_TEXT`]) a line prints right after an
/// error word and its colon, where the line says the words are cuSPARSE's: cuSPARSE is named
/// before the error word ("CUSPARSE API failed at line 130 with error: …") or the call after the
/// words is cuSPARSE's ("CUDA error: … when calling `cusparse…`"). A runtime message with a
/// cuSPARSE file elsewhere on the line (`CUDA error: out of memory (cusparse_utils.cu:41)`) stays
/// the runtime's.
fn cusparse_status_text(line: &str) -> Option<String> {
    let lower = line.to_ascii_lowercase();
    if !lower.contains("cusparse") {
        return None;
    }
    lower.match_indices("error: ").find_map(|(at, head)| {
        let rest = &lower[at + head.len()..];
        let (text, status) = CUSPARSE_STATUS_TEXT
            .iter()
            .find(|(text, _)| rest.starts_with(text) && word_bounded(rest, 0, text.len()))?;
        let call = rest[text.len()..]
            .trim_start_matches('.')
            .trim_start()
            .strip_prefix("when calling")
            .is_some_and(|c| {
                c.trim_start()
                    .trim_start_matches('`')
                    .starts_with("cusparse")
            });
        (lower[..at].contains("cusparse") || call).then(|| format!("cusparse_{status}"))
    })
}

/// cuDNN's graph API (through its frontend, `cudnn_frontend`) finding no engine for the graph it
/// was given: PyTorch's "cuDNN Frontend error: [cudnn_frontend] Error: No execution plans support
/// the graph." (aten/src/ATen/native/cudnn), the frontend's `GRAPH_NOT_SUPPORTED` code, and its
/// "No valid execution plans built" / "No valid engine configs" for a graph no engine takes. The
/// status is cuDNN's `CUDNN_STATUS_NOT_SUPPORTED`: the operation, shape or dtype has no kernel in
/// this cuDNN on this GPU.
fn cudnn_frontend_unsupported(line: &str) -> Option<String> {
    if !line.contains("cudnn_frontend") && !line.contains("cuDNN Frontend") {
        return None;
    }
    [
        "No execution plans support",
        "No valid execution plans",
        "No valid engine config",
        "not supported",
        "GRAPH_NOT_SUPPORTED",
    ]
    .iter()
    .any(|t| line.contains(t))
    .then(|| "cudnn_not_supported".to_owned())
}

/// The family of a math library status that `line` prints as a number (`STATUS_BY_CODE`).
fn status_code(line: &str) -> Option<String> {
    STATUS_BY_CODE
        .iter()
        .find_map(|(head, code_at, family)| {
            let rest = &line[line.find(head)? + head.len()..];
            let rest = &rest[rest.find(code_at)? + code_at.len()..];
            status_by_value(rest, family)
        })
        .or_else(|| library_error_number(line))
}

/// The status that a checking macro prints as the library's name, "error", a colon and the
/// enum's value, in any capitalisation: DGL's `CUSPARSE_CALL` / `CUBLAS_CALL` ("Check failed: e ==
/// CUSPARSE_STATUS_SUCCESS: CUSPARSE ERROR: 2", dgl/src/runtime/cuda/cuda_common.h), and the
/// many project macros of the same shape ("cuSPARSE Error: 3 at solver.cu:88", "CUBLAS error: 13
/// happened at line: 41"). The colon keeps counts in prose ("cuBLAS error 2 times") out.
fn library_error_number(line: &str) -> Option<String> {
    static R: OnceLock<Regex> = OnceLock::new();
    let r = cached(
        &R,
        r"(?i)\b(cublas|cusparse|cusolver|curand|cufft)\s+error\s*:\s*([0-9]{1,3})\b",
    );
    r.captures_iter(line).find_map(|c| {
        let family = format!("{}_", c.get(1)?.as_str().to_ascii_lowercase());
        status_by_value(c.get(2)?.as_str(), &family)
    })
}

/// The status whose value `text` starts with, looked up in the library's table
/// ([`STATUS_TABLES`]) and named with its family prefix.
fn status_by_value(text: &str, family: &str) -> Option<String> {
    let table = STATUS_TABLES.iter().find(|(f, _)| *f == family)?.1;
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let code: u32 = text.get(..digits)?.parse().ok()?;
    table
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, s)| format!("{family}{s}"))
}

/// A wrapper that prints a CUDA API's error by its number: the head before the number, the text
/// that ends it (`None`: where the digits end), its radix, and whether the number is the driver
/// API's `CUresult` (only rows with a driver API twin share the value) or the runtime's
/// `cudaError_t`.
struct NumberedError {
    head: &'static str,
    end: Option<char>,
    radix: u32,
    driver: bool,
}

/// The wrappers that print an error's number (CUDA Driver API, enum `CUresult`; CUDA Runtime API,
/// enum `cudaError`):
/// - Numba's "CudaAPIError: [716] Call to cuMemcpyDtoH results in UNKNOWN_CUDA_ERROR" names the
///   value only where its own table lacks the name (numba/cuda/cudadrv/driver.py, `_check_error`);
/// - Julia's CUDA.jl shows the enum's raw value inside its error's fields: "CuError(code=
///   CUDA.cudaError_enum(0x000002bc), details=…)" (`cudaError_enum` is its name for `CUresult`,
///   lib/cudadrv/libcuda.jl), as its predecessor CUDAdrv.jl showed it in decimal: "CuError(701,
///   nothing)";
/// - TensorRT's "CUDA initialization failure with error: 35. Please check your CUDA installation"
///   (also "with error 35", from its `createInferBuilder`/`createInferRuntime` check of the
///   runtime; 35 is `cudaErrorInsufficientDriver`, 2 `cudaErrorMemoryAllocation`, 46
///   `cudaErrorDevicesUnavailable`);
/// - checking macros that print the `cudaError_t` value and the location but not the message:
///   "CUDA error 700 at ggml-cuda.cu:1234" (llama.cpp's older `CUDA_CHECK`, "CUDA error %d at
///   %s:%d: %s" with the message cut off or on the next line), and OpenMM's CUDA platform, which
///   reports a driver API call's `CUresult`: "Error uploading array stepSize: CUDA error (700)"
///   (platforms/cuda/src/CudaArray.cpp prints `getErrorString(result) << " (" << result << ")"`,
///   and `CudaContext::getErrorString` says only "CUDA error" for a value its table lacks);
/// - ONNX Runtime's "CUDA failure 1: invalid argument ; GPU=1 ; …" (cuda_call.cc), where the
///   number names the error when the message is cut;
/// - LAMMPS' geryon "Cuda driver error 804 in call at file …" (a `CUresult`), OpenMM's older
///   "Invalid error code (700)", and cutorch's "cuda runtime error (701) : unrecognized error
///   code", where the runtime was older than the driver that returned the value;
/// - PaddlePaddle's "ExternalError: Cuda error(700), an illegal memory access was encountered."
///   (a `cudaError_t`);
/// - spconv's tensorview check, "spconv/indice.cu 60 cuda execution failed with error 98" (a
///   `cudaError_t`; tensorview/include/tensorview/cuda_utils.h, `TV_CHECK_CUDA_ERR`);
/// - PhysX's "PhysX Internal CUDA error. Simulation cannot continue! Error code 700!" (a
///   `CUresult`; physx/source/physx/src/NpScene.cpp).
///
/// Chinese input methods type full-width parentheses: "cuda runtime error（209）" reads as
/// "cuda runtime error (209)".
const NUMBERED_ERRORS: [NumberedError; 19] = [
    NumberedError {
        head: "CudaAPIError: [",
        end: Some(']'),
        radix: 10,
        driver: true,
    },
    NumberedError {
        head: "cudaError_enum(0x",
        end: Some(')'),
        radix: 16,
        driver: true,
    },
    NumberedError {
        head: "CuError(",
        end: Some(','),
        radix: 10,
        driver: true,
    },
    NumberedError {
        head: "CUDA initialization failure with error",
        end: None,
        radix: 10,
        driver: false,
    },
    NumberedError {
        head: "CUDA error ",
        end: None,
        radix: 10,
        driver: false,
    },
    NumberedError {
        head: "CUDA Error ",
        end: None,
        radix: 10,
        driver: false,
    },
    NumberedError {
        head: "Cuda driver error ",
        end: None,
        radix: 10,
        driver: true,
    },
    NumberedError {
        head: "Invalid error code (",
        end: Some(')'),
        radix: 10,
        driver: true,
    },
    NumberedError {
        head: "cuda runtime error (",
        end: Some(')'),
        radix: 10,
        driver: false,
    },
    NumberedError {
        head: "CUDA failure ",
        end: None,
        radix: 10,
        driver: false,
    },
    NumberedError {
        head: "CUDA error (",
        end: Some(')'),
        radix: 10,
        driver: true,
    },
    NumberedError {
        head: "Cuda error(",
        end: Some(')'),
        radix: 10,
        driver: false,
    },
    // nvdiffrast's `NVDR_CHECK_CUDA_ERROR` (common/framework.h): the `cudaError_t` and then the
    // failing call in brackets, "RuntimeError: Cuda error: 2[cudaMalloc(&m_gpuPtr, bytes);]".
    NumberedError {
        head: "Cuda error: ",
        end: None,
        radix: 10,
        driver: false,
    },
    NumberedError {
        head: "cuda execution failed with error ",
        end: None,
        radix: 10,
        driver: false,
    },
    // The same sentence with "can not" in other releases, and PhysX's CUDA context manager's
    // "PhysX error: Failed to load CUDA module data. Cuda error code 222." (a `CUresult`,
    // physx/source/cudamanager/src/CudaContextManager.cpp).
    NumberedError {
        head: "continue! Error code ",
        end: None,
        radix: 10,
        driver: true,
    },
    NumberedError {
        head: "Cuda error code ",
        end: None,
        radix: 10,
        driver: true,
    },
    NumberedError {
        head: "CUDA error code ",
        end: None,
        radix: 10,
        driver: false,
    },
    NumberedError {
        head: "Simulation cannot continue! Error code ",
        end: None,
        radix: 10,
        driver: true,
    },
    // TensorFlow's `ToString(CUresult)` for a value its table lacks: "failed call to cuInit:
    // UNKNOWN ERROR (34)" (34 is `CUDA_ERROR_STUB_LIBRARY`).
    NumberedError {
        head: "UNKNOWN ERROR (",
        end: Some(')'),
        radix: 10,
        driver: true,
    },
];

/// Wrappers that name the failing call between their words and the number, read by pattern:
/// - the OpenACC runtime of the PGI and NVIDIA HPC compilers: "call to cuStreamSynchronize
///   returned error 700: Illegal address during kernel execution", "call to cuMemAllocHost
///   returned error 205: Map failed" (its own wording of the driver API's `CUresult`);
/// - TensorRT 5 to 7: "runtime.cpp (16) - Cuda Error in allocate: 2" (a `cudaError_t`; 2 is
///   `cudaErrorMemoryAllocation`), before "terminate called after throwing an instance of
///   'nvinfer1::CudaError'";
/// - PhysX's GPU pipeline, a driver call's `CUresult`: "SynchronizeStreams cuEventRecord failed
///   with error 700" (gpucommon/include/PxgCudaUtils.h) and a stage's "Synchronizing GPU
///   Narrowphase failed! 700" (gpunarrowphase/src/PxgNarrowphaseCore.cpp);
/// - HAMi-core's check of the driver calls it wraps: "cuMemoryAllocate failed res=2",
///   "cuCtxSetCurrent failed res=4".
///
/// Also any program's own line that names a driver or runtime call before "failed" and the
/// value after it: DeepStream's "nvbufsurftransform:cuInit failed : 804" (a `CUresult`), Isaac
/// Gym's "cudaImportExternalMemory failed on rgbImage buffer with error 999" (a `cudaError_t`),
/// SAPIEN's copy of PhysX's "SynchronizeStreams cuEventRecord failed with error 700" without
/// PhysX's prefix.
fn numbered_by_call(line: &str) -> Option<&'static CudaError> {
    static DRIVER: OnceLock<Regex> = OnceLock::new();
    static RUNTIME: OnceLock<Regex> = OnceLock::new();
    static FAILED: OnceLock<Regex> = OnceLock::new();
    static DRIVER_COLON: OnceLock<Regex> = OnceLock::new();
    static RUNTIME_ON: OnceLock<Regex> = OnceLock::new();
    if line.contains(" failed :") || line.contains(" failed: ") {
        let re = cached(&DRIVER_COLON, r"\bcu[A-Z]\w* failed ?: ?(\d{1,4})\b");
        if let Some(c) = re.captures(line) {
            return by_value(c[1].parse().ok()?, true);
        }
    }
    if line.contains(" with error ") {
        let re = cached(
            &RUNTIME_ON,
            r"\bcuda[A-Z]\w* failed\b[^.;!]{0,60}? with error (\d{1,4})\b",
        );
        if let Some(c) = re.captures(line) {
            return by_value(c[1].parse().ok()?, false);
        }
    }
    let (re, driver) = if line.contains(" returned error ") {
        (
            cached(&DRIVER, r"\bcall to cu[A-Z]\w* returned error (\d{1,4})\b"),
            true,
        )
    } else if line.contains(" failed with error ")
        || line.contains(" failed! ")
        || line.contains(" failed res=")
    {
        (
            cached(
                &FAILED,
                r"(?:\bcu[A-Z]\w* failed with error |\bGPU \w+ failed! |\bcu[A-Z]\w* failed res=)(\d{1,4})\b",
            ),
            true,
        )
    } else if line.contains("Cuda Error in ") {
        (cached(&RUNTIME, r"\bCuda Error in \w+: (\d{1,4})\b"), false)
    } else {
        return None;
    };
    by_value(re.captures(line)?[1].parse().ok()?, driver)
}

/// The headline rows' guard for a call that failed with a numbered value
/// ([`numbered_by_call`]): other programs' "… failed : …" and "… with error …" are not CUDA's.
pub fn names_failed_call_value(line: &str) -> bool {
    numbered_by_call(line).is_some()
}

/// The catalog row of an error's value: a `CUresult` (`driver`, only rows with a driver API twin
/// share the value) or a `cudaError_t`.
fn by_value(code: u32, driver: bool) -> Option<&'static CudaError> {
    errors()
        .iter()
        .find(|e| e.code == code && (!driver || e.driver_name.is_some()))
}

/// The catalog row of the first error number a wrapper in [`NUMBERED_ERRORS`] prints on `line`.
fn numbered_error(line: &str) -> Option<&'static CudaError> {
    if let Some(e) = numbered_by_call(line) {
        return Some(e);
    }
    let ascii;
    let line = if line.contains(['\u{ff08}', '\u{ff09}']) {
        ascii = line.replace('\u{ff08}', " (").replace('\u{ff09}', ")");
        ascii.as_str()
    } else {
        line
    };
    NUMBERED_ERRORS.iter().find_map(|w| {
        let rest = &line[line.find(w.head)? + w.head.len()..];
        let digits = match w.end {
            Some(end) => rest.get(..rest.find(end)?)?.trim(),
            None => {
                let rest = rest.trim_start_matches([':', ' ']);
                let n = rest.bytes().take_while(u8::is_ascii_digit).count();
                // The number ends where a word would (not "11.8", "2nd", "700x").
                if rest[n..].chars().next().is_some_and(|c| {
                    c.is_alphanumeric()
                        || c == '.' && rest[n + 1..].starts_with(|d: char| d.is_ascii_digit())
                }) {
                    return None;
                }
                &rest[..n]
            }
        };
        by_value(u32::from_str_radix(digits, w.radix).ok()?, w.driver)
    })
}

/// The category for a math library's status name on `line` (`CUSOLVER_STATUS_INTERNAL_ERROR` →
/// `cusolver_internal_error`); the status must be at least two letters after the prefix.
///
/// A `…_SUCCESS` status is what a failed check expected, not what it got: TensorFlow's "Check
/// failed: cusolverDnCreate(&cusolver_dn_handle) == CUSOLVER_STATUS_SUCCESS Failed to create
/// cuSolverDN instance." (core/kernels/cuda_solvers.cc) names the call and not the status. Such
/// a line is the library's handle creation failing (`cusolver_create_failed`) when it names a
/// creation, and no family of its own otherwise.
pub fn library_status(line: &str) -> Option<String> {
    let mut expected_success = None;
    let mut got = None;
    for (prefix, family) in LIBRARY_STATUS_PREFIXES {
        for (at, _) in line.match_indices(prefix) {
            if !word_bounded(line, at, at) {
                continue;
            }
            let rest = &line[at + prefix.len()..];
            let len = rest
                .bytes()
                .take_while(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b'_')
                .count();
            // A paste that lost its newlines glues the next record's date to the status
            // ("CUDNN_STATUS_INTERNAL_ERROR2020-01-05 15:14:13.983313: E …"); the year is the
            // date's. (No status of these libraries ends in a digit.)
            let len = if rest[len..].starts_with('-')
                && rest[..len]
                    .bytes()
                    .rev()
                    .take_while(u8::is_ascii_digit)
                    .count()
                    == 4
            {
                len - 4
            } else {
                len
            };
            let status = rest[..len].trim_end_matches('_');
            if status == "SUCCESS" {
                // The value the check got, unless the line names the status as well (MXNet's
                // "(2 vs. 0) cuDNN: CUDNN_STATUS_ALLOC_FAILED"): the name is the library's own.
                if got.is_none() {
                    got = glog_check_value(&rest[len..], family);
                }
                expected_success.get_or_insert(family);
                continue;
            }
            if status.len() >= 2 && status.bytes().any(|b| b.is_ascii_uppercase()) {
                return Some(format!("{family}{}", status.to_ascii_lowercase()));
            }
        }
    }
    if got.is_some() {
        return got;
    }
    let family = expected_success?;
    // The creation as a call (`cusolverDnCreate(`, `cublasCreate_v2(`) or as a word ("Failed to
    // create …"), not inside a path or another word (`create_op.cc`, "recreated").
    let word = line
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|w| w.eq_ignore_ascii_case("create"));
    let call = line.contains("Create(") || line.contains("Create_v2(");
    (word || call).then(|| format!("{family}create_failed"))
}

/// The family of a CUTLASS status text on a line that names CUTLASS: `cutlass_` and the text's
/// words after "Error" (`Error Internal` → `cutlass_internal_error`, `Error Not Supported` →
/// `cutlass_not_supported`); a failed allocation is `cutlass_alloc_failed`, which counts as the
/// GPU's memory running out.
fn cutlass_status(line: &str) -> Option<String> {
    if !CUTLASS_NAMES.iter().any(|n| line.contains(n)) {
        return None;
    }
    let text = CUTLASS_STATUS_TEXTS.iter().find(|t| line.contains(*t))?;
    Some(match *text {
        "Error Internal" => "cutlass_internal_error".to_owned(),
        "Error Memory Allocation failed" => "cutlass_alloc_failed".to_owned(),
        "Error Architecture Mismatch" => "cutlass_arch_mismatch".to_owned(),
        t => format!(
            "cutlass_{}",
            t.trim_start_matches("Error ")
                .to_ascii_lowercase()
                .replace(' ', "_")
        ),
    })
}

/// The status a glog `CHECK_EQ` got, where it compared a call's result with a library's success
/// value: `after` follows `…_SUCCESS` in "Check failed: status == CUDNN_STATUS_SUCCESS (7 vs. 0)
/// Failed to set cuDNN stream." (TensorFlow's stream_executor/cuda/cuda_dnn.cc) or "Check failed:
/// e == CUDNN_STATUS_SUCCESS (2 vs. 0) cuDNN: …" (MXNet): glog prints both operands' values in
/// parentheses, the failed one first.
fn glog_check_value(after: &str, family: &str) -> Option<String> {
    let rest = after.trim_start().strip_prefix('(')?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if !rest[digits..].starts_with(" vs. 0)") {
        return None;
    }
    status_by_value(rest, family)
}

/// Is `line[start..end]` set off by Markdown emphasis (`_…_`, `__…__`, `*…*`) rather than glued
/// to an identifier: "it gave a _RuntimeError: CUDA error: invalid configuration argument_ error"?
/// Only a message (words with spaces) is read so; a name glued to an underscore is another name.
fn emphasised(line: &str, start: usize, end: usize) -> bool {
    let b = line.as_bytes();
    let ident = |x: u8| x.is_ascii_alphanumeric() || x == b'_';
    let marks = |x: u8| x == b'_' || x == b'*';
    // Past the run of emphasis marks after the message, no identifier goes on.
    let mut e = end;
    while e < b.len() && marks(b[e]) {
        e += 1;
    }
    let after = e == b.len() || !ident(b[e]);
    // Before the run of marks in front of it, likewise.
    let mut s = start;
    while s > 0 && marks(b[s - 1]) {
        s -= 1;
    }
    let before = s == 0 || !ident(b[s - 1]);
    after && before
}

/// Is `line[start..end]` an operand of an equality test in code that a failed check prints:
/// glog's and dmlc's "Check failed: (e == cudaSuccess || e == cudaErrorCudartUnloading) is false:
/// CUDA: out of memory" (TVM's `CUDA_CALL`, tvm/src/runtime/cuda/cuda_common.h) lists the values
/// the check allows, and the error itself comes after them.
/// A hit inside a longer identifier is read as that identifier. The success value a check
/// expects (`status == CUDNN_STATUS_SUCCESS (4 vs. 0)`) is not an error's name: the values after
/// it say which error came.
pub(crate) fn compared(line: &str, start: usize, end: usize) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let (Some(head), Some(tail)) = (line.get(..start), line.get(end..)) else {
        return false;
    };
    let before = head.trim_end_matches(ident);
    let after = tail.trim_start_matches(ident);
    let name = &line[before.len()..line.len() - after.len()];
    if name.contains("SUCCESS") || name.contains("Success") {
        return false;
    }
    // A name reached through its module path (`CUDA.CUDNN.CUDNN_STATUS_ALLOC_FAILED`, Julia;
    // `cudart.cudaError_t.cudaErrorMemoryAllocation`, Python's bindings) is compared as the
    // bare one is.
    let mut before = before;
    while let Some(path) = before.strip_suffix('.') {
        let head = path.trim_end_matches(ident);
        if head.len() == path.len() {
            break;
        }
        before = head;
    }
    let (before, after) = (before.trim_end(), after.trim_start());
    ["==", "!="]
        .iter()
        .any(|op| before.ends_with(op) || after.starts_with(op))
        || member_of_a_tested_set(before)
}

/// Does `before` (the text before a status name) end inside a set that a test for membership
/// reads: `x ∈ (CUDNN_STATUS_ALLOC_FAILED, …)` (Julia), `err in (cudaErrorMemoryAllocation, …)`,
/// `status in [...]` (Python)? The name is one the code looks for, not one a call returned.
fn member_of_a_tested_set(before: &str) -> bool {
    // A set that a test lists is short: look back a few hundred bytes only, so that a line of
    // thousands of names costs the same per name.
    let before = window_before(before, before.len(), 256);
    let Some(open) = before.rfind(['(', '[', '{']) else {
        return false;
    };
    let inside = &before[open + 1..];
    if inside.contains([')', ']', '}']) {
        return false;
    }
    let ahead = before[..open].trim_end();
    ahead.ends_with('∈') || ahead.ends_with(" in") || ahead.ends_with(" not in")
}

/// Is `line[start..end]` not glued to a neighbouring identifier character? (A message inside a
/// longer word, `cudaErrorInvalidValue` inside `cudaErrorInvalidValueX`, does not count.)
fn word_bounded(line: &str, start: usize, end: usize) -> bool {
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let before = start == 0 || !ident(line.as_bytes()[start - 1]);
    let after = end == start || end >= line.len() || !ident(line.as_bytes()[end]);
    before && after
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn a_message_right_after_an_error_word_is_read_as_printed() {
        for (line, want) in [
            (
                "Error invalid device ordinal at line 393 in file pythonInterface.c",
                true,
            ),
            ("Error: Invalid device ordinal", true),
            ("ERROR: INVALID DEVICE ORDINAL", true),
            ("Error: No CUDA-capable device is detected", true),
            (
                "RuntimeError: too many resources requested for launch",
                true,
            ),
            // A title's Title Case, and a message that goes on into a longer word.
            ("Error: Invalid Device Ordinal", false),
            ("Error invalid device ordinals", false),
            // The generic rows own "CUDA error: …" and "HIP error: …".
            ("CUDA error: invalid device ordinal", false),
            ("hip error: invalid device ordinal", false),
            // Words any program prints need a macro's place after them.
            ("Error: out of memory", false),
            ("Error out of memory at line 12 in file ops.cu", true),
            ("error: invalid argument kernels.cu:88", true),
        ] {
            assert_eq!(message_after_error_word(line), want, "{line}");
        }
    }

    #[test]
    fn cutlass_statuses_name_their_family() {
        let trt = "[TensorRT-LLm Error][fpA_intB Runner] Failed to run cutlass fpA_intB gemm. Error: Error Internal";
        assert_eq!(
            refine(trt),
            Some(Refined::LibraryStatus("cutlass_internal_error".into()))
        );
        assert_eq!(
            refine("Got cutlass error: Error Not Supported at: 71"),
            Some(Refined::LibraryStatus("cutlass_not_supported".into()))
        );
        // The words without CUTLASS are anyone's.
        assert_eq!(cutlass_status("HTTP 500: Error Internal"), None);
    }

    #[test]
    fn an_operand_of_a_check_is_not_the_error() {
        let tvm = "InternalError: Check failed: (e == cudaSuccess || e == cudaErrorCudartUnloading) is false: CUDA: out of memory";
        assert!(
            !matches!(refine(tvm), Some(Refined::Error(e)) if e.category == "driver_shutting_down"),
            "{:?}",
            refine(tvm)
        );
        let glog = "Check failed: error == cudaSuccess (2 vs. 0)  out of memory";
        assert!(matches!(refine(glog), Some(Refined::Error(e)) if e.category == "cuda_oom"));
        // The error named outside a comparison still counts.
        let named = "cudaErrorCudartUnloading: driver shutting down";
        assert!(
            matches!(refine(named), Some(Refined::Error(e)) if e.category == "driver_shutting_down")
        );
    }

    #[test]
    fn every_row_parses() {
        let rows = TSV.lines().skip(1).count();
        assert_eq!(
            errors().len(),
            rows,
            "a row of cuda_errors.tsv does not parse"
        );
        assert!(rows >= 60);
    }

    #[test]
    fn names_and_codes_are_unique_and_well_formed() {
        let mut codes = HashSet::new();
        let mut names = HashSet::new();
        for e in errors() {
            assert!(codes.insert(e.code), "{}", e.code);
            assert!(names.insert(e.runtime_name), "{}", e.runtime_name);
            assert!(
                e.runtime_name.starts_with("cudaError"),
                "{}",
                e.runtime_name
            );
            if let Some(d) = e.driver_name {
                assert!(d.starts_with("CUDA_ERROR_") && names.insert(d), "{d}");
            }
            assert!(!e.message.is_empty() && e.message.trim() == e.message);
            assert!(
                e.category
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{}",
                e.category
            );
        }
        for (wording, name) in FRAMEWORK_WORDINGS {
            assert!(names.contains(name), "{name}");
            assert!(
                HEADLINE_RULES
                    .iter()
                    .any(|r| r.literals.iter().any(|l| l.contains(wording))),
                "{wording} opens nothing"
            );
        }
    }

    /// Every value of the runtime's `cudaError` enum (CUDA 13.2, `driver_types.h`) is in the
    /// catalog or left out here with its reason; nothing is both.
    #[test]
    fn catalog_covers_the_whole_enum() {
        const ENUM: &[u32] = &[
            0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26,
            27, 28, 31, 32, 34, 35, 36, 37, 43, 44, 45, 46, 49, 52, 53, 65, 66, 67, 68, 69, 98,
            100, 101, 102, 103, 127, 200, 201, 205, 206, 207, 208, 209, 210, 211, 212, 213, 214,
            215, 216, 217, 218, 219, 220, 221, 222, 223, 224, 225, 226, 300, 301, 302, 303, 304,
            400, 401, 402, 500, 600, 700, 701, 702, 703, 704, 705, 708, 709, 710, 711, 712, 713,
            714, 715, 716, 717, 718, 719, 720, 721, 800, 801, 802, 803, 804, 805, 806, 807, 808,
            809, 810, 811, 812, 900, 901, 902, 903, 904, 905, 906, 907, 908, 909, 910, 911, 912,
            913, 914, 915, 917, 999, 10000,
        ];
        const LEFT_OUT: &[(&[u32], &str)] = &[
            (&[0], "cudaSuccess is no error"),
            (&[10000], "deprecated, not returned by current runtimes"),
            (
                &[206, 207, 208, 210, 211, 212, 213, 219],
                "graphics interop mapping; short phrases that name no GPU-node failure",
            ),
            (&[300], "same message as cudaErrorInvalidKernelImage (200)"),
            (
                &[301],
                "`file not found` is too common a phrase to name an error",
            ),
            (&[402], "an introspection call's answer, not a failure"),
        ];
        let mut left = HashSet::new();
        for (codes, why) in LEFT_OUT {
            assert!(!why.is_empty());
            for c in *codes {
                assert!(left.insert(*c), "{c} left out twice");
            }
        }
        let catalog: HashSet<u32> = errors().iter().map(|e| e.code).collect();
        for c in ENUM {
            assert!(
                catalog.contains(c) != left.contains(c),
                "{c}: in the catalog and left out, or neither"
            );
        }
        for c in catalog.iter().chain(&left) {
            assert!(ENUM.contains(c), "{c} is not a value of the enum");
        }
    }

    /// Where a headline row keys on an error's name or message, the row and the catalog agree on
    /// the family, and a family without a row of its own carries its own hint.
    #[test]
    fn catalog_agrees_with_the_headline_rows() {
        for e in errors() {
            let owners: Vec<_> = HEADLINE_RULES
                .iter()
                .filter(|r| r.priority > 10)
                .filter(|r| {
                    r.literals.iter().chain(r.refines).any(|l| {
                        l == &e.runtime_name || Some(*l) == e.driver_name || e.message.contains(l)
                    })
                })
                .collect();
            for r in &owners {
                assert_eq!(
                    (r.kind, r.category),
                    (e.kind, e.category),
                    "row {} and {}",
                    r.name,
                    e.runtime_name
                );
            }
            let owned = HEADLINE_RULES
                .iter()
                .any(|r| r.category == e.category && r.kind == e.kind);
            assert_eq!(
                e.hint.is_none(),
                owned,
                "{}: hint `-` only for a row's family",
                e.runtime_name
            );
        }
    }

    /// Every family the rule table, the assertion families and this catalog can report is named
    /// in the documentation, so users (and evaluation sets) can find its meaning.
    #[test]
    fn every_family_is_documented() {
        let docs = [
            include_str!("../../docs/detection.md"),
            include_str!("../../docs/assert-catalog.md"),
        ]
        .concat();
        let categories = HEADLINE_RULES
            .iter()
            .map(|r| r.category)
            .chain(
                crate::detect::rules::ASSERT_FAMILIES
                    .iter()
                    .map(|f| f.category),
            )
            .chain(errors().iter().map(|e| e.category));
        for c in categories {
            assert!(docs.contains(&format!("`{c}`")), "{c} is not in docs/");
        }
    }

    fn category(line: &str) -> Option<String> {
        match refine(line)? {
            Refined::Error(e) => Some(e.category.to_owned()),
            Refined::LibraryStatus(s) => Some(s),
        }
    }

    #[test]
    fn refines_names_messages_and_wordings() {
        for (line, want) in [
            // The runtime's message after PyTorch's prefix, cutorch's and Caffe's.
            ("RuntimeError: CUDA error: invalid device function", "invalid_device_function"),
            ("THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=405 error=8 : invalid device function", "invalid_device_function"),
            ("Check failed: error == cudaSuccess (100 vs. 0)  no CUDA-capable device is detected", "no_cuda_device"),
            ("RuntimeError: CUDA error: invalid device ordinal", "invalid_device_ordinal"),
            ("RuntimeError: CUDA error: system not yet initialized", "system_not_ready"),
            ("RuntimeError: CUDA error: operation not permitted when stream is capturing", "stream_capture_unsupported"),
            ("RuntimeError: CUDA error: operation not permitted", "not_permitted"),
            ("RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain.", "unsupported_ptx_version"),
            // Names, longest first.
            ("jaxlib.xla_extension.XlaRuntimeError: INTERNAL: CUDA_ERROR_INVALID_HANDLE", "invalid_resource_handle"),
            ("what():  cudaErrorInvalidDeviceFunction: invalid device function", "invalid_device_function"),
            ("cudaErrorInvalidDevice: invalid device ordinal", "invalid_device_ordinal"),
            ("RuntimeError: No CUDA GPUs are available", "no_cuda_device"),
            ("UserWarning: CUDA initialization: CUDA unknown error - this may be due to an incorrectly set up environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after program start.", "unknown_error"),
            ("RuntimeError: cusolver error: CUSOLVER_STATUS_EXECUTION_FAILED, when calling `cusolverDnSgetrf( handle, m, n, dA, ldda, static_cast<float*>(dataPtr.get()), ipiv, info)`", "cusolver_execution_failed"),
            ("RuntimeError: cuFFT error: CUFFT_INTERNAL_ERROR", "cufft_internal_error"),
            ("RuntimeError: CUDA error: CUBLAS_STATUS_LICENSE_ERROR", "cublas_license_error"),
            // A check that expected success names the call, not the status.
            ("F tensorflow/core/kernels/cuda_solvers.cc:94] Check failed: cusolverDnCreate(&cusolver_dn_handle) == CUSOLVER_STATUS_SUCCESS Failed to create cuSolverDN instance.", "cusolver_create_failed"),
            ("Check failed: cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS", "cublas_create_failed"),
            // glog's CHECK_EQ prints the value the check got: cuDNN 7/8 and cuBLAS numbering.
            ("F tensorflow/stream_executor/cuda/cuda_dnn.cc:221] Check failed: status == CUDNN_STATUS_SUCCESS (7 vs. 0)Failed to set cuDNN stream.", "cudnn_mapping_error"),
            ("src/operator/nn/./cudnn/cudnn_convolution-inl.h:713: Check failed: e == CUDNN_STATUS_SUCCESS (8 vs. 0) cuDNN: ", "cudnn_execution_failed"),
            ("Check failed: status == CUBLAS_STATUS_SUCCESS (13 vs. 0)", "cublas_execution_failed"),
            // The status's own name wins over the value when both are printed.
            ("Check failed: e == CUDNN_STATUS_SUCCESS (2 vs. 0) cuDNN: CUDNN_STATUS_ALLOC_FAILED", "cudnn_alloc_failed"),
            // PaddlePaddle's numbered statuses.
            ("OSError: (External) CUFFT error(5). ", "cufft_internal_error"),
            ("ExternalError: CUBLAS error(13). ", "cublas_execution_failed"),
            ("(External) CUSOLVER error(7). ", "cusolver_internal_error"),
            ("(External) CURAND error(102). ", "curand_allocation_failed"),
            // Checking macros that print the library, "error:" and the value (DGL, and others).
            ("dgl._ffi.base.DGLError: [09:57:10] /opt/dgl/src/array/cuda/csr_transpose.cc:83: Check failed: e == CUSPARSE_STATUS_SUCCESS: CUSPARSE ERROR: 2", "cusparse_alloc_failed"),
            ("cuSOLVER Error: 7 at qr.cu:41", "cusolver_internal_error"),
            // cuSPARSE's words for its statuses, after PyTorch's "CUDA error: " and a sample's
            // "with error: "; the runtime's message of the same words is not the family there.
            ("RuntimeError: CUDA error: insufficient resources when calling `cusparseSpGEMM_workEstimation( handle, opA, opB, &alpha, matA, matB, &beta, matC, computeType, CUSPARSE_SPGEMM_DEFAULT, spgemmDesc, &bufferSize1, dBuffer1)`", "cusparse_insufficient_resources"),
            ("RuntimeError: CUDA error: operation not supported when calling `cusparseCreate(handle)`", "cusparse_not_supported"),
            ("CUSPARSE API failed at line 162 with error: initialization error (1)", "cusparse_not_initialized"),
            // A runtime message with a cuSPARSE file on its line stays the runtime's.
            ("RuntimeError: CUDA error: operation not supported (cusparse_utils.cu:41)", "not_supported"),
            ("RuntimeError: CUDA error: kernel launch failure when calling `cusparseXcoo2csr(handle, coorowind, i_nnz, i_m, csrrowptr, CUSPARSE_INDEX_BASE_ZERO)`", "cusparse_execution_failed"),
            ("CUBLAS error: 13 happened at line: 88 in file: gemm.cu", "cublas_execution_failed"),
            // Julia's CUDAdrv.jl, and Caffe2's CUDA_ENFORCE location before the runtime's text.
            ("ERROR: LoadError: CUDAdrv.CuError(700, nothing)", "illegal_memory_access"),
            ("Error at: /opt/caffe2/caffe2/operators/softmax_ops.cu:201: an illegal memory access was encountered", "illegal_memory_access"),
            // Values the catalog gained from the runtime's own strings (CUDA 13.2).
            ("RuntimeError: CUDA error: MPS server is not ready to accept new MPS client requests", "mps_failure"),
            ("cudaErrorMpsClientTerminated: the MPS client has been terminated by the server", "mps_failure"),
            ("RuntimeError: CUDA error: Invalid access of peer GPU memory over nvlink or a hardware error", "error_contained"),
            ("CUDA error: capturing stream has unjoined work", "stream_capture_invalid_use"),
            ("RuntimeError: CUDA error: unspecified launch failure in prior launch", "unspecified_launch_failure"),
            ("CUDA_ERROR_TENSOR_MEMORY_LEAK", "tensor_memory_leak"),
            // ROCm: the runtime's message after PyTorch's hipified prefix, and HIP's own names.
            ("RuntimeError: HIP error: invalid device function", "invalid_device_function"),
            ("hipErrorInvalidDeviceFunction", "invalid_device_function"),
            ("what():  hipErrorIllegalAddress: an illegal memory access", "illegal_memory_access"),
            ("failed with hipErrorOutOfMemory", "cuda_oom"),
            ("hipErrorNoBinaryForGpu: Unable to find code object for all current devices!", "no_kernel_image"),
        ] {
            assert_eq!(category(line).as_deref(), Some(want), "{line}");
        }
    }

    proptest::proptest! {
        /// Any text, including text around real names and statuses: no panic, and a refinement
        /// always names something that is on the line.
        #[test]
        fn refine_never_panics_and_names_what_is_there(
            head in "\\PC{0,60}",
            needle in proptest::sample::select(vec![
                "invalid device function", "cudaErrorInvalidDevice", "CUDA_ERROR_UNKNOWN",
                "CUSOLVER_STATUS_", "CUFFT_X", "CUBLAS_STATUS_É", "no CUDA-capable device is detected",
                "Illegal address", "LAUNCH_FAILED", "hipErrorInvalidDeviceFunction",
                "hipErrorOutOfMemory",
            ]),
            tail in "\\PC{0,60}",
        ) {
            let line = format!("{head}{needle}{tail}");
            match refine(&line) {
                Some(Refined::Error(e)) => {
                    let hip = |tail: &str| line.contains(&format!("hip{tail}"));
                    let named = line.contains(e.message)
                        || line.contains(e.runtime_name)
                        || e.driver_name.is_some_and(|d| line.contains(d))
                        || e.driver_name.is_some_and(|d| driver_short_forms(d).iter().any(|f| line.contains(f.as_str()) || hip(f)))
                        || e.runtime_name.strip_prefix("cuda").is_some_and(hip)
                        || FRAMEWORK_WORDINGS.iter().any(|(w, n)| *n == e.runtime_name && line.contains(w));
                    proptest::prop_assert!(named, "{} from {line:?}", e.runtime_name);
                }
                Some(Refined::LibraryStatus(c)) => {
                    let status = c.split_once('_').map_or("", |(_, s)| s).to_ascii_uppercase();
                    proptest::prop_assert!(line.contains(&status), "{c} from {line:?}");
                }
                None => {}
            }
        }
    }

    #[test]
    fn numba_names_the_driver_code() {
        // numba/cuda/cudadrv/driver.py prints the CUresult value and, for a value its own table
        // lacks, UNKNOWN_CUDA_ERROR.
        assert_eq!(
            category("numba.cuda.cudadrv.driver.CudaAPIError: [716] Call to cuMemcpyDtoH results in UNKNOWN_CUDA_ERROR").as_deref(),
            Some("misaligned_address")
        );
        assert_eq!(
            category("CudaAPIError: [2] Call to cuMemAlloc results in CUDA_ERROR_OUT_OF_MEMORY")
                .as_deref(),
            Some("cuda_oom")
        );
        assert_eq!(
            category("CudaAPIError: [12345] Call to cuInit results in UNKNOWN_CUDA_ERROR"),
            None
        );
        assert_eq!(category("CudaAPIError: [x"), None);
        // CUDA.jl's raw enum value, in hexadecimal.
        assert_eq!(
            category("CUDA.CuError(code=CUDA.cudaError_enum(0x000002bc), details=CUDA.Optional{String}(data=nothing))").as_deref(),
            Some("illegal_memory_access")
        );
        assert_eq!(category("CuError(code=CUDA.cudaError_enum(0xzz))"), None);
    }

    #[test]
    fn a_status_glued_to_the_next_records_date_is_still_named() {
        assert_eq!(
            library_status("could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR2020-01-05 15:14:13.983313: E tensorflow")
                .as_deref(),
            Some("cudnn_internal_error")
        );
        // Digits that are no date stay the status's (and name none this table has).
        assert_eq!(
            library_status("CUBLAS_STATUS_NOT_SUPPORTED2 happened").as_deref(),
            Some("cublas_not_supported2")
        );
    }

    #[test]
    fn glued_or_absent_names_refine_nothing() {
        for line in [
            "RuntimeError: CUDA error: something new",
            "cudaErrorInvalidValueX happened",
            "MYCUFFT_THING",
            "CUFFT_",
            "CUBLAS_STATUS_",
            "hipErrorSomethingNew",
            // A status that says the call succeeded, without a creation; a number no enum has.
            "Check failed: status == CUBLAS_STATUS_SUCCESS",
            "tensorflow/core/kernels/create_op.cc:12] Check failed: s == CUSOLVER_STATUS_SUCCESS",
            "(External) CUFFT error(77). ",
            "myhipErrorInvalidDeviceFunction",
        ] {
            assert_eq!(refine(line), None, "{line}");
        }
    }
}
