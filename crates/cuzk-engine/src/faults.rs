//! Device faults and partition retries: a faulty device fails partitions, never jobs in
//! bulk, and never the daemon.
//!
//! - **Routes.** Every synthesized partition carries a [`Route`]: the devices whose
//!   attempt at it failed, and whether only a CPU device may prove it. A prove worker
//!   takes the first ready partition its device may prove. The CPU fallback device (added
//!   when every configured device is a GPU) takes only partitions that no in-service
//!   regular device may take, so healthy GPUs never wait on it.
//! - **Device faults.** A backend error or panic is a fault of the device: the partition
//!   goes back to the ready queue with that device excluded, and the
//!   `device_fault_threshold`-th consecutive fault takes the device out of service. An
//!   assignment that does not fit its parameters is the request's fault: the job fails.
//! - **Hung calls.** A GPU backend call runs on a thread of its own, watched for
//!   `prove_timeout`. When the limit passes, the partition is retried elsewhere and the
//!   device goes out of service at once: the stuck thread cannot be killed and may hold
//!   the device's compute token for ever, so nothing is sent there again. Its assignment
//!   stays allocated until the call returns, if it ever does. CPU backends are not
//!   watched: they wait on no driver, and a 32 GiB partition takes tens of minutes there.
//! - **Verification.** When a job's assembled proof fails verification, each partition
//!   proof is checked on its own; the failing ones are synthesized again and proved once
//!   more on a CPU device (design.md: "a GPU result that fails verification is retried
//!   once on the CPU path"), and each counts as a fault of the device that proved it.
//! - **Nowhere left.** A partition that no in-service device may take fails its job with
//!   a reason starting "no healthy device", and so does every job waiting behind it.
//!
//! A device out of service stays out until the daemon restarts or
//! [`crate::Engine::restore_device`] is called; status and metrics show it and why.

use std::panic::AssertUnwindSafe;
use std::sync::mpsc::{sync_channel, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use cuzk_groth16::prover::ProveError;
use cuzk_groth16::{Assignment, BackendError, Proof, ProveReport, Scalar, Srs, VerifyingKey};
use ff::Field;
use tracing::warn;

use crate::device::{Device, FaultEffect};
use crate::state::{Job, JobEnd, Ready, Shared, State};
use crate::{Engine, JobState};

/// The start of every "no in-service device may prove it" failure reason.
pub(crate) const NO_HEALTHY_DEVICE: &str = "no healthy device";

/// Where a synthesized partition may still be proved.
#[derive(Clone, Debug, Default)]
pub(crate) struct Route {
    /// Devices (engine indices) whose attempt at this partition failed.
    pub failed_on: Vec<usize>,
    /// Only a CPU device may prove it: a GPU proof of it failed verification.
    pub cpu_only: bool,
    /// Its job is CRITICAL: a critical lane may take it.
    pub critical: bool,
    /// Host bytes of its SRS's points, against which a lane decides whether it holds the
    /// SRS ([`Device::lane_holds`]).
    pub srs_points_bytes: u64,
}

impl Route {
    /// Whether `device` may prove a partition on this route now.
    pub fn admits(&self, devices: &[Arc<Device>], device: &Device) -> bool {
        if device.fallback {
            return self.open_to(device)
                && !devices
                    .iter()
                    .any(|d| !d.fallback && self.admits(devices, d));
        }
        if device.spec.critical_only {
            return self.lane_admits(device);
        }
        self.open_to(device) && !(self.critical && devices.iter().any(|d| self.lane_admits(d)))
    }

    /// Whether `device` is in service, has not failed this partition, and is a CPU where
    /// the route asks for one.
    fn open_to(&self, device: &Device) -> bool {
        device.in_service()
            && !self.failed_on.contains(&device.index)
            && !(self.cpu_only && device.spec.is_gpu)
    }

    /// Whether `device` is a critical lane that may take this partition now.
    fn lane_admits(&self, device: &Device) -> bool {
        device.spec.critical_only
            && self.critical
            && self.open_to(device)
            && device.lane_holds(self.srs_points_bytes)
    }

    /// Whether any device may prove a partition on this route now.
    pub fn has_taker(&self, devices: &[Arc<Device>]) -> bool {
        devices.iter().any(|d| self.admits(devices, d))
    }
}

/// Per-partition fault records of an active job.
pub(crate) struct JobFaults {
    /// The device that proved each partition, to blame when the job's proof fails
    /// verification.
    pub proved_on: Vec<Option<usize>>,
    /// Partitions re-proved on the CPU after their proof failed verification (once each).
    pub cpu_retried: Vec<bool>,
}

impl JobFaults {
    /// Nothing proved or retried yet.
    pub fn new(n_partitions: usize) -> JobFaults {
        JobFaults {
            proved_on: vec![None; n_partitions],
            cpu_retried: vec![false; n_partitions],
        }
    }
}

/// Why a partition was retried, for the `cuzk_partition_retries_total` counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryCause {
    /// The backend returned an error or panicked.
    DeviceError,
    /// The backend call did not return within `prove_timeout`.
    Hung,
    /// The partition's proof failed verification.
    Verification,
}

