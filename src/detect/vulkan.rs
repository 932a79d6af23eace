//! Vulkan: reads a failed Vulkan call's `VkResult` into a family, for the GPU programs that
//! compute through Vulkan rather than CUDA on the same nodes (the ncnn-based upscalers and frame
//! interpolators, llama.cpp's Vulkan backend, GPT4All's Kompute backend).
//!
//! The values and names are Khronos' (`VkResult` in `include/vulkan/vulkan_core.h` of
//! KhronosGroup/Vulkan-Headers). A program prints them in one of four ways, all keyed here:
//!
//! - the enum's name, `VK_ERROR_OUT_OF_DEVICE_MEMORY` (drivers, TVM's `Vulkan Error, code=-2:
//!   VK_ERROR_OUT_OF_DEVICE_MEMORY`);
//! - Vulkan-Hpp's `vk::to_string` of it, `ErrorOutOfDeviceMemory`, and its exception classes,
//!   `vk::OutOfDeviceMemoryError`, whose `what()` reads `vk::Device::allocateMemory:
//!   ErrorOutOfDeviceMemory` (include/vulkan/vulkan.hpp; llama.cpp's ggml-vulkan prints it after
//!   `ggml_vulkan: `, Kompute's "Error allocating memory ErrorOutOfDeviceMemory");
//! - ncnn's log of a failed call with the value as a number, `NCNN_LOGE("vkQueueSubmit failed
//!   %d", ret)` → `vkQueueSubmit failed -4` (Tencent/ncnn src/allocator.cpp, command.cpp,
//!   gpu.cpp);
//! - the programs' own words for a failed device allocation: ggml-vulkan's `ggml_vulkan: Device
//!   memory allocation of size 118497280 failed.` and GPT4All's `Error allocating vulkan memory.`
//!   (ggml-kompute.cpp).
//!
//! Out of device memory is an `oom`; the other failures are `cuda_error` incidents, the kind this
//! project gives a GPU runtime's errors whatever the API (HIP's are too), each named
//! `vulkan_<value>`. ggml-vulkan's "Failed to allocate pinned memory" is not keyed: the backend
//! falls back to ordinary host memory and goes on.

use super::prose::cached;
use crate::model::{Blame, Evidence, Kind};
use regex::Regex;
use std::sync::OnceLock;

/// The headline row whose lines this module reads (`rules::HEADLINE_RULES`).
pub const ROW: &str = "vulkan_result";

/// One `VkResult` error value.
struct VkError {
    value: i64,
    /// `VK_ERROR_…`.
    name: &'static str,
    /// Vulkan-Hpp's `vk::to_string` of it (`ErrorOutOfDeviceMemory`).
    hpp: &'static str,
    kind: Kind,
    category: &'static str,
    blame: Blame,
    hint: &'static str,
}

const OOM_HINT: &str = "The GPU ran out of memory for a Vulkan allocation: use a smaller tile \
    size (the ncnn tools' `-t`), a lower resolution, fewer GPU layers or a smaller context \
    (llama.cpp, GPT4All), or stop the other programs that hold GPU memory.";
const HOST_OOM_HINT: &str = "The Vulkan driver could not allocate host memory for its objects: \
    the node or the job's memory limit is short; lower the batch or tile size, or give the job \
    more memory.";
const DEVICE_LOST_HINT: &str = "The Vulkan driver lost the GPU in the middle of the work: the GPU \
    was reset after a hang or a timeout (Windows' TDR), the driver faulted, or the hardware \
    failed. Look for an Xid in the kernel log at the same time (reported as its own incident); \
    losses that repeat on one GPU with different programs point at the GPU.";
const DRIVER_HINT: &str = "Vulkan found no usable driver for the GPU: the NVIDIA Vulkan ICD \
    (nvidia_icd.json) is missing or does not match the kernel driver, the loader picked a \
    software or wrong vendor's driver, or the container lacks the graphics capability \
    (NVIDIA_DRIVER_CAPABILITIES must include `graphics`).";
const USAGE_HINT: &str = "A Vulkan call failed on what the program asked for (a layer, \
    extension, feature or format the driver lacks, or more objects than it allows): update the \
    driver or the program, or pick the GPU the program supports.";
