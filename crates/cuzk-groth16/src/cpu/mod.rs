//! The CPU backend: owns [`CpuBackend`], which computes H and the five MSMs of a
//! partition with rayon and blst. The transforms are in `ntt.rs`, the H pipeline in
//! `h.rs`, the bit-scalar split and Pippenger calls in `msm.rs`. It is the reference the
//! GPU backend is tested against and the fallback without a GPU.

pub mod h;
pub mod msm;
pub mod ntt;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::assignment::AbcValues;
use crate::backend::{Backend, BackendError, MsmOutputs, ProveReport, ProveStage};
use crate::{Assignment, Srs};
use h::HPlan;
use msm::{msm_g1, msm_g2, ScalarSplit};

/// Largest domain whose [`HPlan`] is kept between proofs: a plan holds 2n scalars
/// (64 MiB at 2^20, but 8 GiB at 2^27), and building one costs ~3% of the seven
/// transforms, so large plans are rebuilt per proof rather than pinned in memory.
const MAX_CACHED_LG: u32 = 20;

/// Computes a partition's H and MSM sums on the CPU. Keeps one [`HPlan`] per domain size
/// up to 2^20 it has seen (twiddles and coset table), so repeated proofs of one small
/// circuit shape pay for them once.
#[derive(Debug, Default)]
pub struct CpuBackend {
    plans: Mutex<HashMap<u32, Arc<HPlan>>>,
}

impl CpuBackend {
    /// A backend with no cached plans.
    pub fn new() -> Self {
        Self::default()
    }

    /// The plan for 2^lg_n, built on first use (and cached when small).
    fn plan(&self, lg_n: u32) -> Result<Arc<HPlan>, BackendError> {
        let build = || {
            HPlan::new(lg_n)
                .map(Arc::new)
                .map_err(|e| BackendError::Mismatch {
                    what: e.to_string(),
                })
        };
        if lg_n > MAX_CACHED_LG {
            return build();
        }
        // A poisoned lock only means another prove panicked while inserting: the map
        // itself is still a valid cache.
        let mut plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = plans.get(&lg_n) {
            return Ok(p.clone());
        }
        let plan = build()?;
        plans.insert(lg_n, plan.clone());
        Ok(plan)
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> String {
        "cpu".to_string()
    }

    fn compute(
        &self,
        asg: &Assignment,
        srs: &Srs,
        report: &mut ProveReport,
    ) -> Result<MsmOutputs, BackendError> {
        if srs.is_released() {
            return Err(BackendError::SrsReleased);
        }
        check_shapes(asg, srs)?;

        let t = Instant::now();
        // A deferred assignment's a, b, c: the recording's sparse products, here.
        let abc = asg.abc_values().map_err(|e| BackendError::Mismatch {
            what: e.to_string(),
        })?;
        check_rows(asg.n_rows(), &abc)?;
        let plan = self.plan(asg.lg_domain())?;
        let h = plan
            .compute_h(&abc.a, &abc.b, &abc.c)
            .map_err(|e| BackendError::Mismatch {
                what: e.to_string(),
            })?;
        drop(abc);
        report.push(ProveStage::NttH, t.elapsed());

        let t = Instant::now();
        let h_split = ScalarSplit::new(&[(&h, None)]);
        drop(h);
        let h = msm_g1(&srs.h, &h_split);
        drop(h_split);
        report.push(ProveStage::MsmH, t.elapsed());

        let t = Instant::now();
        let l_split = ScalarSplit::new(&[(&asg.aux_assignment, None)]);
        // Every input is in the A query; aux variables only where A uses them.
        let a_split = ScalarSplit::new(&[
            (&asg.input_assignment, None),
            (&asg.aux_assignment, Some(&asg.a_aux_density)),
        ]);
        let b_split = ScalarSplit::new(&[
            (&asg.input_assignment, Some(&asg.b_input_density)),
            (&asg.aux_assignment, Some(&asg.b_aux_density)),
        ]);
        report.push(ProveStage::Classify, t.elapsed());
        for (name, split, n_bases) in [
            ("l", &l_split, srs.l.len()),
            ("a", &a_split, srs.a.len()),
            ("b_g1", &b_split, srs.b_g1.len()),
            ("b_g2", &b_split, srs.b_g2.len()),
        ] {
            if split.n_bases != n_bases {
                return Err(BackendError::Mismatch {
                    what: format!(
                        "{name} query: assignment uses {} bases, parameters have {n_bases}",
                        split.n_bases
                    ),
                });
            }
        }

        let t = Instant::now();
        let l = msm_g1(&srs.l, &l_split);
        report.push(ProveStage::MsmL, t.elapsed());
        let t = Instant::now();
        let a = msm_g1(&srs.a, &a_split);
        report.push(ProveStage::MsmA, t.elapsed());
        let t = Instant::now();
        let b_g1 = msm_g1(&srs.b_g1, &b_split);
        report.push(ProveStage::MsmBG1, t.elapsed());
        let t = Instant::now();
        let b_g2 = msm_g2(&srs.b_g2, &b_split);
        report.push(ProveStage::MsmBG2, t.elapsed());

        Ok(MsmOutputs {
            h,
            l,
            a,
            b_g1,
            b_g2,
        })
    }
}

/// Checks that a, b, c have `rows` rows each.
fn check_rows(rows: usize, abc: &AbcValues<'_>) -> Result<(), BackendError> {
    if abc.a.len() != rows || abc.b.len() != rows || abc.c.len() != rows {
        return Err(BackendError::Mismatch {
            what: format!(
                "a, b, c have {}, {}, {} rows",
                abc.a.len(),
                abc.b.len(),
                abc.c.len()
            ),
        });
    }
    Ok(())
}

/// Checks that the assignment is well formed and sized for these parameters (a, b, c are
/// checked by [`check_rows`] once evaluated).
fn check_shapes(asg: &Assignment, srs: &Srs) -> Result<(), BackendError> {
    let mismatch = |what: String| Err(BackendError::Mismatch { what });
    let rows = asg.n_rows();
    if asg.input_assignment.is_empty() {
        return mismatch("no public inputs (ONE is missing)".to_string());
    }
    let n_aux = asg.aux_assignment.len();
    if asg.a_aux_density.len() != n_aux || asg.b_aux_density.len() != n_aux {
        return mismatch(format!(
            "aux densities have {} and {} bits for {n_aux} aux variables",
            asg.a_aux_density.len(),
            asg.b_aux_density.len()
        ));
    }
    if asg.b_input_density.len() != asg.input_assignment.len() {
        return mismatch(format!(
            "b input density has {} bits for {} inputs",
            asg.b_input_density.len(),
            asg.input_assignment.len()
        ));
    }
    if asg.lg_domain() > 32 {
        return mismatch(format!("{rows} rows need a domain larger than 2^32"));
    }
    let n = 1usize << asg.lg_domain();
    if srs.h.len() != n - 1 {
        return mismatch(format!(
            "h query has {} points, domain 2^{} needs {}",
            srs.h.len(),
            asg.lg_domain(),
            n - 1
        ));
    }
    if srs.l.len() != n_aux {
        return mismatch(format!(
            "l query has {} points for {n_aux} aux variables",
            srs.l.len()
        ));
    }
    if srs.b_g1.len() != srs.b_g2.len() {
        return mismatch(format!(
            "b_g1 query has {} points, b_g2 {}",
            srs.b_g1.len(),
            srs.b_g2.len()
        ));
    }
    Ok(())
}
