//! The host side of a prove's results: [`ProvePlan::combine`] reads the one download of
//! the results region the plan laid out, Horner-combines each chunk's window sums, adds
//! the ones' sums, and returns the five sums and the others' counts.

use blstrs::{G1Projective, G2Projective};
use group::Group as _;

use crate::backend::plan::{ProvePlan, Span};
use crate::device::layout;
use crate::error::{GpuError, Result};
use crate::ops::msm::Group;

impl ProvePlan {
    /// The five sums from the downloaded results region: per chunk, the Horner combination
    /// of the window sums plus the ones; and the others' counts (hints for the next plan).
    ///
    /// # Errors
    /// [`GpuError::Internal`] if `raw` is shorter than the results region.
    pub fn combine(&self, raw: &[u8]) -> Result<(Sums, [usize; 4])> {
        if raw.len() < self.results.bytes {
            return Err(GpuError::Internal(format!(
                "{} result bytes of {}",
                raw.len(),
                self.results.bytes
            )));
        }
        let at = |r: Span| &raw[r.off..r.end()];
        let mut g1 = [G1Projective::identity(); 4];
        let mut b_g2 = G2Projective::identity();
        let mut others = [0usize; 4];
        for (i, sum) in self.sums.iter().enumerate() {
            let windows = sum.shape().sums() as usize;
            for j in 0..sum.chunks {
                let o = sum.chunk_out(j);
                if sum.split {
                    let cnt = at(o.counts);
                    others[i - 1] += u32::from_le_bytes([cnt[4], cnt[5], cnt[6], cnt[7]]) as usize;
                }
                // With accumulators, chunk 0's results hold the whole sum.
                if sum.acc.is_some() && j > 0 {
                    continue;
                }
                let w = &at(o.windows)[..windows * sum.group.jacobian_bytes()];
                match sum.group {
                    Group::G1 => {
                        g1[i.min(3)] += horner_g1(sum.c, w);
                        if sum.split {
                            g1[i.min(3)] += layout::g1_from_jacobian(at(o.ones));
                        }
                    }
                    Group::G2 => {
                        b_g2 += horner_g2(sum.c, w);
                        b_g2 += layout::g2_from_jacobian(at(o.ones));
                    }
                }
            }
        }
        // g1 is indexed by query up to B in G1 (H, L, A, B_G1 are 0..3).
        let [h, l, a, b_g1] = g1;
        Ok((
            Sums {
                h,
                l,
                a,
                b_g1,
                b_g2,
            },
            others,
        ))
    }
}

/// The five sums of a prove.
#[derive(Clone, Copy, Debug)]
pub struct Sums {
    /// Σ h_i·H_i.
    pub h: G1Projective,
    /// Σ w_i·L_i.
    pub l: G1Projective,
    /// Σ z_i·A_i.
    pub a: G1Projective,
    /// Σ z_i·B1_i.
    pub b_g1: G1Projective,
    /// Σ z_i·B2_i.
    pub b_g2: G2Projective,
}

/// Σ_w 2^(c·w)·W_w over G1 window sums.
fn horner_g1(c: u32, raw: &[u8]) -> G1Projective {
    crate::ops::msm::MsmOut::finish_g1(c, raw)
}

/// Σ_w 2^(c·w)·W_w over G2 window sums.
fn horner_g2(c: u32, raw: &[u8]) -> G2Projective {
    crate::ops::msm::MsmOut::finish_g2(c, raw)
}
