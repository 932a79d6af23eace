//! The CUDA health probe: run a tiny known computation on one GPU through the CUDA driver API and
//! check every element of the answer.
//!
//! It answers "can this GPU still run a kernel correctly?" after an Xid or a device-side assert,
//! without PyTorch or a toolkit on the node. `libcuda` is loaded at run time by `cudarc`; the
//! kernel ships as hand-written PTX text that the driver JIT-compiles for whatever GPU it finds
//! (PTX ISA 7.0, `sm_52`, so any driver since CUDA 11.0 and any GPU since Maxwell can run it). The
//! probe runs on its own thread with a timeout, so a hung GPU cannot hang the caller, and a missing
//! driver is an error value ([`ProbeError::NoDriver`]), never a panic.

use std::collections::BTreeMap;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, DriverError, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;

/// Elements in the probe's vectors (4 MiB per vector of `f32`).
const N: u32 = 1 << 20;
/// The multiplier `a` in `y[i] = a * x[i] + i`.
const A: f32 = 2.0;
const KERNEL: &str = "axpy_index";

/// `y[i] = a * x[i] + i` for `i < n`, one thread per element. Hand-written so that no compiler is
/// needed anywhere; `fma.rn.f32` matches `f32::mul_add` on the host bit for bit.
const PTX: &str = r#"
.version 7.0
.target sm_52
.address_size 64

.visible .entry axpy_index(
    .param .u64 y_ptr,
    .param .u64 x_ptr,
    .param .f32 a,
    .param .u32 n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [y_ptr];
    ld.param.u64 %rd2, [x_ptr];
    ld.param.f32 %f1, [a];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r5, 4;
    add.s64 %rd6, %rd4, %rd5;
    ld.global.f32 %f2, [%rd6];
    cvt.rn.f32.u32 %f3, %r5;
    fma.rn.f32 %f4, %f1, %f2, %f3;
    add.s64 %rd7, %rd3, %rd5;
    st.global.f32 [%rd7], %f4;
DONE:
    ret;
}
"#;

/// Why no probe report could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    /// `libcuda` could not be loaded (no NVIDIA driver on this machine or in this container).
    #[error("no CUDA driver: {reason}")]
    NoDriver {
        /// What was looked for.
        reason: String,
    },
    /// The probe did not finish in time; its thread is left behind, blocked in the driver.
    #[error("the CUDA probe of GPU {gpu} did not finish within {after:?}")]
    Timeout {
        /// CUDA device ordinal.
        gpu: u32,
        /// The timeout.
        after: Duration,
    },
    /// The CUDA bindings panicked (e.g. a driver too old to have a symbol they need).
    #[error("the CUDA probe of GPU {gpu} failed inside the CUDA bindings: {message}")]
    Panicked {
        /// CUDA device ordinal.
        gpu: u32,
        /// The panic message.
        message: String,
    },
}

/// One timed step of the probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbePhase {
    /// `init`, `context`, `alloc`, `copy_in`, `load_module`, `launch`, `copy_out` or `verify`.
    pub name: &'static str,
    /// Wall time of the step.
    pub duration: Duration,
}

/// What one probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeReport {
    /// CUDA device ordinal probed (equal to the NVML index only under
    /// `CUDA_DEVICE_ORDER=PCI_BUS_ID`; match GPUs by `uuid`).
    pub gpu: u32,
    /// Device name, where it was read.
    pub name: Option<String>,
    /// `GPU-…` UUID in NVML's format, where it was read.
    pub uuid: Option<String>,
    /// PCI bus id in NVML's format (`00000000:17:00.0`), where it was read.
    pub pci_bus_id: Option<String>,
    /// Every step succeeded and every element matched.
    pub ok: bool,
    /// Wall time of the whole probe.
    pub duration: Duration,
    /// The steps that ran, in order.
    pub phases: Vec<ProbePhase>,
    /// Elements whose value differed from the host's answer.
    pub mismatches: u64,
    /// The first failure: the step and the driver's error.
    pub error: Option<String>,
}

