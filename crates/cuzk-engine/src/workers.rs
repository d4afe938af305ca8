//! The pipeline's threads: synthesis workers (admit a partition under the memory budget,
//! lease its SRS, synthesize), prove workers (one set per device, take the next
//! synthesized partition its device may prove, in scheduling order, and prove it under the
//! device's compute token) and per-job assembly (lay out and verify the proof, complete
//! the job). Every exit path of a partition either hands it on or ends its job with a
//! reason; a device fault sends the partition to another device (`faults.rs`); panics in
//! kind or backend code fail the partition or the job, never the daemon.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_groth16::{KindError, Proof, VerifyingKey};
use tracing::{debug, warn};

use crate::device::Device;
use crate::faults::{self, CallOutcome, RetryCause, Route};
use crate::srs_manager::SrsLease;
use crate::state::{Job, JobEnd, Ready, Shared, State};
use crate::timeline::{Stage, TimelineEvent};
use crate::JobState;

pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

fn event(job: &Job, partition_idx: u32, stage: Stage, worker: &str, device: &str) -> TimelineEvent {
    TimelineEvent {
        job_id: job.id.clone(),
        partition_idx,
        stage,
        detail: String::new(),
        worker: worker.to_string(),
        device: device.to_string(),
        start_us: 0,
        end_us: 0,
    }
}

/// Fails `job` and drops what it held outside the lock.
fn fail_job(shared: &Arc<Shared>, job: &Job, end: JobEnd) {
    let mut st = shared.state.lock();
    let dropped = shared.finish_job(&mut st, &job.id, end);
    drop(st);
    drop(dropped);
}

/// Loop of one synthesis worker.
pub(crate) fn synthesis_worker(shared: Arc<Shared>, worker_idx: usize) {
    let lane = format!("synth-{worker_idx}");
    loop {
        let (job, partition_idx, reservation) = {
            let mut st = shared.state.lock();
            loop {
                if st.stopping {
                    return;
                }
                if let Some(picked) = shared.pick_synthesis(&mut st, worker_idx) {
                    break picked;
                }
                shared.synth_cv.wait(&mut st);
            }
        };
        debug!(job = %job.id, partition = partition_idx, worker = %lane, "synthesis start");
        // Before its SRS is known, a lane counts as able to hold it.
        let any_route = Route {
            critical: job.priority == crate::Priority::Critical,
            ..Route::default()
        };
        if !any_route.has_taker(&shared.devices) {
            let mut st = shared.state.lock();
            st.in_synthesis -= 1;
            let dropped =
                faults::fail_no_device(&shared, &mut st, &job.id, "every device is out of service");
            drop(st);
            drop(dropped);
            drop(reservation);
            continue;
        }

        let t_lease = Instant::now();
        let lease = match shared.srs.acquire(&job.circuit_id) {
            Ok((lease, loaded)) => {
                if let Some(load) = loaded {
                    shared.metrics.stage(Stage::SrsLoad, load);
                    shared.timeline.record(
                        event(&job, partition_idx, Stage::SrsLoad, &lane, ""),
                        t_lease,
                        Instant::now(),
                    );
                    if let Some(p) = shared.state.lock().active.get_mut(&job.id) {
                        p.srs_load += load;
                    }
                }
                lease
            }
            Err(err) => {
                shared.state.lock().in_synthesis -= 1;
                drop(reservation);
                // Parameters that cannot load here may load on another daemon.
                let reason = format!("partition {partition_idx}: {err}");
                fail_job(&shared, &job, JobEnd::retryable(reason));
                continue;
            }
        };

        let t0 = Instant::now();
        let critical = job.priority == crate::Priority::Critical;
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            shared.on_pool(critical, || {
                job.proof.synthesize(&shared.synth, partition_idx as usize)
            })
        }));
        let t1 = Instant::now();
        shared.metrics.stage(Stage::Synthesis, t1 - t0);
        shared.timeline.record(
            event(&job, partition_idx, Stage::Synthesis, &lane, ""),
            t0,
            t1,
        );

        let mut st = shared.state.lock();
        st.in_synthesis -= 1;
        let active = st.active.contains_key(&job.id);
        let (dropped, discard) = match result {
            _ if !active => (Vec::new(), Some((reservation, lease))),
            Ok(Ok(asg)) => {
                let mut cpu_only = false;
                if let Some(p) = st.active.get_mut(&job.id) {
                    p.synthesis += t1 - t0;
                    cpu_only = p.faults.cpu_retried[partition_idx as usize];
                }
                let route = Route {
                    failed_on: Vec::new(),
                    cpu_only,
                    critical: job.priority == crate::Priority::Critical,
                    srs_points_bytes: lease.srs().points_bytes(),
                };
                if route.has_taker(&shared.devices) {
                    let key = job.key(partition_idx);
                    let ready = Ready {
                        job: job.clone(),
                        partition_idx,
                        asg: Arc::new(asg),
                        reservation,
                        lease,
                        ready_at: t1,
                        route,
                    };
                    st.ready.insert(key, ready);
                    // Not every worker may take it (routes): wake them all.
                    shared.prove_cv.notify_all();
                    (Vec::new(), None)
                } else {
                    let dropped = faults::fail_no_device(
                        &shared,
                        &mut st,
                        &job.id,
                        "no device in service may prove its partitions",
                    );
                    (dropped, Some((reservation, lease)))
                }
            }
            Ok(Err(err)) => {
                let dropped = shared.finish_job(&mut st, &job.id, JobEnd::failed(err.to_string()));
                (dropped, Some((reservation, lease)))
            }
            Err(panic) => {
                let reason = format!(
                    "synthesis of partition {partition_idx} panicked: {}",
                    panic_message(&*panic)
                );
                let dropped = shared.finish_job(&mut st, &job.id, JobEnd::failed(reason));
                (dropped, Some((reservation, lease)))
            }
        };
        drop(st);
        drop(dropped);
        drop(discard);
        shared.synth_cv.notify_all();
    }
}

