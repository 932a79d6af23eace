//! [`GpuSample`]: one reading of every per-GPU field, each optional.
//!
//! The field list lives in one macro invocation so that the struct, the names the fake script
//! accepts, merging keyframes and marking fields unsupported can never drift apart: adding a field
//! is one line here plus its rendering in `collector.rs` and its read in `nvml.rs`.

use std::collections::BTreeMap;

use serde::Deserialize;

/// Why the clocks are held down, one NVML `nvmlClocksThrottleReason*` bit each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThrottleReason {
    /// Nothing is running.
    GpuIdle,
    /// Clocks set by the application (`nvidia-smi -ac`) or the administrator.
    ApplicationsClocksSetting,
    /// Software power cap (the power limit).
    SwPowerCap,
    /// Hardware slowdown (temperature or external power brake).
    HwSlowdown,
    /// Held down to match other GPUs in a sync-boost group.
    SyncBoost,
    /// Software thermal slowdown.
    SwThermalSlowdown,
    /// Hardware thermal slowdown.
    HwThermalSlowdown,
    /// Hardware power brake (external signal, e.g. the PSU).
    HwPowerBrakeSlowdown,
    /// Display clock setting.
    DisplayClockSetting,
}

impl ThrottleReason {
    /// Every reason, in label order.
    pub const ALL: [ThrottleReason; 9] = [
        ThrottleReason::GpuIdle,
        ThrottleReason::ApplicationsClocksSetting,
        ThrottleReason::SwPowerCap,
        ThrottleReason::HwSlowdown,
        ThrottleReason::SyncBoost,
        ThrottleReason::SwThermalSlowdown,
        ThrottleReason::HwThermalSlowdown,
        ThrottleReason::HwPowerBrakeSlowdown,
        ThrottleReason::DisplayClockSetting,
    ];

    /// The `reason` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ThrottleReason::GpuIdle => "gpu_idle",
            ThrottleReason::ApplicationsClocksSetting => "applications_clocks_setting",
            ThrottleReason::SwPowerCap => "sw_power_cap",
            ThrottleReason::HwSlowdown => "hw_slowdown",
            ThrottleReason::SyncBoost => "sync_boost",
            ThrottleReason::SwThermalSlowdown => "sw_thermal_slowdown",
            ThrottleReason::HwThermalSlowdown => "hw_thermal_slowdown",
            ThrottleReason::HwPowerBrakeSlowdown => "hw_power_brake_slowdown",
            ThrottleReason::DisplayClockSetting => "display_clock_setting",
        }
    }
}

/// NVLink error counters of one active link; each absent when the driver does not report it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvlinkErrors {
    /// Link number.
    pub link: u32,
    /// Data-link CRC errors in flow-control units.
    #[serde(default)]
    pub crc_flit: Option<u64>,
    /// Data-link CRC errors in data packets.
    #[serde(default)]
    pub crc_data: Option<u64>,
    /// Data-link replays.
    #[serde(default)]
    pub replay: Option<u64>,
    /// Data-link recoveries.
    #[serde(default)]
    pub recovery: Option<u64>,
}

/// How a newer keyframe value combines with the held one: scalars and lists are replaced, maps
/// are merged key by key.
trait Merge {
    fn merge(&mut self, newer: &Self);
}

macro_rules! replace_on_merge {
    ($($t:ty),*) => {$(
        impl Merge for Option<$t> {
            fn merge(&mut self, newer: &Self) {
                if newer.is_some() {
                    self.clone_from(newer);
                }
            }
        }
    )*};
}

replace_on_merge!(f64, u64, u32, bool, Vec<f64>, Vec<NvlinkErrors>);

impl<K: Ord + Copy, V: Copy> Merge for Option<BTreeMap<K, V>> {
    fn merge(&mut self, newer: &Self) {
        if let Some(newer) = newer {
            self.get_or_insert_with(BTreeMap::new).extend(newer.iter());
        }
    }
}

