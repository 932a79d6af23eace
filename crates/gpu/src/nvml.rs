//! [`NvmlBackend`]: the real GPU driver, over `nvml-wrapper`.
//!
//! `nvml-wrapper` opens `libnvidia-ml` with `libloading` at `Nvml::init`, so this builds and runs
//! on machines without the NVIDIA driver: opening then fails with [`GpuError::Unavailable`] and
//! the GPU thread retries with backoff. Every field is read with its own call; `NotSupported`,
//! `NoPermission` and any other per-field failure make that field absent (never 0), `GpuLost`
//! marks the GPU lost, and errors that mean the handle is stale (driver unloaded or reloaded)
//! return `Unavailable` so the GPU thread re-initialises NVML.
//!
//! Xid events come from an NVML event set registered for `XidCriticalError` on every GPU that
//! supports it. Errors from the wait are classified as in nvml-wrapper's
//! `examples/event_loop.rs`: `Unknown` and `Timeout` are worth waiting past; `GpuLost` means the
//! set will not work again (it is rebuilt without the lost GPU); `Uninitialized` means NVML itself
//! must be re-initialised.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime};

use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{
    Clock, EccCounter, MemoryError, PerformanceState, RetirementCause, TemperatureSensor,
};
use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
use nvml_wrapper::enums::device::{SampleValue, UsedGpuMemory};
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::sys_exports::field_id::{
    NVML_FI_DEV_MEMORY_TEMP, NVML_FI_DEV_REMAPPED_COR, NVML_FI_DEV_REMAPPED_FAILURE,
    NVML_FI_DEV_REMAPPED_PENDING, NVML_FI_DEV_REMAPPED_UNC,
};
use nvml_wrapper::{Device, EventSet, Nvml};

use crate::backend::{GpuBackend, GpuError};
use crate::{GpuEvent, GpuId, GpuInfo, GpuProcess, GpuSample, NvlinkErrors, ThrottleReason};

/// GPUs read at most, whatever the driver reports (bounds label sets and poll time).
const MAX_DEVICES: u32 = 64;
/// NVLinks tried per GPU (`NVML_NVLINK_MAX_LINKS` in nvml.h).
const MAX_NVLINKS: u32 = 18;

type Events<'a> = Option<EventSet<'a>>;

self_cell::self_cell!(
    /// The NVML handle and the Xid event set, which borrows it.
    struct NvmlCell {
        owner: Nvml,
        #[covariant]
        dependent: Events,
    }
);

/// Whether NVML can be initialised here (the library loads and the driver answers).
pub fn library_present() -> bool {
    Nvml::init().is_ok()
}

/// Reads NVIDIA GPUs through NVML.
pub struct NvmlBackend {
    cell: NvmlCell,
    devices: Vec<GpuId>,
    info: HashMap<u32, GpuInfo>,
}

impl std::fmt::Debug for NvmlBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmlBackend")
            .field("devices", &self.devices)
            .finish_non_exhaustive()
    }
}

/// True for errors that mean the NVML handle cannot be used any more.
fn is_stale(e: &NvmlError) -> bool {
    matches!(
        e,
        NvmlError::Uninitialized
            | NvmlError::DriverNotLoaded
            | NvmlError::LibRmVersionMismatch
            | NvmlError::LibraryNotFound
            | NvmlError::LibloadingError(_)
    )
}

fn unavailable(call: &str, e: &NvmlError) -> GpuError {
    GpuError::Unavailable {
        reason: format!("{call}: {e}"),
    }
}

/// One field's result: `Ok(None)` when the driver cannot supply it, `Err` only when the whole GPU
/// or NVML is gone.
fn field<T>(gpu: u32, r: Result<T, NvmlError>) -> Result<Option<T>, GpuError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(NvmlError::GpuLost) => Err(GpuError::Lost { gpu }),
        Err(e) if is_stale(&e) => Err(unavailable("read", &e)),
        Err(_) => Ok(None),
    }
}