const UNKNOWN_HINT: &str = "A Vulkan call failed with an error the driver did not name: check the \
    kernel log for an Xid at the same time and the driver's version.";

const ERRORS: &[VkError] = &[
    VkError {
        value: -1,
        name: "VK_ERROR_OUT_OF_HOST_MEMORY",
        hpp: "ErrorOutOfHostMemory",
        kind: Kind::Oom,
        category: "host_oom",
        blame: Blame::Application,
        hint: HOST_OOM_HINT,
    },
    VkError {
        value: -2,
        name: "VK_ERROR_OUT_OF_DEVICE_MEMORY",
        hpp: "ErrorOutOfDeviceMemory",
        kind: Kind::Oom,
        category: "vulkan_oom",
        blame: Blame::Application,
        hint: OOM_HINT,
    },
    VkError {
        value: -3,
        name: "VK_ERROR_INITIALIZATION_FAILED",
        hpp: "ErrorInitializationFailed",
        kind: Kind::CudaError,
        category: "vulkan_initialization_failed",
        blame: Blame::Driver,
        hint: DRIVER_HINT,
    },
    VkError {
        value: -4,
        name: "VK_ERROR_DEVICE_LOST",
        hpp: "ErrorDeviceLost",
        kind: Kind::CudaError,
        category: "vulkan_device_lost",
        blame: Blame::Unknown,
        hint: DEVICE_LOST_HINT,
    },
    VkError {
        value: -5,
        name: "VK_ERROR_MEMORY_MAP_FAILED",
        hpp: "ErrorMemoryMapFailed",
        kind: Kind::CudaError,
        category: "vulkan_memory_map_failed",
        blame: Blame::Unknown,
        hint: UNKNOWN_HINT,
    },
    VkError {
        value: -6,
        name: "VK_ERROR_LAYER_NOT_PRESENT",
        hpp: "ErrorLayerNotPresent",
        kind: Kind::CudaError,
        category: "vulkan_layer_not_present",
        blame: Blame::Application,
        hint: USAGE_HINT,
    },
    VkError {
        value: -7,
        name: "VK_ERROR_EXTENSION_NOT_PRESENT",
        hpp: "ErrorExtensionNotPresent",
        kind: Kind::CudaError,
        category: "vulkan_extension_not_present",
        blame: Blame::Application,
        hint: USAGE_HINT,
    },
    VkError {
        value: -8,
        name: "VK_ERROR_FEATURE_NOT_PRESENT",
        hpp: "ErrorFeatureNotPresent",
        kind: Kind::CudaError,
        category: "vulkan_feature_not_present",
        blame: Blame::Application,
        hint: USAGE_HINT,
    },
    VkError {
        value: -9,
        name: "VK_ERROR_INCOMPATIBLE_DRIVER",
        hpp: "ErrorIncompatibleDriver",
        kind: Kind::CudaError,
        category: "vulkan_incompatible_driver",
        blame: Blame::Driver,
        hint: DRIVER_HINT,
    },
    VkError {
        value: -10,
        name: "VK_ERROR_TOO_MANY_OBJECTS",
        hpp: "ErrorTooManyObjects",
        kind: Kind::CudaError,
        category: "vulkan_too_many_objects",
        blame: Blame::Application,
        hint: USAGE_HINT,
    },
    VkError {
        value: -11,
        name: "VK_ERROR_FORMAT_NOT_SUPPORTED",
        hpp: "ErrorFormatNotSupported",
        kind: Kind::CudaError,
        category: "vulkan_format_not_supported",
        blame: Blame::Application,
        hint: USAGE_HINT,
    },
    VkError {
        value: -12,
        name: "VK_ERROR_FRAGMENTED_POOL",
        hpp: "ErrorFragmentedPool",
        kind: Kind::CudaError,
        category: "vulkan_fragmented_pool",
        blame: Blame::Application,
        hint: USAGE_HINT,
    },
    VkError {
        value: -13,
        name: "VK_ERROR_UNKNOWN",
        hpp: "ErrorUnknown",
        kind: Kind::CudaError,
        category: "vulkan_unknown",
        blame: Blame::Unknown,
        hint: UNKNOWN_HINT,
    },
    VkError {
        value: -1_000_069_000,
        name: "VK_ERROR_OUT_OF_POOL_MEMORY",
        hpp: "ErrorOutOfPoolMemory",
        kind: Kind::CudaError,
        category: "vulkan_out_of_pool_memory",
        blame: Blame::Application,
        hint: USAGE_HINT,
    },
    VkError {
        value: -1_000_161_000,
        name: "VK_ERROR_FRAGMENTATION",
        hpp: "ErrorFragmentation",
        kind: Kind::CudaError,
        category: "vulkan_fragmentation",
        blame: Blame::Application,
        hint: USAGE_HINT,
    },
];