/// Probes CUDA device `gpu` on a separate thread, waiting at most `timeout`.
///
/// # Errors
/// [`ProbeError::NoDriver`] when `libcuda` cannot be loaded, [`ProbeError::Timeout`] when the probe
/// hangs, [`ProbeError::Panicked`] when the bindings panic. A CUDA failure inside the probe (no such
/// device, launch failure, wrong results) is a report with `ok: false` and `error` set.
pub fn probe(gpu: u32, timeout: Duration) -> Result<ProbeReport, ProbeError> {
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name(format!("cuda-probe-{gpu}"))
        .spawn(move || {
            let result = std::panic::catch_unwind(|| run(gpu));
            // The receiver is gone when the caller timed out; nothing to do then.
            let _ = tx.send(result);
        });
    if let Err(e) = spawned {
        return Err(ProbeError::Panicked {
            gpu,
            message: format!("cannot start the probe thread: {e}"),
        });
    }
    match rx.recv_timeout(timeout) {
        Ok(Ok(result)) => result,
        Ok(Err(panic)) => Err(ProbeError::Panicked {
            gpu,
            message: panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "unknown panic".to_owned()),
        }),
        Err(mpsc::RecvTimeoutError::Timeout) => Err(ProbeError::Timeout {
            gpu,
            after: timeout,
        }),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(ProbeError::Panicked {
            gpu,
            message: "the probe thread ended without a result".to_owned(),
        }),
    }
}