impl NvmlBackend {
    /// Initialises NVML, enumerates the GPUs and registers for Xid events.
    ///
    /// # Errors
    /// [`GpuError::Unavailable`] when the library cannot be loaded or the driver does not answer.
    pub fn open() -> Result<NvmlBackend, GpuError> {
        let nvml = Nvml::init().map_err(|e| unavailable("nvmlInit", &e))?;
        let count = nvml
            .device_count()
            .map_err(|e| unavailable("nvmlDeviceGetCount", &e))?
            .min(MAX_DEVICES);
        let driver_version = nvml.sys_driver_version().ok();
        let cuda_driver_version = nvml.sys_cuda_driver_version().ok().map(|v| {
            format!(
                "{}.{}",
                nvml_wrapper::cuda_driver_version_major(v),
                nvml_wrapper::cuda_driver_version_minor(v)
            )
        });
        let mut devices = Vec::new();
        let mut info = HashMap::new();
        for index in 0..count {
            // A GPU that is already lost is still listed (with what NVML still says about it), so
            // `assertwatch_gpu_lost` shows it instead of it silently disappearing.
            let device = nvml.device_by_index(index);
            let ok = device.as_ref().ok();
            devices.push(GpuId {
                index,
                uuid: ok.and_then(|d| d.uuid().ok()).unwrap_or_default(),
                pci_bus_id: ok
                    .and_then(|d| d.pci_info().ok())
                    .map(|p| p.bus_id)
                    .unwrap_or_default(),
            });
            info.insert(
                index,
                GpuInfo {
                    name: ok.and_then(|d| d.name().ok()),
                    driver_version: driver_version.clone(),
                    vbios_version: ok.and_then(|d| d.vbios_version().ok()),
                    cuda_driver_version: cuda_driver_version.clone(),
                },
            );
        }
        let cell = NvmlCell::new(nvml, |nvml| register_xid_events(nvml, count));
        if cell.borrow_dependent().is_none() {
            tracing::info!(
                "No GPU here supports NVML Xid events; Xids come from the kernel log only."
            );
        }
        Ok(NvmlBackend {
            cell,
            devices,
            info,
        })
    }

    fn device(&self, gpu: &GpuId) -> Result<Device<'_>, GpuError> {
        match self.cell.borrow_owner().device_by_index(gpu.index) {
            Ok(d) => Ok(d),
            Err(NvmlError::GpuLost) => Err(GpuError::Lost { gpu: gpu.index }),
            Err(e) if is_stale(&e) => Err(unavailable("nvmlDeviceGetHandleByIndex", &e)),
            Err(e) => Err(GpuError::Other(format!(
                "nvmlDeviceGetHandleByIndex({}): {e}",
                gpu.index
            ))),
        }
    }
}

/// An event set with `XidCriticalError` registered on every GPU that supports it; `None` when no
/// GPU does. A registration failure frees the whole set (NVML's rule, which nvml-wrapper follows),
/// so the set is rebuilt without the GPU that failed.
fn register_xid_events(nvml: &Nvml, count: u32) -> Events<'_> {
    let mut skip = Vec::new();
    'rebuild: for _ in 0..=count {
        let mut set = match nvml.create_event_set() {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(error = %e, "Cannot create an NVML event set.");
                return None;
            }
        };
        let mut registered = 0;
        for index in (0..count).filter(|i| !skip.contains(i)) {
            let Ok(device) = nvml.device_by_index(index) else {
                continue;
            };
            let supported = device
                .supported_event_types()
                .is_ok_and(|t| t.contains(EventTypes::CRITICAL_XID_ERROR));
            if !supported {
                continue;
            }
            match device.register_events(EventTypes::CRITICAL_XID_ERROR, set) {
                Ok(s) => {
                    set = s;
                    registered += 1;
                }
                Err(e) => {
                    tracing::debug!(gpu = index, error = %e, "Cannot register for Xid events on this GPU.");
                    skip.push(index);
                    continue 'rebuild;
                }
            }
        }
        return (registered > 0).then_some(set);
    }
    None
}