/// Loop of one prove worker of `device`.
pub(crate) fn prove_worker(shared: Arc<Shared>, device: Arc<Device>, worker_idx: usize) {
    let lane = format!("{}/w{worker_idx}", device.spec.name);
    loop {
        let ready = {
            let mut st = shared.state.lock();
            loop {
                if st.stopping {
                    return;
                }
                let key = st
                    .ready
                    .iter()
                    .find(|(_, r)| r.route.admits(&shared.devices, &device))
                    .map(|(key, _)| *key);
                if let Some(ready) = key.and_then(|key| st.ready.remove(&key)) {
                    st.in_proving += 1;
                    if let Some(p) = st.active.get_mut(&ready.job.id) {
                        p.state = JobState::Proving;
                    }
                    break ready;
                }
                shared.prove_cv.wait(&mut st);
            }
        };
        // The hand-off queue shrank: synthesis may run ahead again.
        shared.synth_cv.notify_all();
        prove_ready(&shared, &device, &lane, ready);
    }
}

/// Proves one partition on `device` and hands the proof on, sends the partition to
/// another device after a device fault, or fails its job.
fn prove_ready(shared: &Arc<Shared>, device: &Arc<Device>, lane: &str, mut ready: Ready) {
    let job = ready.job.clone();
    let partition_idx = ready.partition_idx;
    let t_pop = Instant::now();
    let dev_name = device.spec.name.as_str();
    shared.metrics.stage(Stage::Queue, t_pop - ready.ready_at);
    shared.timeline.record(
        event(&job, partition_idx, Stage::Queue, lane, dev_name),
        ready.ready_at,
        t_pop,
    );

    *device.current.lock() = Some((job.id.clone(), job.kind));
    // A backend that owns its device's token takes it itself, only around its kernels;
    // otherwise the engine holds the token around the whole compute call.
    let owns_token = device.spec.backend.owns_compute_token();
    let token = (!owns_token).then(|| device.token.acquire());
    let t_start = Instant::now();
    if !device.in_service() {
        // Taken out of service while this worker waited for the token: send nothing more.
        drop(token);
        let mut st = shared.state.lock();
        st.in_proving -= 1;
        *device.current.lock() = None;
        let dropped = requeue(
            shared,
            &mut st,
            ready,
            &format!("{dev_name} out of service"),
        );
        drop(st);
        drop(dropped);
        return;
    }
    if !owns_token {
        shared.metrics.stage(Stage::TokenWait, t_start - t_pop);
        shared.timeline.record(
            event(&job, partition_idx, Stage::TokenWait, lane, dev_name),
            t_pop,
            t_start,
        );
    }
    // Released host points that this device does not hold and cannot stream from the
    // file (the CPU fallback, a device that lost its copy) are read back before the call.
    let needs_points = |lease: &SrsLease| {
        let srs = lease.srs();
        srs.is_released()
            && device.spec.backend.srs_device_bytes(srs) == 0
            && !(srs.file.is_some() && device.spec.backend.streams_srs_from_file(srs))
    };
    // Except on the CPU fallback for an SRS streamed from its file because it is larger
    // than its host budget: reading it back would take the host past its budget (on a
    // 64 GiB host, 47.4 GB beside the GPUs' staging). The partition fails with the reason.
    let over_budget = |lease: &SrsLease| {
        let srs = lease.srs();
        device.fallback && srs.file.is_some() && srs.points_bytes() > shared.cfg.srs_budget_bytes
    };
    let refused = (needs_points(&ready.lease) && over_budget(&ready.lease)).then(|| {
        let srs = ready.lease.srs();
        format!(
            "the CPU fallback needs the parameters' {:.1} GB of points in host memory, more \
             than the srs budget of {:.1} GB: they are streamed from their file to the GPUs only",
            srs.points_bytes() as f64 / 1e9,
            shared.cfg.srs_budget_bytes as f64 / 1e9
        )
    });
    if needs_points(&ready.lease) && refused.is_none() {
        match shared.srs.acquire_full(&job.circuit_id) {
            Ok(full) => ready.lease = full,
            Err(err) => {
                warn!(job = %job.id, partition = partition_idx, "srs points not read back: {err}")
            }
        }
    }
    // A CRITICAL partition's call runs its host loops in the critical pool.
    let pool = shared.pool_for(job.priority == crate::Priority::Critical);
    let mut outcome = match refused {
        Some(reason) => CallOutcome::Refused(reason),
        None => faults::call_backend(
            device,
            &ready.asg,
            ready.lease.srs(),
            shared.cfg.prove_timeout,
            pool.clone(),
        ),
    };
    if matches!(outcome, CallOutcome::NeedsPoints) {
        // Evicted between the check and the call: once more with the points.
        outcome = match shared.srs.acquire_full(&job.circuit_id) {
            Ok(full) => {
                ready.lease = full;
                faults::call_backend(
                    device,
                    &ready.asg,
                    ready.lease.srs(),
                    shared.cfg.prove_timeout,
                    pool,
                )
            }
            Err(err) => {
                CallOutcome::Refused(format!("the parameters' points cannot be read back: {err}"))
            }
        };
    }
    let t_end = Instant::now();
    // After a fault the token is kept until the fault is counted, so that the device's
    // next worker finds it out of service if this fault took it out (a hung call's
    // token is released here too: nothing waits for it).
    let token = match outcome {
        CallOutcome::Fault(_) | CallOutcome::Hung(_) => token,
        CallOutcome::Proved(_) | CallOutcome::Refused(_) | CallOutcome::NeedsPoints => {
            drop(token);
            None
        }
    };
    let compute_event = event(&job, partition_idx, Stage::Compute, lane, dev_name);
    // The interval the device was held: the whole call, or the backend's own hold
    // (which starts where its token wait ends; what ran before, such as its uploads,
    // ran outside the token).
    let (held_from, held_to) = match (&outcome, owns_token) {
        (CallOutcome::Proved(proved), true) => {
            let report = &proved.1;
            let token = report.token.unwrap_or_default();
            let wait_from = (t_start + token.wait_start).min(t_end);
            let from = (wait_from + token.wait).min(t_end);
            let to = match report.token {
                Some(t) => (from + t.held).min(t_end),
                None => t_end,
            };
            shared.metrics.stage(Stage::TokenWait, from - wait_from);
            shared.timeline.record(
                event(&job, partition_idx, Stage::TokenWait, lane, dev_name),
                wait_from,
                from,
            );
            (from, to)
        }
        _ => (t_start, t_end),
    };
    device.add_busy(held_to - held_from);
    shared.metrics.stage(Stage::Compute, held_to - held_from);
    if let CallOutcome::Proved(proved) = &outcome {
        let report = &proved.1;
        // A stage the device timed is drawn with its device time: the host's enqueue of
        // streamed chunks returns when their copies are done, so host walls shift time
        // between stages. The upload's device time spans the call (its copies run beside
        // the kernels): it keeps its wall.
        let stages: Vec<(String, Duration)> = report
            .stages
            .iter()
            .map(|s| {
                let device = s
                    .device
                    .filter(|_| s.stage != cuzk_groth16::ProveStage::Upload);
                (s.stage.to_string(), device.unwrap_or(s.wall))
            })
            .collect();
        shared
            .timeline
            .record_stages(&compute_event, t_start, &stages);
    }
    shared.timeline.record(compute_event, held_from, held_to);
    debug!(job = %job.id, partition = partition_idx, worker = %lane, ms = (t_end - t_start).as_millis() as u64, "prove done");

    let (cause, fault) = match outcome {
        CallOutcome::Proved(proved) => {
            device.record_success();
            crate::engine_params::release_if_held(shared, &job.circuit_id, ready.lease.srs());
            return record_proof(shared, device, ready, proved.0, t_end - t_start);
        }
        CallOutcome::NeedsPoints => {
            let reason = format!(
                "partition {partition_idx} on {dev_name}: the parameters' points were released twice in a row"
            );
            let mut st = shared.state.lock();
            st.in_proving -= 1;
            *device.current.lock() = None;
            let dropped = shared.finish_job(&mut st, &job.id, JobEnd::failed(reason));
            drop(st);
            drop(dropped);
            return;
        }
        CallOutcome::Refused(reason) => {
            let reason = format!("partition {partition_idx} on {dev_name}: {reason}");
            let mut st = shared.state.lock();
            st.in_proving -= 1;
            *device.current.lock() = None;
            let dropped = shared.finish_job(&mut st, &job.id, JobEnd::failed(reason));
            drop(st);
            drop(dropped);
            return;
        }
        CallOutcome::Fault(reason) => (RetryCause::DeviceError, reason),
        CallOutcome::Hung(limit) => (
            RetryCause::Hung,
            format!(
                "prove call did not return within {:.1} s (prove_timeout); presumed hung",
                limit.as_secs_f64()
            ),
        ),
    };
    let reason = format!(
        "job {} partition {partition_idx} on {dev_name}: {fault}",
        job.id
    );
    let mut ready = ready;
    ready.route.failed_on.push(device.index);
    let mut st = shared.state.lock();
    st.in_proving -= 1;
    *device.current.lock() = None;
    let mut dropped = faults::device_fault(shared, &mut st, device, cause, &reason);
    dropped.extend(requeue(shared, &mut st, ready, &reason));
    drop(st);
    drop(token);
    drop(dropped);
}