impl RetryCause {
    /// Every cause, in counter order.
    pub const ALL: [RetryCause; 3] = [
        RetryCause::DeviceError,
        RetryCause::Hung,
        RetryCause::Verification,
    ];

    /// Lowercase name for the metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            RetryCause::DeviceError => "device_error",
            RetryCause::Hung => "hung",
            RetryCause::Verification => "verification",
        }
    }
}

/// How one backend call ended.
pub(crate) enum CallOutcome {
    /// A proof (not yet verified) and the backend's report, boxed: they are large.
    Proved(Box<(Proof, ProveReport)>),
    /// The assignment does not fit the parameters: the request's fault, not the device's.
    Refused(String),
    /// The backend failed or panicked: the device's fault.
    Fault(String),
    /// The call did not return within the limit.
    Hung(Duration),
    /// The parameters' points were released from host memory and the device no longer
    /// holds them: nobody's fault; prove again with the points read back.
    NeedsPoints,
}

/// Proves `asg` on `device`; a GPU's call runs on a thread of its own and is abandoned
/// after `limit` (see the module docs).
pub(crate) fn call_backend(
    device: &Arc<Device>,
    asg: &Arc<Assignment>,
    srs: &Arc<Srs>,
    limit: Duration,
    pool: Option<Arc<rayon::ThreadPool>>,
) -> CallOutcome {
    // In `pool` when given (a CRITICAL partition's call: its loops must not queue behind
    // the main load's in the process-wide pool).
    let call = move |d: &Device, a: &Assignment, s: &Srs| {
        crate::state::in_pool(pool.as_deref(), || prove_caught(d, a, s))
    };
    if !device.spec.is_gpu {
        return call(device, asg, srs);
    }
    let (tx, rx) = sync_channel(1);
    let (d, a, s) = (device.clone(), asg.clone(), srs.clone());
    let watched = call.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("cuzk-call-{}", device.spec.name))
        .spawn(move || {
            // The watcher may have given up: then nobody wants the result.
            let _ = tx.send(watched(&d, &a, &s));
        });
    if let Err(err) = spawned {
        warn!(device = %device.spec.name, "cannot start a watched call ({err}): calling unwatched");
        return call(device, asg, srs);
    }
    match rx.recv_timeout(limit) {
        Ok(outcome) => outcome,
        Err(RecvTimeoutError::Timeout) => CallOutcome::Hung(limit),
        Err(RecvTimeoutError::Disconnected) => {
            CallOutcome::Fault("the call's thread ended without a result".into())
        }
    }
}

fn prove_caught(device: &Device, asg: &Assignment, srs: &Srs) -> CallOutcome {
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let mut rng = rand::rngs::OsRng;
        let r = Scalar::random(&mut rng);
        let s = Scalar::random(&mut rng);
        cuzk_groth16::prover::prove(asg, srs, r, s, &*device.spec.backend)
    }));
    match result {
        Ok(Ok(proved)) => CallOutcome::Proved(Box::new(proved)),
        Ok(Err(ProveError::Backend(BackendError::SrsReleased))) => CallOutcome::NeedsPoints,
        Ok(Err(
            err @ ProveError::Backend(BackendError::Device { .. } | BackendError::Cancelled),
        )) => CallOutcome::Fault(err.to_string()),
        Ok(Err(err)) => CallOutcome::Refused(err.to_string()),
        Err(panic) => CallOutcome::Fault(format!(
            "backend panicked: {}",
            crate::workers::panic_message(&*panic)
        )),
    }
}

/// Counts a fault of `device` (a hung call takes it out at once); when that takes the
/// device out of service, fails the jobs of ready partitions nobody may take any more.
/// Returns those partitions, to drop after the lock.
pub(crate) fn device_fault(
    shared: &Shared,
    st: &mut State,
    device: &Device,
    cause: RetryCause,
    reason: &str,
) -> Vec<Ready> {
    shared.metrics.partition_retried(cause);
    let effect = match cause {
        RetryCause::Hung => device.take_out_of_service(reason),
        _ => device.record_fault(reason, shared.cfg.device_fault_threshold),
    };
    warn!(device = %device.spec.name, cause = cause.as_str(), %reason, "device fault");
    if effect != FaultEffect::TakenOut {
        return Vec::new();
    }
    warn!(device = %device.spec.name, %reason, "device taken out of service");
    // Fallback workers may now be allowed what the device had.
    shared.prove_cv.notify_all();
    fail_stranded(shared, st)
}

