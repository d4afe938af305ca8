//! Decoding a `.params` file's points: chunked positioned reads, each chunk decoded in
//! parallel while the next one is read. Every point gets blst's deserialization check
//! (coordinates below the modulus, on the curve); the verifying key's points, and every
//! point with `check_points`, also get the subgroup check. A failing point is reported by
//! its lowest index, with the reason worked out again on that one point only.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use blstrs::{Fp, G1Affine, G2Affine};
use group::prime::PrimeCurveAffine;
use rayon::prelude::*;

use super::layout::{Layout, Section, SectionKind, G1_BYTES, G2_BYTES, VK_FIXED_BYTES};
use super::SrsError;
use crate::VerifyingKey;

/// Points per read: 6 MiB of G1 or 12 MiB of G2, large enough for a read to cost little
/// next to decoding it, small enough that two buffers stay cheap.
const POINTS_PER_CHUNK: usize = 1 << 16;

/// Reads sections of one open file.
pub(super) struct SectionReader<'a> {
    pub file: &'a File,
    pub path: &'a Path,
    pub check_points: bool,
}

impl SectionReader<'_> {
    /// The verifying key: the six fixed points and the IC section, all subgroup-checked
    /// (bellperson's `VerifyingKey::read` checks them too, and there are few).
    pub fn read_vk(&self, layout: &Layout) -> Result<VerifyingKey, SrsError> {
        let mut fixed = vec![0u8; VK_FIXED_BYTES as usize];
        self.read_at(&mut fixed, 0)?;
        // alpha_g1 | beta_g1 | beta_g2 | gamma_g2 | delta_g1 | delta_g2 (96/192 bytes each).
        let alpha_g1 = self.fixed_point::<G1Affine>(&fixed[0..96], 0, 0)?;
        let beta_g1 = self.fixed_point::<G1Affine>(&fixed[96..192], 1, 96)?;
        let beta_g2 = self.fixed_point::<G2Affine>(&fixed[192..384], 2, 192)?;
        let gamma_g2 = self.fixed_point::<G2Affine>(&fixed[384..576], 3, 384)?;
        let delta_g1 = self.fixed_point::<G1Affine>(&fixed[576..672], 4, 576)?;
        let delta_g2 = self.fixed_point::<G2Affine>(&fixed[672..864], 5, 672)?;
        let ic = self.read_points::<G1Affine>(&layout.ic, true)?;
        Ok(VerifyingKey {
            alpha_g1,
            beta_g1,
            beta_g2,
            gamma_g2,
            delta_g1,
            delta_g2,
            ic,
        })
    }

    /// A G1 section, subgroup-checked only with `check_points`.
    pub fn read_g1(&self, s: &Section) -> Result<Vec<G1Affine>, SrsError> {
        debug_assert_eq!(s.kind, SectionKind::G1);
        self.read_points::<G1Affine>(s, self.check_points)
    }

    /// A G2 section, subgroup-checked only with `check_points`.
    pub fn read_g2(&self, s: &Section) -> Result<Vec<G2Affine>, SrsError> {
        debug_assert_eq!(s.kind, SectionKind::G2);
        self.read_points::<G2Affine>(s, self.check_points)
    }

    /// Checks every point of the five query sections as [`SectionReader::read_g1`] and
    /// [`SectionReader::read_g2`] would, keeping none (a chunk at a time in memory).
    pub fn check_queries(&self, layout: &Layout) -> Result<(), SrsError> {
        for s in [&layout.h, &layout.l, &layout.a, &layout.b_g1] {
            self.check_points::<G1Affine>(s)?;
        }
        self.check_points::<G2Affine>(&layout.b_g2)
    }

    /// Decodes a section chunk by chunk and drops the points; the first bad one is
    /// reported as `read_points` reports it.
    fn check_points<P: Point>(&self, s: &Section) -> Result<(), SrsError> {
        self.scan_points::<P>(s, self.check_points, None)
    }

    fn fixed_point<P: Point>(&self, bytes: &[u8], index: u64, offset: u64) -> Result<P, SrsError> {
        P::decode(bytes, true).ok_or_else(|| SrsError::BadPoint {
            path: self.path.to_path_buf(),
            section: "vk",
            index,
            offset,
            reason: P::diagnose(bytes),
        })
    }

    /// Reads and decodes a whole section; the next chunk's read overlaps this chunk's decode.
    fn read_points<P: Point>(&self, s: &Section, check: bool) -> Result<Vec<P>, SrsError> {
        // The length fits the file (checked by the layout walk), so this allocation is
        // bounded by the file's size.
        let mut out: Vec<P> = Vec::with_capacity(s.len as usize);
        self.scan_points(s, check, Some(&mut out))?;
        Ok(out)
    }

    /// Decodes a section chunk by chunk, the next chunk's read overlapping this chunk's
    /// decode, onto the end of `out` (or dropping the points); the first bad point is
    /// reported by its index.
    fn scan_points<P: Point>(
        &self,
        s: &Section,
        check: bool,
        mut out: Option<&mut Vec<P>>,
    ) -> Result<(), SrsError> {
        let n = s.len as usize;
        let n_chunks = n.div_ceil(POINTS_PER_CHUNK);
        let (mut cur, mut next) = (Vec::new(), Vec::new());
        if n_chunks > 0 {
            self.read_chunk::<P>(s, 0, &mut cur)?;
        }
        for k in 0..n_chunks {
            let (read, bad) = rayon::join(
                || match k + 1 < n_chunks {
                    true => self.read_chunk::<P>(s, k + 1, &mut next),
                    false => Ok(()),
                },
                || decode_chunk::<P>(&cur, check, out.as_deref_mut()),
            );
            if let Some(i) = bad {
                let index = (k * POINTS_PER_CHUNK + i) as u64;
                let bytes = &cur[i * P::BYTES..(i + 1) * P::BYTES];
                return Err(SrsError::BadPoint {
                    path: self.path.to_path_buf(),
                    section: s.name,
                    index,
                    offset: s.data_offset + index * P::BYTES as u64,
                    reason: P::diagnose(bytes),
                });
            }
            read?;
            std::mem::swap(&mut cur, &mut next);
        }
        Ok(())
    }

    fn read_chunk<P: Point>(
        &self,
        s: &Section,
        k: usize,
        buf: &mut Vec<u8>,
    ) -> Result<(), SrsError> {
        let first = k * POINTS_PER_CHUNK;
        let count = POINTS_PER_CHUNK.min(s.len as usize - first);
        buf.resize(count * P::BYTES, 0);
        self.read_at(buf, s.data_offset + (first * P::BYTES) as u64)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<(), SrsError> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|source| SrsError::Io {
                path: self.path.to_path_buf(),
                source,
            })
    }
}