/// Puts a partition back in the ready queue for the devices its route still allows, or
/// fails its job when there are none. Returns what to drop after the lock.
fn requeue(shared: &Shared, st: &mut State, mut ready: Ready, why: &str) -> Vec<Ready> {
    let job_id = ready.job.id.clone();
    if !st.active.contains_key(&job_id) {
        return vec![ready];
    }
    if ready.route.has_taker(&shared.devices) {
        ready.ready_at = Instant::now();
        st.ready.insert(ready.job.key(ready.partition_idx), ready);
        shared.prove_cv.notify_all();
        return Vec::new();
    }
    let mut dropped = faults::fail_no_device(
        shared,
        st,
        &job_id,
        &format!("no other device may retry it after: {why}"),
    );
    dropped.push(ready);
    dropped
}

/// Stores a partition's proof; the last one of its job starts the assembly.
fn record_proof(
    shared: &Arc<Shared>,
    device: &Device,
    ready: Ready,
    proof: Proof,
    compute: Duration,
) {
    let Ready {
        job,
        partition_idx,
        asg,
        reservation,
        lease,
        ..
    } = ready;
    // Free the witness and its reservation before anything else waits on the lock.
    drop(asg);
    drop(reservation);
    let vk: Option<VerifyingKey> = {
        let st = shared.state.lock();
        let needs_vk = st.active.get(&job.id).is_some_and(|p| p.vk.is_none());
        drop(st);
        needs_vk.then(|| lease.srs().vk.clone())
    };
    drop(lease);

    let mut st = shared.state.lock();
    st.in_proving -= 1;
    *device.current.lock() = None;
    let mut assemble = None;
    if let Some(p) = st.active.get_mut(&job.id) {
        p.compute += compute;
        if p.vk.is_none() {
            p.vk = vk;
        }
        let idx = partition_idx as usize;
        if let Some(slot) = p.proofs.get_mut(idx) {
            if slot.replace(proof).is_none() {
                p.proved += 1;
            }
            p.faults.proved_on[idx] = Some(device.index);
        }
        if p.proved == job.n_partitions {
            p.state = JobState::Assembling;
            let proofs: Vec<Proof> = p.proofs.iter_mut().filter_map(Option::take).collect();
            assemble = Some((proofs, p.vk.take()));
        }
    }
    if assemble.is_some() {
        st.in_assembly += 1;
    }
    drop(st);
    if let Some((proofs, vk)) = assemble {
        spawn_assembly(shared, job, proofs, vk);
    }
}