/// Whether `libcuda` can be loaded, without initialising it.
pub fn driver_present() -> bool {
    // SAFETY: the call is unsafe because loading a shared object runs its initialisers, which
    // the compiler cannot check. The only names tried are the NVIDIA driver's own (`libcuda`,
    // cudarc's candidate list), the library every later CUDA call loads anyway; nothing of ours
    // is passed to it, and the handle is closed again before the call returns.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

struct Steps {
    start: Instant,
    report: ProbeReport,
}

impl Steps {
    fn step<T>(
        &mut self,
        name: &'static str,
        f: impl FnOnce() -> Result<T, DriverError>,
    ) -> Option<T> {
        let t = Instant::now();
        let out = f();
        self.report.phases.push(ProbePhase {
            name,
            duration: t.elapsed(),
        });
        match out {
            Ok(v) => Some(v),
            Err(e) => {
                self.report.error = Some(format!("{name}: {e}"));
                None
            }
        }
    }

    fn finish(mut self) -> ProbeReport {
        self.report.duration = self.start.elapsed();
        self.report.ok = self.report.error.is_none() && self.report.mismatches == 0;
        self.report
    }
}

fn run(gpu: u32) -> Result<ProbeReport, ProbeError> {
    if !driver_present() {
        return Err(ProbeError::NoDriver {
            reason: format!(
                "none of {:?} could be loaded",
                cudarc::get_lib_name_candidates("cuda")
            ),
        });
    }
    let mut s = Steps {
        start: Instant::now(),
        report: ProbeReport {
            gpu,
            name: None,
            uuid: None,
            pci_bus_id: None,
            ok: false,
            duration: Duration::ZERO,
            phases: Vec::new(),
            mismatches: 0,
            error: None,
        },
    };
    run_steps(&mut s, gpu);
    Ok(s.finish())
}

fn run_steps(s: &mut Steps, gpu: u32) -> Option<()> {
    let count = s.step("init", CudaContext::device_count)?;
    if i64::from(gpu) >= i64::from(count) {
        s.report.error = Some(format!("init: no CUDA device {gpu}; {count} visible"));
        return None;
    }
    let ctx = s.step("context", || CudaContext::new(gpu as usize))?;
    s.report.name = ctx.name().ok();
    s.report.uuid = ctx.uuid().ok().map(|u| format_uuid(&u.bytes));
    s.report.pci_bus_id = pci_bus_id(&ctx);
    let stream = ctx.default_stream();
    let x_host: Vec<f32> = (0..N).map(|i| (i % 1000) as f32 * 0.5).collect();
    let mut y_dev = s.step("alloc", || stream.alloc_zeros::<f32>(N as usize))?;
    let x_dev = s.step("copy_in", || stream.clone_htod(&x_host))?;
    let func = s.step("load_module", || {
        ctx.load_module(Ptx::from_src(PTX))?.load_function(KERNEL)
    })?;
    s.step("launch", || {
        let mut args = stream.launch_builder(&func);
        args.arg(&mut y_dev).arg(&x_dev).arg(&A).arg(&N);
        // SAFETY: the kernel's parameters are (u64 y, u64 x, f32 a, u32 n), matching the
        // arguments pushed above in order and type; both buffers hold N f32 elements and the
        // kernel touches only indices below n = N, so no thread reads or writes out of bounds.
        unsafe { args.launch(LaunchConfig::for_num_elems(N)) }?;
        stream.synchronize()
    })?;
    let y_host = s.step("copy_out", || stream.clone_dtoh(&y_dev))?;
    let t = Instant::now();
    s.report.mismatches = count_mismatches(&x_host, &y_host);
    s.report.phases.push(ProbePhase {
        name: "verify",
        duration: t.elapsed(),
    });
    Some(())
}

/// Elements of `y` that differ from `A * x[i] + i` (or are missing).
fn count_mismatches(x: &[f32], y: &[f32]) -> u64 {
    let wrong = x
        .iter()
        .zip(y)
        .enumerate()
        .filter(|(i, (x, y))| A.mul_add(**x, *i as f32).to_bits() != y.to_bits())
        .count();
    (wrong + x.len().abs_diff(y.len())) as u64
}

/// NVML's UUID format: `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
fn format_uuid(bytes: &[std::ffi::c_char; 16]) -> String {
    let hex: Vec<String> = bytes.iter().map(|b| format!("{:02x}", *b as u8)).collect();
    let h = hex.concat();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn pci_bus_id(ctx: &Arc<CudaContext>) -> Option<String> {
    use cudarc::driver::sys::CUdevice_attribute::{
        CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID,
        CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID,
    };
    let domain = ctx.attribute(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID).ok()?;
    let bus = ctx.attribute(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID).ok()?;
    let device = ctx.attribute(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID).ok()?;
    Some(format!("{domain:08X}:{bus:02X}:{device:02X}.0"))
}

/// The last probe result per GPU, which [`crate::GpuCollector`] renders as
/// `assertwatch_gpu_probe_success` and `assertwatch_gpu_probe_duration_seconds`. Clones share
/// the same results.
#[derive(Debug, Clone, Default)]
pub struct ProbeMetrics(Arc<Mutex<BTreeMap<u32, ProbeResult>>>);

/// The part of a [`ProbeReport`] that becomes metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeResult {
    /// `GPU-…` UUID, used to find the GPU's labels in the snapshot.
    pub uuid: Option<String>,
    /// PCI bus id, used as a label when the UUID is not in the snapshot.
    pub pci_bus_id: Option<String>,
    /// The probe passed.
    pub ok: bool,
    /// Its wall time.
    pub duration: Duration,
}

impl ProbeMetrics {
    /// Records the outcome of a probe of CUDA device `gpu`.
    pub fn record(&self, report: &ProbeReport) {
        let result = ProbeResult {
            uuid: report.uuid.clone(),
            pci_bus_id: report.pci_bus_id.clone(),
            ok: report.ok,
            duration: report.duration,
        };
        self.lock().insert(report.gpu, result);
    }

    /// Records a probe that produced no report (timeout, panic) as a failure.
    pub fn record_failure(&self, gpu: u32, duration: Duration) {
        let mut map = self.lock();
        let previous = map.get(&gpu).cloned();
        map.insert(
            gpu,
            ProbeResult {
                uuid: previous.as_ref().and_then(|p| p.uuid.clone()),
                pci_bus_id: previous.and_then(|p| p.pci_bus_id),
                ok: false,
                duration,
            },
        );
    }

    /// Every GPU's last result, by CUDA ordinal.
    pub fn results(&self) -> Vec<(u32, ProbeResult)> {
        self.lock().iter().map(|(k, v)| (*k, v.clone())).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u32, ProbeResult>> {
        // The map is always left consistent, so a poisoned lock is still usable.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_driver_is_an_error_not_a_panic() {
        if driver_present() {
            eprintln!("notice: libcuda is present here; the no-driver path is not exercised");
            return;
        }
        let t = Instant::now();
        let err = probe(0, Duration::from_secs(10)).unwrap_err();
        assert!(matches!(err, ProbeError::NoDriver { .. }), "{err}");
        assert!(err.to_string().contains("libcuda"), "{err}");
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn host_answer_matches_itself_and_mismatches_are_counted() {
        let x: Vec<f32> = (0..100u32).map(|i| i as f32 * 0.5).collect();
        let mut y: Vec<f32> = x
            .iter()
            .enumerate()
            .map(|(i, x)| A.mul_add(*x, i as f32))
            .collect();
        assert_eq!(count_mismatches(&x, &y), 0);
        y[3] += 1.0;
        y.pop();
        assert_eq!(count_mismatches(&x, &y), 2);
    }

    #[test]
    fn uuid_is_formatted_like_nvml() {
        let raw: [u8; 16] = [
            0x5a, 0x1c, 0x0e, 0x9e, 0x61, 0xf2, 0x4c, 0x7a, 0x9a, 0x0b, 0x1f, 0x3b, 0x2c, 0x4d,
            0x5e, 0x60,
        ];
        let bytes = raw.map(|b| b as std::ffi::c_char);
        assert_eq!(
            format_uuid(&bytes),
            "GPU-5a1c0e9e-61f2-4c7a-9a0b-1f3b2c4d5e60"
        );
    }

    #[test]
    fn ptx_declares_the_kernel_it_launches() {
        assert!(PTX.contains(&format!(".entry {KERNEL}(")));
    }
}