/// Decodes `buf` onto the end of `out` (or only checks it); returns the lowest index
/// within `buf` that failed.
fn decode_chunk<P: Point>(buf: &[u8], check: bool, out: Option<&mut Vec<P>>) -> Option<usize> {
    let Some(out) = out else {
        return buf
            .par_chunks_exact(P::BYTES)
            .enumerate()
            .filter(|(_, bytes)| P::decode(bytes, check).is_none())
            .map(|(i, _)| i)
            .min();
    };
    let bad = AtomicUsize::new(usize::MAX);
    out.par_extend(
        buf.par_chunks_exact(P::BYTES)
            .enumerate()
            .map(|(i, bytes)| {
                P::decode(bytes, check).unwrap_or_else(|| {
                    bad.fetch_min(i, Ordering::Relaxed);
                    P::identity()
                })
            }),
    );
    match bad.into_inner() {
        usize::MAX => None,
        i => Some(i),
    }
}

/// An affine point type of the file format.
trait Point: PrimeCurveAffine + Send + Sync {
    /// Encoded size.
    const BYTES: usize;
    /// Decodes an uncompressed, non-identity point that lies on the curve; with `check`
    /// also in the prime-order subgroup.
    fn decode(bytes: &[u8], check: bool) -> Option<Self>;
    /// Why `decode(bytes, true)` failed (error path only).
    fn diagnose(bytes: &[u8]) -> &'static str;
}

impl Point for G1Affine {
    const BYTES: usize = G1_BYTES as usize;

    fn decode(bytes: &[u8], check: bool) -> Option<Self> {
        let raw: &[u8; 96] = bytes.try_into().ok()?;
        // Flags: compressed (0x80), infinity (0x40), sign (0x20); an uncompressed query
        // point carries none (identity points are filtered out of the file).
        if raw[0] & 0xe0 != 0 {
            return None;
        }
        let p: G1Affine = Option::from(G1Affine::from_uncompressed_unchecked(raw))?;
        (!check || bool::from(p.is_torsion_free())).then_some(p)
    }

    fn diagnose(bytes: &[u8]) -> &'static str {
        if let Some(reason) = flag_problem(bytes) {
            return reason;
        }
        if !fp_canonical(&bytes[..48]) || !fp_canonical(&bytes[48..96]) {
            return "coordinate not below the field modulus";
        }
        match bytes
            .try_into()
            .ok()
            .and_then(|raw| Option::<G1Affine>::from(G1Affine::from_uncompressed_unchecked(raw)))
        {
            None if bytes[..48].iter().all(|&b| b == 0) => "not in the prime-order subgroup",
            None => "not on the curve",
            Some(_) => "not in the prime-order subgroup",
        }
    }
}

impl Point for G2Affine {
    const BYTES: usize = G2_BYTES as usize;

    fn decode(bytes: &[u8], check: bool) -> Option<Self> {
        let raw: &[u8; 192] = bytes.try_into().ok()?;
        if raw[0] & 0xe0 != 0 {
            return None;
        }
        let p: G2Affine = Option::from(G2Affine::from_uncompressed_unchecked(raw))?;
        (!check || bool::from(p.is_torsion_free())).then_some(p)
    }

    fn diagnose(bytes: &[u8]) -> &'static str {
        if let Some(reason) = flag_problem(bytes) {
            return reason;
        }
        // x = c1 ‖ c0, y = c1 ‖ c0, 48 bytes each.
        if !bytes.chunks(48).all(fp_canonical) {
            return "coordinate not below the field modulus";
        }
        match bytes
            .try_into()
            .ok()
            .and_then(|raw| Option::<G2Affine>::from(G2Affine::from_uncompressed_unchecked(raw)))
        {
            None if bytes[..96].iter().all(|&b| b == 0) => "not in the prime-order subgroup",
            None => "not on the curve",
            Some(_) => "not in the prime-order subgroup",
        }
    }
}

fn flag_problem(bytes: &[u8]) -> Option<&'static str> {
    let flags = bytes.first().copied().unwrap_or(0) & 0xe0;
    if flags & 0x80 != 0 {
        Some("compressed flag set in an uncompressed point")
    } else if flags & 0x40 != 0 {
        Some("point at infinity")
    } else if flags & 0x20 != 0 {
        Some("sign flag set in an uncompressed point")
    } else {
        None
    }
}

/// Whether 48 big-endian bytes are a canonical Fp element (flag bits are already known
/// to be clear).
fn fp_canonical(bytes: &[u8]) -> bool {
    let Ok(raw) = <[u8; 48]>::try_from(bytes) else {
        return false;
    };
    Option::<Fp>::from(Fp::from_bytes_be(&raw)).is_some()
}