impl GpuBackend for NvmlBackend {
    fn name(&self) -> &'static str {
        "nvml"
    }

    fn devices(&mut self) -> Result<Vec<GpuId>, GpuError> {
        // A cheap call that fails once the handle is stale (all-smi's `device_count().is_ok()`
        // check); a changed count means GPUs came or went, so re-open to enumerate them again.
        let count = self
            .cell
            .borrow_owner()
            .device_count()
            .map_err(|e| unavailable("nvmlDeviceGetCount", &e))?
            .min(MAX_DEVICES);
        if count as usize != self.devices.len() {
            return Err(GpuError::Unavailable {
                reason: format!(
                    "the GPU count changed from {} to {count}",
                    self.devices.len()
                ),
            });
        }
        Ok(self.devices.clone())
    }

    fn info(&mut self, gpu: &GpuId) -> Result<GpuInfo, GpuError> {
        Ok(self.info.get(&gpu.index).cloned().unwrap_or_default())
    }

    fn sample(&mut self, gpu: &GpuId) -> Result<GpuSample, GpuError> {
        let d = self.device(gpu)?;
        read_sample(&d, gpu.index)
    }

    fn wait_event(&mut self, timeout: Duration) -> Result<Option<GpuEvent>, GpuError> {
        let ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX);
        let waited = match self.cell.borrow_dependent() {
            None => {
                std::thread::sleep(timeout);
                return Ok(None);
            }
            Some(set) => set.wait(ms).map(|data| {
                let xid = match data.event_data {
                    Some(XidError::Value(v)) => u32::try_from(v).unwrap_or(u32::MAX),
                    // NVML reports 999 when it cannot tell the Xid number.
                    Some(XidError::Unknown) => 999,
                    None => return None,
                };
                let uuid = data.device.uuid().ok();
                let index = data.device.index().ok();
                Some((xid, uuid, index))
            }),
        };
        match waited {
            Ok(Some((xid, uuid, index))) => {
                let gpu = self
                    .devices
                    .iter()
                    .find(|g| uuid.as_deref() == Some(g.uuid.as_str()) || Some(g.index) == index)
                    .cloned()
                    .unwrap_or(GpuId {
                        index: index.unwrap_or(u32::MAX),
                        uuid: uuid.unwrap_or_default(),
                        pci_bus_id: String::new(),
                    });
                Ok(Some(GpuEvent::Xid {
                    gpu,
                    xid,
                    pid: None,
                    at: SystemTime::now(),
                }))
            }
            Ok(None) | Err(NvmlError::Timeout) | Err(NvmlError::Unknown) => Ok(None),
            Err(NvmlError::GpuLost) => {
                // The set will keep failing; rebuild it (the lost GPU no longer registers).
                let count = self.devices.len() as u32;
                self.cell.with_dependent_mut(|nvml, events| {
                    *events = None;
                    *events = register_xid_events(nvml, count);
                });
                std::thread::sleep(timeout);
                Ok(None)
            }
            Err(e) if is_stale(&e) => Err(unavailable("nvmlEventSetWait", &e)),
            Err(e) => Err(GpuError::Other(format!("nvmlEventSetWait: {e}"))),
        }
    }

    fn processes(&mut self, gpu: &GpuId) -> Result<Vec<GpuProcess>, GpuError> {
        let d = self.device(gpu)?;
        let Some(list) = field(gpu.index, d.running_compute_processes())? else {
            return Ok(Vec::new());
        };
        let nvml = self.cell.borrow_owner();
        Ok(list
            .into_iter()
            .map(|p| GpuProcess {
                pid: p.pid,
                name: nvml.sys_process_name(p.pid, 64).ok(),
                used_memory_bytes: match p.used_gpu_memory {
                    UsedGpuMemory::Used(b) => Some(b),
                    UsedGpuMemory::Unavailable => None,
                },
                pod: None,
            })
            .collect())
    }
}

fn pstate_number(p: PerformanceState) -> Option<u32> {
    use PerformanceState::*;
    Some(match p {
        Zero => 0,
        One => 1,
        Two => 2,
        Three => 3,
        Four => 4,
        Five => 5,
        Six => 6,
        Seven => 7,
        Eight => 8,
        Nine => 9,
        Ten => 10,
        Eleven => 11,
        Twelve => 12,
        Thirteen => 13,
        Fourteen => 14,
        Fifteen => 15,
        Unknown => return None,
    })
}

fn throttle_bit(r: ThrottleReason) -> ThrottleReasons {
    match r {
        ThrottleReason::GpuIdle => ThrottleReasons::GPU_IDLE,
        ThrottleReason::ApplicationsClocksSetting => ThrottleReasons::APPLICATIONS_CLOCKS_SETTING,
        ThrottleReason::SwPowerCap => ThrottleReasons::SW_POWER_CAP,
        ThrottleReason::HwSlowdown => ThrottleReasons::HW_SLOWDOWN,
        ThrottleReason::SyncBoost => ThrottleReasons::SYNC_BOOST,
        ThrottleReason::SwThermalSlowdown => ThrottleReasons::SW_THERMAL_SLOWDOWN,
        ThrottleReason::HwThermalSlowdown => ThrottleReasons::HW_THERMAL_SLOWDOWN,
        ThrottleReason::HwPowerBrakeSlowdown => ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN,
        ThrottleReason::DisplayClockSetting => ThrottleReasons::DISPLAY_CLOCK_SETTING,
    }
}

