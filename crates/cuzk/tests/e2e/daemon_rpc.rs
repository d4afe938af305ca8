//! Every rpc of `cuzk.v1.ProvingEngine` against a daemon on a real unix socket (CPU
//! backend, tiny synthetic circuits): submit/await/prove, await timeout, cancel, status,
//! metrics and HTTP, preload/evict, request-id idempotency, a client leaving `Prove`,
//! CRITICAL overtaking queued NORMAL partitions, and malformed input per field.

use std::time::Duration;

use crate::daemon_common::*;
use cuzk_server::pb;
use pb::await_proof_response::Status as S;
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_await_prove_status_metrics_http() {
    let cfg = config("basic", |c| c.http_listen = "127.0.0.1:0".into());
    let (daemon, mut client) = start(cfg).await;

    let job = submit(&mut client, synthetic("basic-1", 6, 2, 1)).await;
    let done = wait(&mut client, &job).await;
    assert_eq!(status_of(&done), S::Completed, "{}", done.error_message);
    assert_eq!(done.proof.len(), 2 * 192);
    assert_eq!(done.job_id, job);
    assert!(done.total_ms >= done.queue_wait_ms);

    let proved = client
        .prove(pb::ProveRequest {
            submit: Some(synthetic("basic-2", 6, 1, 2)),
        })
        .await
        .expect("prove")
        .into_inner()
        .result
        .expect("result");
    assert_eq!(status_of(&proved), S::Completed, "{}", proved.error_message);
    assert_eq!(proved.proof.len(), 192);

    let status = client
        .get_status(pb::GetStatusRequest {})
        .await
        .expect("status")
        .into_inner();
    assert_eq!(status.total_proofs_completed, 2);
    assert_eq!(status.total_proofs_failed, 0);
    assert_eq!(status.pinned_memory_bytes, 0);
    let srs = status
        .loaded_srs
        .iter()
        .find(|s| s.circuit_id == "synthetic-6")
        .expect("srs listed");
    assert_eq!(srs.tier, pb::srs_status::Tier::Warm as i32);
    assert!(srs.size_bytes > 0);
    assert_eq!(srs.ref_count, 0);
    let queue = status
        .queues
        .iter()
        .find(|q| q.proof_kind == "SYNTHETIC")
        .expect("synthetic queue");
    assert_eq!((queue.pending, queue.in_progress), (0, 0));
    assert!(status.gpus.is_empty(), "no GPU on the CPU backend");
    assert_eq!(status.devices.len(), 1);

    let metrics = client
        .get_metrics(pb::GetMetricsRequest {})
        .await
        .expect("metrics")
        .into_inner();
    assert!(metrics
        .prometheus_text
        .contains("cuzk_proofs_completed_total{kind=\"synthetic\"} 2"));
    assert!(metrics
        .prometheus_text
        .contains("cuzk_stage_seconds_count{stage=\"synthesis\"} 3"));

    let http = daemon.http_addr().expect("http enabled");
    let text = http_get(http, "/metrics").await;
    assert!(
        text.contains("cuzk_queue_depth{priority=\"critical\"} 0"),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&http_get(http, "/status").await).expect("json");
    assert_eq!(json["total_proofs_completed"], 2);
    assert_eq!(json["srs"][0]["tier"], "host");
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn await_timeout_then_cancel() {
    let cfg = config("cancel", |c| {
        c.engine.synthesis_workers = 1;
        c.engine.handoff_depth = 0;
    });
    let (daemon, mut client) = start(cfg).await;
    let job = submit(&mut client, synthetic("", 10, 16, 3)).await;
    let early = client
        .await_proof(pb::AwaitProofRequest {
            job_id: job.clone(),
            timeout_ms: 1,
        })
        .await
        .expect("await")
        .into_inner();
    assert_eq!(status_of(&early), S::Timeout);

    status_until(&mut client, Duration::from_secs(60), |s| {
        s.partitions
            .iter()
            .any(|p| p.stage != "queued" && p.count > 0)
    })
    .await;
    let cancel = client
        .cancel_proof(pb::CancelProofRequest {
            job_id: job.clone(),
        })
        .await
        .expect("cancel");
    assert!(cancel.into_inner().was_running);
    let done = wait(&mut client, &job).await;
    assert_eq!(status_of(&done), S::Cancelled);
    assert!(done.proof.is_empty());
    // In-flight partitions are discarded when they finish; their memory comes back.
    let s = status_until(&mut client, Duration::from_secs(60), |s| {
        s.pinned_memory_bytes == 0 && s.partitions.iter().all(|p| p.count == 0)
    })
    .await;
    assert_eq!(s.total_proofs_completed, 0);
    // Cancelling a finished job changes nothing.
    let again = client
        .cancel_proof(pb::CancelProofRequest {
            job_id: job.clone(),
        })
        .await
        .expect("cancel");
    assert!(!again.into_inner().was_running);
    assert_eq!(status_of(&wait(&mut client, &job).await), S::Cancelled);
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preload_and_evict_report_true_tiers() {
    let (daemon, mut client) = start(config("srs", |_| {})).await;
    let id = "synthetic-7".to_string();
    let first = client
        .preload_srs(pb::PreloadSrsRequest {
            circuit_id: id.clone(),
        })
        .await
        .expect("preload");
    assert!(!first.into_inner().already_loaded);
    let second = client
        .preload_srs(pb::PreloadSrsRequest {
            circuit_id: id.clone(),
        })
        .await
        .expect("preload");
    assert!(second.into_inner().already_loaded);
    let tier_of = |s: &pb::GetStatusResponse| {
        s.loaded_srs
            .iter()
            .find(|e| e.circuit_id == id)
            .map(|e| (e.tier, e.size_bytes))
    };
    let s = client
        .get_status(pb::GetStatusRequest {})
        .await
        .expect("status")
        .into_inner();
    let (tier, size) = tier_of(&s).expect("listed");
    assert_eq!(tier, pb::srs_status::Tier::Warm as i32);

    let evicted = client
        .evict_srs(pb::EvictSrsRequest {
            circuit_id: id.clone(),
        })
        .await
        .expect("evict")
        .into_inner();
    assert!(evicted.was_loaded);
    assert_eq!(evicted.freed_bytes, size);
    let s = client
        .get_status(pb::GetStatusRequest {})
        .await
        .expect("status")
        .into_inner();
    assert_eq!(tier_of(&s), Some((pb::srs_status::Tier::Cold as i32, 0)));
    let again = client
        .evict_srs(pb::EvictSrsRequest {
            circuit_id: id.clone(),
        })
        .await
        .expect("evict")
        .into_inner();
    assert!(!again.was_loaded);

    // A job after eviction loads it again and still completes.
    let job = submit(&mut client, synthetic("", 7, 1, 9)).await;
    assert_eq!(status_of(&wait(&mut client, &job).await), S::Completed);
    let done = client
        .get_status(pb::GetStatusRequest {})
        .await
        .expect("status")
        .into_inner();
    assert_eq!(
        tier_of(&done).map(|t| t.0),
        Some(pb::srs_status::Tier::Warm as i32)
    );
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_id_and_payload_name_the_job() {
    let (daemon, mut client) = start(config("idem", |_| {})).await;
    let a = client
        .submit_proof(synthetic("req-A", 8, 2, 5))
        .await
        .expect("submit")
        .into_inner();
    let b = client
        .submit_proof(synthetic("req-A", 8, 2, 5))
        .await
        .expect("attach")
        .into_inner();
    assert_eq!(a.job_id, b.job_id);
    // See: #18. Curio sends every WindowPoSt partition of a deadline under one request_id.
    let other_payload = client
        .submit_proof(synthetic("req-A", 8, 2, 6))
        .await
        .expect("same request_id, different payload: a new job")
        .into_inner();
    assert_ne!(other_payload.job_id, a.job_id);
    let c = client
        .submit_proof(synthetic("req-B", 8, 2, 5))
        .await
        .expect("submit")
        .into_inner();
    assert_ne!(c.job_id, a.job_id);
    for job in [&a.job_id, &other_payload.job_id, &c.job_id] {
        assert_eq!(status_of(&wait(&mut client, job).await), S::Completed);
    }
    let s = client
        .get_status(pb::GetStatusRequest {})
        .await
        .expect("status")
        .into_inner();
    assert_eq!(
        s.total_proofs_completed, 3,
        "the attached submit did not make a fourth job"
    );
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_leaving_prove_does_not_lose_the_job() {
    let (daemon, client) = start(config("leave", |_| {})).await;
    let mut leaving = client.clone();
    let call = tokio::spawn(async move {
        leaving
            .prove(pb::ProveRequest {
                submit: Some(synthetic("left-early", 12, 4, 7)),
            })
            .await
    });
    let mut client = connect(daemon.grpc_addr()).await;
    status_until(&mut client, Duration::from_secs(30), |s| s.active_jobs == 1).await;
    call.abort();
    assert!(call.await.is_err(), "the Prove call was dropped mid-flight");
    drop(client);

    let mut client = connect(daemon.grpc_addr()).await;
    let again = client
        .submit_proof(synthetic("left-early", 12, 4, 7))
        .await
        .expect("attach")
        .into_inner();
    let done = wait(&mut client, &again.job_id).await;
    assert_eq!(status_of(&done), S::Completed, "{}", done.error_message);
    assert_eq!(done.proof.len(), 4 * 192);
    let s = client
        .get_status(pb::GetStatusRequest {})
        .await
        .expect("status")
        .into_inner();
    assert_eq!(s.total_proofs_completed, 1);
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn critical_overtakes_queued_normal_partitions() {
    let cfg = config("prio", |c| {
        c.engine.synthesis_workers = 1;
        c.engine.handoff_depth = 0;
    });
    let (daemon, mut client) = start(cfg).await;
    client
        .preload_srs(pb::PreloadSrsRequest {
            circuit_id: "synthetic-9".into(),
        })
        .await
        .expect("preload");
    let normal = submit(&mut client, synthetic("normal", 9, 8, 1)).await;
    status_until(&mut client, Duration::from_secs(30), |s| {
        s.queues.iter().any(|q| q.in_progress == 1)
    })
    .await;
    let mut critical_req = synthetic("critical", 9, 1, 2);
    critical_req.priority = pb::Priority::Critical as i32;
    let critical = submit(&mut client, critical_req).await;
    assert_eq!(status_of(&wait(&mut client, &critical).await), S::Completed);
    assert_eq!(status_of(&wait(&mut client, &normal).await), S::Completed);

    let events = client
        .get_timeline(pb::GetTimelineRequest { since_us: 0 })
        .await
        .expect("timeline")
        .into_inner()
        .events;
    let synth_start = |job: &str| -> Vec<u64> {
        let mut v: Vec<u64> = events
            .iter()
            .filter(|e| e.job_id == job && e.stage == "synthesis")
            .map(|e| e.start_us)
            .collect();
        v.sort_unstable();
        v
    };
    let (n, c) = (synth_start(&normal), synth_start(&critical));
    assert_eq!((n.len(), c.len()), (8, 1));
    // The critical partition was synthesized before the normal job's later partitions.
    let normal_after = n.iter().filter(|t| **t > c[0]).count();
    assert!(
        normal_after >= 4,
        "critical started at {} after normal partitions {n:?}",
        c[0]
    );
    let compute_end = |job: &str| {
        events
            .iter()
            .filter(|e| e.job_id == job && e.stage == "compute")
            .map(|e| e.end_us)
            .max()
            .unwrap_or(0)
    };
    assert!(compute_end(&critical) < compute_end(&normal));
    daemon.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_input_is_refused_per_field() {
    let (daemon, mut client) = start(config("bad", |_| {})).await;
    let good = synthetic("", 5, 1, 1);
    let cases: Vec<(&str, pb::SubmitProofRequest, &str)> = vec![
        (
            "unspecified kind",
            pb::SubmitProofRequest {
                proof_kind: 0,
                ..good.clone()
            },
            "proof_kind",
        ),
        (
            "unknown kind",
            pb::SubmitProofRequest {
                proof_kind: 77,
                ..good.clone()
            },
            "proof_kind",
        ),
        (
            "kind not served",
            pb::SubmitProofRequest {
                proof_kind: pb::ProofKind::WinningPost as i32,
                ..good.clone()
            },
            "proof_kind",
        ),
        (
            "empty payload",
            pb::SubmitProofRequest {
                vanilla_proof: vec![],
                ..good.clone()
            },
            "vanilla_proof",
        ),
        (
            "garbage bytes",
            pb::SubmitProofRequest {
                vanilla_proof: b"{\"SectorNum\": garbage".to_vec(),
                ..good.clone()
            },
            "vanilla_proof",
        ),
        (
            "wrong size",
            pb::SubmitProofRequest {
                vanilla_proof: good.vanilla_proof[..20].to_vec(),
                ..good.clone()
            },
            "vanilla_proof",
        ),
        (
            "log_n too large",
            pb::SubmitProofRequest {
                vanilla_proof: cuzk_engine::synthetic::SyntheticSpec {
                    log_n: 60,
                    n_partitions: 1,
                    seed: 0,
                }
                .encode(),
                ..good.clone()
            },
            "vanilla_proof",
        ),
        (
            "unexpected vanilla_proofs",
            pb::SubmitProofRequest {
                vanilla_proofs: vec![vec![1, 2, 3]],
                ..good.clone()
            },
            "vanilla_proofs",
        ),
        (
            "unknown priority",
            pb::SubmitProofRequest {
                priority: 9,
                ..good.clone()
            },
            "priority",
        ),
    ];
    for (name, req, field) in cases {
        let err = client.submit_proof(req).await.expect_err(name);
        assert_eq!(err.code(), Code::InvalidArgument, "{name}: {err:?}");
        assert!(
            err.message().contains(field),
            "{name}: {:?} does not name {field}",
            err.message()
        );
    }
    let err = client
        .prove(pb::ProveRequest { submit: None })
        .await
        .expect_err("no submit");
    assert!(err.message().contains("submit"), "{}", err.message());

    for id in ["porep-32g", "synthetic-99", "", "synthetic-x"] {
        let err = client
            .preload_srs(pb::PreloadSrsRequest {
                circuit_id: id.into(),
            })
            .await
            .expect_err(id);
        assert_eq!(err.code(), Code::InvalidArgument, "{id}");
        assert!(
            err.message().contains("circuit_id"),
            "{id}: {}",
            err.message()
        );
        let err = client
            .evict_srs(pb::EvictSrsRequest {
                circuit_id: id.into(),
            })
            .await
            .expect_err(id);
        assert!(
            err.message().contains("circuit_id"),
            "{id}: {}",
            err.message()
        );
    }
    let err = client
        .await_proof(pb::AwaitProofRequest {
            job_id: "nope".into(),
            timeout_ms: 5,
        })
        .await
        .expect_err("unknown");
    assert_eq!(err.code(), Code::NotFound);
    assert!(err.message().contains("job_id"));
    let err = client
        .cancel_proof(pb::CancelProofRequest {
            job_id: "nope".into(),
        })
        .await
        .expect_err("unknown");
    assert_eq!(err.code(), Code::NotFound);

    // Still serving.
    let job = submit(&mut client, good).await;
    assert_eq!(status_of(&wait(&mut client, &job).await), S::Completed);
    daemon.shutdown().await.expect("clean shutdown");
}
