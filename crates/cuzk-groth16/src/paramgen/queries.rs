//! From a recorded QAP to the parameters: the query scalars (ic, l from β·u + α·v + w;
//! a and b from the nonzero u and v), one fixed-base product per query (each its own
//! stage), the verifying key, and, when given a file, each query written into its section
//! while the next is computed (`srs/sections.rs`'s `SectionFile`). The recording and the QAP
//! evaluation are `mod.rs`'s and `parts.rs`'s.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective};
use ff::Field;
use group::Curve;
use rayon::prelude::*;

use crate::srs::sections;

use super::{
    h_scalars, joined, Evaluated, FixedBaseMul, Generated, ParamgenError, Recorded, ToxicWaste,
};
use crate::{Scalar, Srs, SrsError, VerifyingKey};

/// γ⁻¹ and δ⁻¹.
pub(super) struct Inverses {
    pub gamma: Scalar,
    pub delta: Scalar,
}

impl Inverses {
    pub fn of(toxic: &ToxicWaste) -> Result<Inverses, ParamgenError> {
        Ok(Inverses {
            gamma: Option::<Scalar>::from(toxic.gamma.invert())
                .ok_or(ParamgenError::DegenerateTrapdoor("gamma is zero"))?,
            delta: Option::<Scalar>::from(toxic.delta.invert())
                .ok_or(ParamgenError::DegenerateTrapdoor("delta is zero"))?,
        })
    }
}

/// Wall time per stage, in order.
pub(super) struct Clock {
    stages: Vec<(&'static str, Duration)>,
    since: Instant,
}

impl Clock {
    pub fn start() -> Clock {
        Clock {
            stages: Vec::new(),
            since: Instant::now(),
        }
    }