fn sample_f64(v: &SampleValue) -> f64 {
    match *v {
        SampleValue::F64(x) => x,
        SampleValue::U32(x) => f64::from(x),
        SampleValue::U64(x) => x as f64,
        SampleValue::I64(x) => x as f64,
    }
}

fn sample_u64(v: &SampleValue) -> Option<u64> {
    match *v {
        SampleValue::U32(x) => Some(u64::from(x)),
        SampleValue::U64(x) => Some(x),
        SampleValue::I64(x) => u64::try_from(x).ok(),
        SampleValue::F64(x) => (x >= 0.0).then_some(x as u64),
    }
}

/// Reads every [`GpuSample`] field of one GPU (the NVML call for each is named in docs/gpu.md).
fn read_sample(d: &Device<'_>, gpu: u32) -> Result<GpuSample, GpuError> {
    let mut s = GpuSample::default();
    if let Some(u) = field(gpu, d.utilization_rates())? {
        s.utilization_ratio = Some(f64::from(u.gpu) / 100.0);
        s.memory_utilization_ratio = Some(f64::from(u.memory) / 100.0);
    }
    if let Some(m) = field(gpu, d.memory_info())? {
        s.memory_used_bytes = Some(m.used);
        s.memory_free_bytes = Some(m.free);
        s.memory_total_bytes = Some(m.total);
    }
    s.temperature_gpu_celsius = field(gpu, d.temperature(TemperatureSensor::Gpu))?.map(f64::from);
    // milliwatts and millijoules
    s.power_watts = field(gpu, d.power_usage())?.map(|mw| f64::from(mw) / 1000.0);
    s.power_limit_watts = field(gpu, d.enforced_power_limit())?.map(|mw| f64::from(mw) / 1000.0);
    s.energy_joules = field(gpu, d.total_energy_consumption())?.map(|mj| mj as f64 / 1000.0);
    // megahertz
    let mhz = |c| field(gpu, d.clock_info(c)).map(|v| v.map(|m| f64::from(m) * 1e6));
    s.clock_sm_hertz = mhz(Clock::SM)?;
    s.clock_memory_hertz = mhz(Clock::Memory)?;
    s.clock_graphics_hertz = mhz(Clock::Graphics)?;
    s.pstate = field(gpu, d.performance_state())?.and_then(pstate_number);
    let supported = field(gpu, d.supported_throttle_reasons())?;
    let current = field(gpu, d.current_throttle_reasons())?;
    if let (Some(supported), Some(current)) = (supported, current) {
        let map: BTreeMap<_, _> = ThrottleReason::ALL
            .iter()
            .filter(|r| supported.contains(throttle_bit(**r)))
            .map(|r| (*r, current.contains(throttle_bit(*r))))
            .collect();
        s.throttle_reasons = Some(map);
    }
    if let Some(n) = field(gpu, d.num_fans())?.filter(|n| *n > 0) {
        let fans: Option<Vec<f64>> = (0..n.min(32))
            .map(|i| field(gpu, d.fan_speed(i)).map(|v| v.map(|pct| f64::from(pct) / 100.0)))
            .collect::<Result<_, _>>()?;
        s.fan_speed_ratio = fans;
    }
    let ecc = |t, c| field(gpu, d.total_ecc_errors(t, c));
    s.ecc_corrected_volatile = ecc(MemoryError::Corrected, EccCounter::Volatile)?;
    s.ecc_uncorrected_volatile = ecc(MemoryError::Uncorrected, EccCounter::Volatile)?;
    s.ecc_corrected_aggregate = ecc(MemoryError::Corrected, EccCounter::Aggregate)?;
    s.ecc_uncorrected_aggregate = ecc(MemoryError::Uncorrected, EccCounter::Aggregate)?;
    let retired = |c| field(gpu, d.retired_pages(c)).map(|v| v.map(|p| p.len() as u64));
    s.retired_pages_single_bit_ecc = retired(RetirementCause::MultipleSingleBitEccErrors)?;
    s.retired_pages_double_bit_ecc = retired(RetirementCause::DoubleBitEccError)?;
    s.retired_pages_pending = field(gpu, d.are_pages_pending_retired())?;
    read_field_values(d, gpu, &mut s)?;
    s.pcie_replay_errors = field(gpu, d.pcie_replay_counter())?.map(u64::from);
    s.pcie_link_generation = field(gpu, d.current_pcie_link_gen())?;
    s.pcie_link_width = field(gpu, d.current_pcie_link_width())?;
    s.nvlink_errors = read_nvlinks(d, gpu)?;
    Ok(s)
}