/// Fails every job with a ready partition that no device may prove now.
pub(crate) fn fail_stranded(shared: &Shared, st: &mut State) -> Vec<Ready> {
    let stranded: Vec<String> = st
        .ready
        .values()
        .filter(|r| !r.route.has_taker(&shared.devices))
        .map(|r| r.job.id.clone())
        .collect();
    let mut dropped = Vec::new();
    for id in stranded {
        dropped.extend(fail_no_device(
            shared,
            st,
            &id,
            "every device that may prove its partitions is out of service",
        ));
    }
    dropped
}

/// Ends a job for want of a device. The one place such failures are made: they are
/// worth retrying later or on another daemon.
pub(crate) fn fail_no_device(
    shared: &Shared,
    st: &mut State,
    job_id: &str,
    detail: &str,
) -> Vec<Ready> {
    shared.finish_job(
        st,
        job_id,
        JobEnd::retryable(format!("{NO_HEALTHY_DEVICE}: {detail}")),
    )
}

/// After a job's assembled proof failed verification: finds the partition proofs that
/// fail on their own and, unless one of them was already retried or no CPU device is in
/// service, puts the good proofs back and queues the bad partitions for synthesis and a
/// prove on a CPU device. `Err` is how the job ends instead.
pub(crate) fn retry_unverified(
    shared: &Arc<Shared>,
    job: &Arc<Job>,
    proofs: Vec<Proof>,
    vk: VerifyingKey,
    failure: &str,
) -> Result<(), JobEnd> {
    let bad: Vec<usize> = proofs
        .iter()
        .enumerate()
        .filter(|(i, proof)| {
            let verified = job
                .proof
                .public_inputs(*i)
                .ok()
                .and_then(|inputs| cuzk_groth16::prover::verify(&vk, proof, &inputs).ok());
            verified != Some(true)
        })
        .map(|(i, _)| i)
        .collect();
    if bad.is_empty() {
        return Err(JobEnd::failed(format!(
            "{failure} (every partition proof verifies on its own: not retried)"
        )));
    }
    let mut guard = shared.state.lock();
    let st = &mut *guard;
    let Some(progress) = st.active.get_mut(&job.id) else {
        // Cancelled or failed meanwhile: nothing to retry.
        return Ok(());
    };
    if bad.iter().any(|&i| progress.faults.cpu_retried[i]) {
        return Err(JobEnd::failed(format!(
            "{failure} (partitions {bad:?} fail verification, after a retry on the CPU)"
        )));
    }
    let cpu_route = Route {
        cpu_only: true,
        ..Route::default()
    };
    if !cpu_route.has_taker(&shared.devices) {
        // Another daemon, or this one once a CPU device is back, may prove them.
        return Err(JobEnd::retryable(format!(
            "{NO_HEALTHY_DEVICE}: {failure} (partitions {bad:?} fail verification; no CPU device in service to retry them)"
        )));
    }
    let blamed: Vec<(usize, usize)> = bad
        .iter()
        .filter_map(|&i| progress.faults.proved_on[i].map(|d| (i, d)))
        .collect();
    for (i, proof) in proofs.into_iter().enumerate() {
        if bad.contains(&i) {
            progress.faults.cpu_retried[i] = true;
            progress.faults.proved_on[i] = None;
        } else {
            progress.proofs[i] = Some(proof);
        }
    }
    progress.proved = job.n_partitions - bad.len();
    progress.vk = Some(vk);
    progress.state = JobState::Synthesizing;
    for &i in &bad {
        st.synth_queue.insert(job.key(i as u32), job.clone());
    }
    warn!(job = %job.id, partitions = ?bad, "proof failed verification: partitions retried on the CPU");
    let mut dropped = Vec::new();
    for (i, d) in blamed {
        let device = shared.devices[d].clone();
        let reason = format!("proof of job {} partition {i} failed verification", job.id);
        dropped.extend(device_fault(
            shared,
            st,
            &device,
            RetryCause::Verification,
            &reason,
        ));
    }
    drop(guard);
    drop(dropped);
    shared.synth_cv.notify_all();
    Ok(())
}

impl Engine {
    /// Puts an out-of-service device back in service with a clean fault count. Returns
    /// false when no device has this name or it was in service.
    pub fn restore_device(&self, name: &str) -> bool {
        let shared = &self.shared;
        let restored = shared
            .devices
            .iter()
            .filter(|d| d.spec.name == name)
            .any(|d| d.restore());
        if restored {
            warn!(device = name, "device restored to service");
            shared.prove_cv.notify_all();
        }
        restored
    }
}
