//! Load: 200 small synthetic proofs from 20 concurrent clients into a daemon whose memory
//! budget admits only a few partitions at once, with every tenth job cancelled by its
//! client. Every job must end COMPLETED, or CANCELLED where cancelled; none lost, none
//! duplicated; reservations back to zero.

use std::collections::HashSet;
use std::time::Duration;

use crate::daemon_common::*;
use cuzk_server::pb;
use pb::await_proof_response::Status as S;

const CLIENTS: usize = 20;
const JOBS_PER_CLIENT: usize = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_proofs_from_twenty_clients() {
    let log_n = 5;
    // Room for about three 2^5 partitions in flight.
    let partition_bytes = (1u64 << log_n) * (4 * 32 + 4);
    let cfg = config("load", |c| {
        c.engine.host_memory_budget_bytes = 3 * partition_bytes
    });
    let (daemon, mut client) = start(cfg).await;
    let addr = daemon.grpc_addr().clone();

    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let addr = addr.clone();
        tasks.push(tokio::spawn(async move {
            let mut client = connect(&addr).await;
            let mut jobs = Vec::new();
            for j in 0..JOBS_PER_CLIENT {
                let n = c * JOBS_PER_CLIENT + j;
                let req = synthetic(&format!("load-{n}"), log_n, 1 + (n % 2) as u32, n as u64);
                let job_id = submit(&mut client, req).await;
                let cancelled = n % 10 == 7;
                if cancelled {
                    client
                        .cancel_proof(pb::CancelProofRequest {
                            job_id: job_id.clone(),
                        })
                        .await
                        .expect("cancel");
                }
                jobs.push((job_id, cancelled));
            }
            let mut results = Vec::new();
            for (job_id, cancelled) in jobs {
                let done = wait(&mut client, &job_id).await;
                results.push((
                    job_id,
                    cancelled,
                    status_of(&done),
                    done.proof.len(),
                    done.error_message,
                ));
            }
            results
        }));
    }
    let mut seen = HashSet::new();
    let (mut completed, mut cancelled) = (0u64, 0u64);
    for task in tasks {
        for (job_id, was_cancelled, status, proof_len, error) in task.await.expect("client task") {
            assert!(seen.insert(job_id.clone()), "job id {job_id} given twice");
            match status {
                S::Completed => {
                    assert!(
                        proof_len == 192 || proof_len == 384,
                        "{job_id}: {proof_len} proof bytes"
                    );
                    completed += 1;
                }
                S::Cancelled if was_cancelled => cancelled += 1,
                other => panic!(
                    "{job_id}: ended {other:?} ({error}), cancelled by client: {was_cancelled}"
                ),
            }
        }
    }
    assert_eq!(seen.len(), CLIENTS * JOBS_PER_CLIENT);
    let s = status_until(&mut client, Duration::from_secs(30), |s| {
        s.pinned_memory_bytes == 0
            && s.active_jobs == 0
            && s.partitions.iter().all(|p| p.count == 0)
    })
    .await;
    assert_eq!(s.total_proofs_completed, completed);
    assert_eq!(s.total_proofs_cancelled, cancelled);
    assert_eq!(s.total_proofs_failed, 0);
    assert_eq!(completed + cancelled, (CLIENTS * JOBS_PER_CLIENT) as u64);
    assert!(
        cancelled > 0,
        "cancel right after submit catches some jobs still queued"
    );
    daemon.shutdown().await.expect("clean shutdown");
}