/// HBM temperature and remapped rows, which NVML exposes only as field values.
fn read_field_values(d: &Device<'_>, gpu: u32, s: &mut GpuSample) -> Result<(), GpuError> {
    let ids = [
        FieldId(NVML_FI_DEV_MEMORY_TEMP),
        FieldId(NVML_FI_DEV_REMAPPED_COR),
        FieldId(NVML_FI_DEV_REMAPPED_UNC),
        FieldId(NVML_FI_DEV_REMAPPED_PENDING),
        FieldId(NVML_FI_DEV_REMAPPED_FAILURE),
    ];
    let Some(values) = field(gpu, d.field_values_for(&ids))? else {
        return Ok(());
    };
    for value in values.into_iter().flatten() {
        let Ok(v) = value.value else { continue };
        match value.field.0 {
            NVML_FI_DEV_MEMORY_TEMP => s.temperature_memory_celsius = Some(sample_f64(&v)),
            NVML_FI_DEV_REMAPPED_COR => s.remapped_rows_correctable = sample_u64(&v),
            NVML_FI_DEV_REMAPPED_UNC => s.remapped_rows_uncorrectable = sample_u64(&v),
            NVML_FI_DEV_REMAPPED_PENDING => {
                s.remapped_rows_pending = sample_u64(&v).map(|x| x != 0)
            }
            NVML_FI_DEV_REMAPPED_FAILURE => {
                s.remapped_rows_failure = sample_u64(&v).map(|x| x != 0)
            }
            _ => {}
        }
    }
    Ok(())
}

/// Error counters of every active NVLink; `None` when the GPU has no NVLink support.
fn read_nvlinks(d: &Device<'_>, gpu: u32) -> Result<Option<Vec<NvlinkErrors>>, GpuError> {
    let mut links = Vec::new();
    let mut any_supported = false;
    for link in 0..MAX_NVLINKS {
        let l = d.link_wrapper_for(link);
        match field(gpu, l.is_active())? {
            Some(true) => {
                any_supported = true;
                let counter = |c| field(gpu, l.error_counter(c));
                links.push(NvlinkErrors {
                    link,
                    crc_flit: counter(ErrorCounter::DlCrcFlit)?,
                    crc_data: counter(ErrorCounter::DlCrcData)?,
                    replay: counter(ErrorCounter::DlReplay)?,
                    recovery: counter(ErrorCounter::DlRecovery)?,
                });
            }
            Some(false) => any_supported = true,
            // Not supported, or past the GPU's last link.
            None => break,
        }
    }
    Ok(any_supported.then_some(links))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_without_a_driver_is_unavailable_and_quick() {
        let t = std::time::Instant::now();
        match NvmlBackend::open() {
            Ok(b) => {
                eprintln!("notice: NVML works here ({b:?}); the no-driver path is not exercised")
            }
            Err(e) => {
                assert!(matches!(e, GpuError::Unavailable { .. }), "{e}");
                assert!(e.to_string().contains("nvmlInit"), "{e}");
            }
        }
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn every_throttle_reason_has_a_distinct_bit() {
        let mut seen = ThrottleReasons::empty();
        for r in ThrottleReason::ALL {
            let bit = throttle_bit(r);
            assert!(!seen.intersects(bit), "{r:?}");
            seen |= bit;
        }
    }

    #[test]
    fn field_maps_errors_to_absent_lost_or_unavailable() {
        assert_eq!(field(0, Ok(5)).unwrap(), Some(5));
        assert_eq!(field::<u32>(0, Err(NvmlError::NotSupported)).unwrap(), None);
        assert_eq!(field::<u32>(0, Err(NvmlError::NoPermission)).unwrap(), None);
        assert!(matches!(
            field::<u32>(3, Err(NvmlError::GpuLost)),
            Err(GpuError::Lost { gpu: 3 })
        ));
        assert!(matches!(
            field::<u32>(0, Err(NvmlError::Uninitialized)),
            Err(GpuError::Unavailable { .. })
        ));
    }
}
