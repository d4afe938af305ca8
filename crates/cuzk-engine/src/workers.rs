//! The pipeline's threads: synthesis workers (admit a partition under the memory budget,
//! lease its SRS, synthesize), prove workers (one set per device, take the next
//! synthesized partition in scheduling order, prove it under the device's compute token)
//! and per-job assembly (lay out and verify the proof, complete the job). Every exit path
//! of a partition either hands it on or ends its job with a reason; panics in kind or
//! backend code fail the job, never the daemon.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_groth16::{Proof, ProveReport, Scalar, VerifyingKey};
use ff::Field;
use tracing::debug;

use crate::device::Device;
use crate::state::{Job, JobEnd, Ready, Shared};
use crate::timeline::{Stage, TimelineEvent};
use crate::JobState;

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
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
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            job.proof.synthesize(partition_idx as usize)
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
                if let Some(p) = st.active.get_mut(&job.id) {
                    p.synthesis += t1 - t0;
                }
                let key = job.key(partition_idx);
                let ready = Ready {
                    job: job.clone(),
                    partition_idx,
                    asg,
                    reservation,
                    lease,
                    ready_at: t1,
                };
                st.ready.insert(key, ready);
                shared.prove_cv.notify_one();
                (Vec::new(), None)
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
                if let Some((_, ready)) = st.ready.pop_first() {
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
        let Ready {
            job,
            partition_idx,
            asg,
            reservation,
            lease,
            ready_at,
        } = ready;
        let t_pop = Instant::now();
        let dev_name = device.spec.name.as_str();
        shared.metrics.stage(Stage::Queue, t_pop - ready_at);
        shared.timeline.record(
            event(&job, partition_idx, Stage::Queue, &lane, dev_name),
            ready_at,
            t_pop,
        );

        *device.current.lock() = Some((job.id.clone(), job.kind));
        // A backend that owns its device's token takes it itself, only around its kernels;
        // otherwise the engine holds the token around the whole compute call.
        let owns_token = device.spec.backend.owns_compute_token();
        let token = (!owns_token).then(|| device.token.acquire());
        let t_start = Instant::now();
        if !owns_token {
            shared.metrics.stage(Stage::TokenWait, t_start - t_pop);
            shared.timeline.record(
                event(&job, partition_idx, Stage::TokenWait, &lane, dev_name),
                t_pop,
                t_start,
            );
        }
        let result =
            std::panic::catch_unwind(AssertUnwindSafe(|| prove_one(&asg, &lease, &device)));
        let t_end = Instant::now();
        drop(token);
        let compute_event = event(&job, partition_idx, Stage::Compute, &lane, dev_name);
        // The interval the device was held: the whole call, or the backend's own hold
        // (which starts where its `token_wait` stage ends; the stages before it, such as
        // its uploads, ran outside the token).
        let (held_from, held_to) = match (&result, owns_token) {
            (Ok(Ok((_, report))), true) => {
                let at = report.stages.iter().position(|s| s.name == "token_wait");
                let before: Duration = report.stages[..at.unwrap_or(0)]
                    .iter()
                    .map(|s| s.wall)
                    .sum();
                let wait = at.map_or(Duration::ZERO, |i| report.stages[i].wall);
                let wait_from = (t_start + before).min(t_end);
                let from = (wait_from + wait).min(t_end);
                let to = report.token_held.map_or(t_end, |h| (from + h).min(t_end));
                shared.metrics.stage(Stage::TokenWait, from - wait_from);
                shared.timeline.record(
                    event(&job, partition_idx, Stage::TokenWait, &lane, dev_name),
                    wait_from,
                    from,
                );
                (from, to)
            }
            _ => (t_start, t_end),
        };
        device.add_busy(held_to - held_from);
        shared.metrics.stage(Stage::Compute, held_to - held_from);
        if let Ok(Ok((_, report))) = &result {
            let stages: Vec<(String, Duration)> = report
                .stages
                .iter()
                .map(|s| (s.name.clone(), s.wall))
                .collect();
            shared
                .timeline
                .record_stages(&compute_event, t_start, &stages);
        }
        shared.timeline.record(compute_event, held_from, held_to);
        debug!(job = %job.id, partition = partition_idx, worker = %lane, ms = (t_end - t_start).as_millis() as u64, "prove done");

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
        let mut dropped = Vec::new();
        let mut assemble = None;
        match result {
            Ok(Ok((proof, _))) => {
                if let Some(p) = st.active.get_mut(&job.id) {
                    p.compute += t_end - t_start;
                    if p.vk.is_none() {
                        p.vk = vk;
                    }
                    if let Some(slot) = p.proofs.get_mut(partition_idx as usize) {
                        if slot.replace(proof).is_none() {
                            p.proved += 1;
                        }
                    }
                    if p.proved == job.n_partitions {
                        p.state = JobState::Assembling;
                        let proofs: Vec<Proof> =
                            p.proofs.iter_mut().filter_map(Option::take).collect();
                        assemble = Some((proofs, p.vk.take()));
                    }
                }
            }
            Ok(Err(reason)) => {
                let reason = format!("partition {partition_idx} on {dev_name}: {reason}");
                dropped = shared.finish_job(&mut st, &job.id, JobEnd::failed(reason));
            }
            Err(panic) => {
                let reason = format!(
                    "prove of partition {partition_idx} on {dev_name} panicked: {}",
                    panic_message(&*panic)
                );
                dropped = shared.finish_job(&mut st, &job.id, JobEnd::failed(reason));
            }
        }
        if assemble.is_some() {
            st.in_assembly += 1;
        }
        drop(st);
        drop(dropped);
        if let Some((proofs, vk)) = assemble {
            spawn_assembly(&shared, job, proofs, vk);
        }
    }
}

fn prove_one(
    asg: &cuzk_groth16::Assignment,
    lease: &crate::srs_manager::SrsLease,
    device: &Device,
) -> Result<(Proof, ProveReport), String> {
    let mut rng = rand::rngs::OsRng;
    let r = Scalar::random(&mut rng);
    let s = Scalar::random(&mut rng);
    cuzk_groth16::prover::prove(asg, lease.srs(), r, s, &*device.spec.backend)
        .map_err(|e| e.to_string())
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

fn assemble(shared: Arc<Shared>, job: Arc<Job>, proofs: Vec<Proof>, vk: Option<VerifyingKey>) {
    let t0 = Instant::now();
    let result = match vk {
        None => Err("no verifying key recorded for the job".to_string()),
        Some(vk) => std::panic::catch_unwind(AssertUnwindSafe(|| {
            job.proof.assemble_and_verify(&proofs, &vk)
        }))
        .map_err(|p| format!("assembly panicked: {}", panic_message(&*p)))
        .and_then(|r| r.map_err(|e| e.to_string())),
    };
    let t1 = Instant::now();
    shared.metrics.stage(Stage::Assembly, t1 - t0);
    shared
        .timeline
        .record(event(&job, 0, Stage::Assembly, "assembler", ""), t0, t1);
    let mut st = shared.state.lock();
    st.in_assembly -= 1;
    let end = match result {
        Ok(proof) => JobEnd::Completed {
            proof,
            assembly: t1 - t0,
        },
        Err(reason) => JobEnd::failed(reason),
    };
    let dropped = shared.finish_job(&mut st, &job.id, end);
    drop(st);
    drop(dropped);
}