    /// Ends stage `name` now.
    pub fn lap(&mut self, name: &'static str) {
        self.stages.push((name, self.since.elapsed()));
        self.since = Instant::now();
    }
}

/// From the recorded QAP: the query scalars, every fixed-base product (one stage each)
/// and the verifying key.
pub(super) fn finish(
    recorded: Recorded,
    toxic: &ToxicWaste,
    inv: &Inverses,
    fbm: &dyn FixedBaseMul,
    mut clock: Clock,
    out: Option<&Path>,
) -> Result<Generated, ParamgenError> {
    let ToxicWaste {
        g1,
        g2,
        alpha,
        beta,
        gamma,
        delta,
        tau,
    } = *toxic;
    let Recorded {
        n_inputs,
        n_aux,
        n_rows,
        lg,
        uvw: [u, v, w],
        h,
    } = recorded;
    let n = 1usize << lg;
    // The h query made beside synthesis reports its device stages with it.
    let mut fixed_base_stages = vec![("synthesis", fbm.take_stages())];
    // The query scalars, on all cores. bellperson filters the identity points out of a,
    // b_g1 and b_g2, so only the nonzero u_k and v_k make points.
    let nonzero = |x: &Evaluated| -> Vec<Scalar> {
        let mut out: Vec<Scalar> = x
            .inputs
            .par_iter()
            .copied()
            .filter(|s| !bool::from(s.is_zero()))
            .collect();
        out.par_extend(
            x.aux
                .par_iter()
                .copied()
                .filter(|s| !bool::from(s.is_zero())),
        );
        out
    };
    let a_scalars = nonzero(&u);
    let b_scalars = nonzero(&v);
    let ext = |u: &[Scalar], v: &[Scalar], w: &[Scalar], inv: Scalar| -> Vec<Scalar> {
        u.par_iter()
            .zip(v)
            .zip(w)
            .map(|((u, v), w)| (beta * u + alpha * v + w) * inv)
            .collect()
    };
    let ic_scalars = ext(&u.inputs, &v.inputs, &w.inputs, inv.gamma);
    let l_scalars = ext(&u.aux, &v.aux, &w.aux, inv.delta);
    drop((u, v, w));
    if ic_scalars.par_iter().any(|e| bool::from(e.is_zero())) {
        // An input always has u ≠ 0 through its input·0 = 0 row, so this takes toxic
        // waste that cancels it exactly.
        return Err(ParamgenError::DegenerateTrapdoor(
            "an input's query scalar is zero",
        ));
    }
    if let Some(index) = l_scalars
        .par_iter()
        .position_first(|e| bool::from(e.is_zero()))
    {
        return Err(ParamgenError::UnconstrainedVariable { index });
    }
    clock.lap("qap");

    // ic first (a few points): with it the verifying key, and so every offset of the
    // file, is known, and each product below is written while the next is computed.
    let ic = fbm.mul_g1(g1, &ic_scalars)?;
    drop(ic_scalars);
    let (g1, g2) = (g1.to_affine(), g2.to_affine());
    let vk = VerifyingKey {
        alpha_g1: (g1 * alpha).to_affine(),
        beta_g1: (g1 * beta).to_affine(),
        beta_g2: (g2 * beta).to_affine(),
        gamma_g2: (g2 * gamma).to_affine(),
        delta_g1: (g1 * delta).to_affine(),
        delta_g2: (g2 * delta).to_affine(),
        ic,
    };
    let counts = [
        n - 1,
        l_scalars.len(),
        a_scalars.len(),
        b_scalars.len(),
        b_scalars.len(),
    ];
    let file = match out {
        Some(path) => Some(sections::SectionFile::create(path, &vk, counts)?),
        None => None,
    };
    let (g1, g2) = (G1Projective::from(g1), G2Projective::from(g2));
    let products = std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::channel::<Product>();
        let writer = file
            .as_ref()
            .map(|f| scope.spawn(move || write_products(f, rx)));
        // A failed writer has dropped its end: the products are kept and its error
        // reported after the join.
        let send = |p: Product| {
            let _ = tx.send(p);
        };
        // One fixed-base run per query, each into its own vector (no splitting copies),
        // each its own stage with the implementation's breakdown.
        let mut product = |name: &'static str, clock: &mut Clock| {
            clock.lap(name);
            fixed_base_stages.push((name, fbm.take_stages()));
        };
        let h = Arc::new(match h {
            Some(h) => h,
            None => {
                let h = fbm.mul_g1(g1, &h_scalars(tau, inv.delta, lg))?;
                product("fb_h", &mut clock);
                h
            }
        });
        debug_assert_eq!(h.len(), n - 1);
        send(Product::G1(sections::Section::H, h.clone()));
        let a = Arc::new(fbm.mul_g1(g1, &a_scalars)?);
        drop(a_scalars);
        product("fb_a", &mut clock);
        send(Product::G1(sections::Section::A, a.clone()));
        let b_g1 = Arc::new(fbm.mul_g1(g1, &b_scalars)?);
        product("fb_b_g1", &mut clock);
        send(Product::G1(sections::Section::BG1, b_g1.clone()));
        let b_g2 = Arc::new(fbm.mul_g2(g2, &b_scalars)?);
        drop(b_scalars);
        product("fb_b_g2", &mut clock);
        send(Product::G2(b_g2.clone()));
        let l = Arc::new(fbm.mul_g1(g1, &l_scalars)?);
        drop(l_scalars);
        product("fb_l", &mut clock);
        send(Product::G1(sections::Section::L, l.clone()));
        drop(tx);
        if let Some(w) = writer {
            joined(w.join())?;
        }
        Ok::<_, ParamgenError>((h, l, a, b_g1, b_g2))
    });
    let (h, l, a, b_g1, b_g2) = match products {
        Ok(p) => p,
        Err(e) => {
            if let Some(f) = file {
                f.discard();
            }
            return Err(e);
        }
    };
    if let Some(f) = file {
        f.finish()?;
        clock.lap("save");
    }
    debug_assert_eq!(l.len(), n_aux);
    // The writer has ended and dropped its handles: each Arc is the only one (a clone
    // would only cost memory, never change a point).
    let (h, l, a, b_g1, b_g2) = (owned(h), owned(l), owned(a), owned(b_g1), owned(b_g2));
    tracing::info!(
        n_rows,
        n_inputs,
        n_aux,
        lg_domain = lg,
        n_a = a.len(),
        n_b = b_g2.len(),
        "parameters generated"
    );
    let srs = Srs {
        host_pins: Default::default(),
        path: out.map(Path::to_path_buf).unwrap_or_default(),
        vk,
        h,
        l,
        a,
        b_g1,
        b_g2,
        released: None,
        file: None,
    };
    Ok(Generated {
        srs,
        toxic: *toxic,
        n_rows,
        stages: clock.stages,
        fixed_base_stages,
    })
}

/// A fixed-base product on its way to the file.
enum Product {
    G1(sections::Section, Arc<Vec<G1Affine>>),
    G2(Arc<Vec<G2Affine>>),
}

/// Writes each product into its section of `file` as it arrives.
fn write_products(
    file: &sections::SectionFile,
    rx: std::sync::mpsc::Receiver<Product>,
) -> Result<(), SrsError> {
    for p in rx {
        match p {
            Product::G1(section, points) => file.write(section, sections::Points::G1(&points))?,
            Product::G2(points) => {
                file.write(sections::Section::BG2, sections::Points::G2(&points))?
            }
        }
    }
    Ok(())
}

/// The vector behind `x`, moved out when `x` is its only handle.
fn owned<T: Clone>(x: Arc<Vec<T>>) -> Vec<T> {
    Arc::try_unwrap(x).unwrap_or_else(|shared| shared.as_ref().clone())
}