/// Assembles and verifies on a thread of its own so prove workers go straight back to
/// their device.
fn spawn_assembly(
    shared: &Arc<Shared>,
    job: Arc<Job>,
    proofs: Vec<Proof>,
    vk: Option<VerifyingKey>,
) {
    let worker_shared = shared.clone();
    let worker_job = job.clone();
    let spawned = std::thread::Builder::new()
        .name("cuzk-assembly".into())
        .spawn(move || assemble(worker_shared, worker_job, proofs, vk));
    if let Err(err) = spawned {
        shared.state.lock().in_assembly -= 1;
        let reason = format!("cannot start assembly thread: {err}");
        fail_job(shared, &job, JobEnd::failed(reason));
    }
}

/// How a job's assembly ended.
enum Assembled {
    /// The proof bytes the client receives.
    Verified(Vec<u8>),
    /// The kind's verifier rejected the proof.
    Unverified(String),
    /// Anything else.
    Failed(String),
}

fn assemble(shared: Arc<Shared>, job: Arc<Job>, proofs: Vec<Proof>, vk: Option<VerifyingKey>) {
    let t0 = Instant::now();
    let result = match &vk {
        None => Assembled::Failed("no verifying key recorded for the job".to_string()),
        Some(vk) => match std::panic::catch_unwind(AssertUnwindSafe(|| {
            job.proof.assemble_and_verify(&proofs, vk)
        })) {
            Ok(Ok(bytes)) => Assembled::Verified(bytes),
            Ok(Err(err @ KindError::Verification { .. })) => Assembled::Unverified(err.to_string()),
            Ok(Err(err)) => Assembled::Failed(err.to_string()),
            Err(p) => Assembled::Failed(format!("assembly panicked: {}", panic_message(&*p))),
        },
    };
    let t1 = Instant::now();
    shared.metrics.stage(Stage::Assembly, t1 - t0);
    shared
        .timeline
        .record(event(&job, 0, Stage::Assembly, "assembler", ""), t0, t1);
    let end = match (result, vk) {
        // The failing partitions are proved again on the CPU, once.
        (Assembled::Unverified(reason), Some(vk)) => {
            match faults::retry_unverified(&shared, &job, proofs, vk, &reason) {
                Ok(()) => {
                    shared.state.lock().in_assembly -= 1;
                    return;
                }
                Err(end) => end,
            }
        }
        (Assembled::Verified(proof), _) => JobEnd::Completed {
            proof,
            assembly: t1 - t0,
        },
        (Assembled::Unverified(reason) | Assembled::Failed(reason), _) => JobEnd::failed(reason),
    };
    let mut st = shared.state.lock();
    st.in_assembly -= 1;
    let dropped = shared.finish_job(&mut st, &job.id, end);
    drop(st);
    drop(dropped);
}