macro_rules! gpu_sample {
    ($( $(#[$meta:meta])* $field:ident : $ty:ty ),* $(,)?) => {
        /// One reading of every per-GPU field. `None` means the driver could not supply the value
        /// (not supported on this GPU, no permission, or not read yet): it produces no series and
        /// is never taken as 0.
        ///
        /// Field names are also the keys of the fake script's keyframes.
        #[derive(Debug, Clone, Default, PartialEq, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct GpuSample {
            $( $(#[$meta])* #[serde(default)] pub $field: Option<$ty>, )*
        }

        impl GpuSample {
            /// Every field name, in declaration order.
            pub const FIELD_NAMES: &'static [&'static str] = &[$(stringify!($field)),*];

            /// Copies every field that `newer` has over `self` (keyframes hold their values until
            /// a later keyframe changes them). Throttle reasons merge reason by reason.
            pub fn overlay(&mut self, newer: &GpuSample) {
                $( Merge::merge(&mut self.$field, &newer.$field); )*
            }

            /// Makes field `name` absent. Returns false when there is no such field.
            pub fn clear_field(&mut self, name: &str) -> bool {
                match name {
                    $( stringify!($field) => { self.$field = None; true } )*
                    _ => false,
                }
            }
        }
    };
}

gpu_sample! {
    /// Fraction of the last sample period a kernel ran (`nvmlDeviceGetUtilizationRates().gpu`).
    utilization_ratio: f64,
    /// Fraction of the last sample period device memory was read or written.
    memory_utilization_ratio: f64,
    /// Framebuffer memory in use.
    memory_used_bytes: u64,
    /// Framebuffer memory free.
    memory_free_bytes: u64,
    /// Framebuffer memory installed.
    memory_total_bytes: u64,
    /// GPU die temperature.
    temperature_gpu_celsius: f64,
    /// HBM temperature (data-centre GPUs only).
    temperature_memory_celsius: f64,
    /// Board power draw.
    power_watts: f64,
    /// Enforced power limit.
    power_limit_watts: f64,
    /// Energy since the driver loaded.
    energy_joules: f64,
    /// Current SM clock.
    clock_sm_hertz: f64,
    /// Current memory clock.
    clock_memory_hertz: f64,
    /// Current graphics clock.
    clock_graphics_hertz: f64,
    /// Performance state, 0 (fastest) to 15.
    pstate: u32,
    /// Every throttle reason the GPU supports, with whether it is active now.
    throttle_reasons: BTreeMap<ThrottleReason, bool>,
    /// Fan speed per fan as a fraction of the maximum (index = fan number).
    fan_speed_ratio: Vec<f64>,
    /// ECC corrected errors since the last driver load.
    ecc_corrected_volatile: u64,
    /// ECC uncorrected errors since the last driver load.
    ecc_uncorrected_volatile: u64,
    /// ECC corrected errors over the GPU's lifetime.
    ecc_corrected_aggregate: u64,
    /// ECC uncorrected errors over the GPU's lifetime.
    ecc_uncorrected_aggregate: u64,
    /// Pages retired after multiple single-bit ECC errors.
    retired_pages_single_bit_ecc: u64,
    /// Pages retired after a double-bit ECC error.
    retired_pages_double_bit_ecc: u64,
    /// A page retirement waits for the next driver reload.
    retired_pages_pending: bool,
    /// Rows remapped after correctable errors.
    remapped_rows_correctable: u64,
    /// Rows remapped after uncorrectable errors.
    remapped_rows_uncorrectable: u64,
    /// A row remap waits for the next GPU reset.
    remapped_rows_pending: bool,
    /// A row remap failed (the GPU needs service).
    remapped_rows_failure: bool,
    /// PCIe replays since the driver loaded.
    pcie_replay_errors: u64,
    /// Current PCIe link generation.
    pcie_link_generation: u32,
    /// Current PCIe link width (lanes).
    pcie_link_width: u32,
    /// Error counters of every active NVLink.
    nvlink_errors: Vec<NvlinkErrors>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlay_keeps_fields_the_newer_sample_lacks() {
        let mut a = GpuSample {
            utilization_ratio: Some(0.5),
            power_watts: Some(100.0),
            ..GpuSample::default()
        };
        let b = GpuSample {
            power_watts: Some(200.0),
            ..GpuSample::default()
        };
        a.overlay(&b);
        assert_eq!(a.utilization_ratio, Some(0.5));
        assert_eq!(a.power_watts, Some(200.0));
    }

    #[test]
    fn overlay_merges_throttle_reasons() {
        let mut a = GpuSample {
            throttle_reasons: Some(BTreeMap::from([
                (ThrottleReason::GpuIdle, true),
                (ThrottleReason::SwPowerCap, false),
            ])),
            ..GpuSample::default()
        };
        a.overlay(&GpuSample {
            throttle_reasons: Some(BTreeMap::from([(ThrottleReason::GpuIdle, false)])),
            ..GpuSample::default()
        });
        assert_eq!(
            a.throttle_reasons,
            Some(BTreeMap::from([
                (ThrottleReason::GpuIdle, false),
                (ThrottleReason::SwPowerCap, false),
            ]))
        );
    }

    #[test]
    fn clear_field_knows_every_name_and_rejects_others() {
        let mut s = GpuSample {
            pstate: Some(0),
            ..GpuSample::default()
        };
        for name in GpuSample::FIELD_NAMES {
            assert!(s.clear_field(name), "{name}");
        }
        assert_eq!(s, GpuSample::default());
        assert!(!s.clear_field("no_such_field"));
    }
}