/// The headline row's literals: every form above holds one of them.
pub const LITERALS: &[&str] = &[
    "VK_ERROR_",
    // Omniverse's Vulkan plugin (Isaac Sim) prints the value's name without its `VK_` prefix:
    // "[carb.graphics-vulkan.plugin] VkResult: ERROR_DEVICE_LOST".
    "VkResult: ERROR_",
    "ErrorOutOfDeviceMemory",
    "ErrorOutOfHostMemory",
    "ErrorDeviceLost",
    "ErrorInitializationFailed",
    "ErrorIncompatibleDriver",
    "ErrorMemoryMapFailed",
    "ErrorTooManyObjects",
    "ErrorOutOfPoolMemory",
    "ErrorFragmentation",
    "vk::OutOfDeviceMemoryError",
    "vk::OutOfHostMemoryError",
    "vk::DeviceLostError",
    "vk::InitializationFailedError",
    "vk::IncompatibleDriverError",
    // ncnn's failed calls, the ones that report the GPU's state (allocation, submission, waiting,
    // device and instance creation).
    "vkAllocateMemory failed",
    "vkQueueSubmit failed",
    "vkWaitForFences failed",
    "vkCreateDevice failed",
    "vkCreateInstance failed",
    "vkEnumeratePhysicalDevices failed",
    "vkCreateBuffer failed",
    "vkCreateImage failed",
    "vkCreateComputePipelines failed",
    "vkAllocateDescriptorSets failed",
    "vkAllocateCommandBuffers failed",
    "vkCreateCommandPool failed",
    OWN_WORDS[0],
    OWN_WORDS[1],
    OWN_WORDS[2],
];

/// The programs' own words for a failed device allocation, which name no value.
const OWN_WORDS: [&str; 3] = [
    "ggml_vulkan: Device memory allocation of size",
    "ggml_vulkan: Memory allocation of size",
    "Error allocating vulkan memory",
];

/// ggml-vulkan's warning of a pinned host buffer it could not get (ggml-vulkan.cpp,
/// `ggml_vk_host_malloc`'s caller), followed by the allocation's own error in parentheses.
const PINNED_FALLBACK: &str = "Failed to allocate pinned memory";

/// The family a line's Vulkan failure names, if it names one this table knows.
pub fn refine(line: &str) -> Option<Evidence> {
    static NAME: OnceLock<Regex> = OnceLock::new();
    // ggml-vulkan falls back to ordinary host memory when pinned memory runs out, and goes on.
    if line.contains(PINNED_FALLBACK) {
        return None;
    }
    static HPP: OnceLock<Regex> = OnceLock::new();
    static CALL: OnceLock<Regex> = OnceLock::new();
    let by = |f: &dyn Fn(&VkError) -> bool| ERRORS.iter().find(|e| f(e));
    let found = cached(&NAME, r"(?:VK_|VkResult: )(ERROR_[A-Z_]+)")
        .captures_iter(line)
        .find_map(|c| {
            let name = c.get(1)?.as_str();
            by(&|e| e.name.strip_prefix("VK_") == Some(name))
        })
        .or_else(|| {
            // `ErrorDeviceLost` alone, not the tail of `cudaErrorDeviceLost`-like identifiers;
            // the class names end in `Error`.
            cached(
                &HPP,
                r"(?:^|[^A-Za-z])(?:(Error[A-Z][A-Za-z]+)|vk::([A-Z][A-Za-z]+)Error)\b",
            )
            .captures_iter(line)
            .find_map(|c| {
                if let Some(n) = c.get(1) {
                    by(&|e| e.hpp == n.as_str())
                } else {
                    let class = c.get(2)?.as_str();
                    by(&|e| e.hpp.strip_prefix("Error") == Some(class))
                }
            })
        })
        .or_else(|| {
            cached(&CALL, r"\bvk[A-Z][A-Za-z0-9]+ failed (-\d{1,10})\b")
                .captures_iter(line)
                .find_map(|c| {
                    let v: i64 = c.get(1)?.as_str().parse().ok()?;
                    by(&|e| e.value == v)
                })
        })
        .or_else(|| {
            let own_words = OWN_WORDS.iter().any(|w| line.contains(w));
            own_words.then(|| by(&|e| e.value == -2)).flatten()
        })?;
    Some(Evidence::Headline {
        kind: found.kind,
        category: found.category.into(),
        blame: found.blame,
        hint: found.hint.into(),
        rule: ROW.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn family(line: &str) -> Option<String> {
        match refine(line)? {
            Evidence::Headline { category, .. } => Some(category.into_owned()),
            _ => None,
        }
    }

    #[test]
    fn every_form_names_the_value() {
        for (line, want) in [
            ("vkAllocateMemory failed -2", "vulkan_oom"),
            (
                "image upscayl:  vkQueueSubmit failed -4",
                "vulkan_device_lost",
            ),
            ("vkCreateInstance failed -9", "vulkan_incompatible_driver"),
            (
                "vkAllocateMemory failed -1000069000",
                "vulkan_out_of_pool_memory",
            ),
            (
                "ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory",
                "vulkan_oom",
            ),
            (
                "  what():  vk::Queue::submit: ErrorDeviceLost",
                "vulkan_device_lost",
            ),
            (
                "terminate called after throwing an instance of 'vk::DeviceLostError'",
                "vulkan_device_lost",
            ),
            (
                "Vulkan Error, code=-2: VK_ERROR_OUT_OF_DEVICE_MEMORY",
                "vulkan_oom",
            ),
            (
                "Error allocating memory ErrorOutOfDeviceMemory",
                "vulkan_oom",
            ),
            (
                "error loading model: Error allocating vulkan memory.",
                "vulkan_oom",
            ),
            (
                "ggml_vulkan: Device memory allocation of size 118497280 failed.",
                "vulkan_oom",
            ),
            ("VK_ERROR_OUT_OF_HOST_MEMORY", "host_oom"),
        ] {
            assert_eq!(family(line).as_deref(), Some(want), "{line}");
        }
    }

    #[test]
    fn other_names_and_values_are_not_vulkan_failures() {
        for line in [
            // CUDA's and HIP's names end like Vulkan-Hpp's.
            "cudaErrorUnknown",
            "hipErrorOutOfMemory",
            // A value the table lacks, and a success.
            "vkQueueSubmit failed -99",
            "vkQueueSubmit failed 0",
            // llama.cpp's pinned host memory falls back and goes on.
            "ggml_vulkan: Failed to allocate pinned memory (vk::Device::allocateMemory: ErrorOutOfDeviceMemory)",
        ] {
            assert_eq!(family(line), None, "{line}");
        }
    }

    #[test]
    fn the_table_and_the_literals_agree() {
        for e in ERRORS {
            assert!(e.name.starts_with("VK_ERROR_") && e.hpp.starts_with("Error"));
            assert!(e.value < 0);
        }
        // Each literal on its own (an ncnn call with a value after it, the name's prefix with a
        // name) reads as a failure: a literal the reader cannot place would open nothing.
        for l in LITERALS {
            let line = if l.ends_with(" failed") {
                format!("{l} -2")
            } else if l.ends_with("ERROR_") {
                format!("{l}DEVICE_LOST")
            } else {
                (*l).to_owned()
            };
            assert!(refine(&line).is_some(), "{line}");
        }
    }
}
