//! [`SrsFile`]: the query points of a `.params` file read on demand, chunk by chunk, into
//! a caller's buffer in blst's in-memory layout. A device that streams the SRS from host
//! memory can stream it from the file instead when the host cannot hold the decoded copy
//! (a 32 GiB PoRep SRS is 47.4 GB): the file is read through the page cache, which the
//! kernel may drop under pressure, so the process holds nothing for it.
//!
//! Reads are positioned (`pread`), not mapped: a file truncated under the daemon then
//! fails a read with an error instead of raising SIGBUS. The points were checked when the
//! SRS was first loaded; a chunk gets the cheap checks again (flags, coordinates below the
//! modulus) but not the on-curve check, and [`SrsFile::open`] compares the file's
//! fingerprint with the loaded one, so a file replaced under the daemon is refused.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use blstrs::Fp;
use rayon::prelude::*;

use super::layout::{Layout, Section};
use super::{Srs, SrsError};

/// A query of the SRS, as its points are laid out in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SrsQuery {
    /// H: `domain − 1` G1 points.
    H,
    /// L: one G1 point per aux variable.
    L,
    /// A: G1 points.
    A,
    /// B in G1.
    BG1,
    /// B in G2.
    BG2,
}

/// Bytes of one point of the file (and of blst's affine point in memory: the same size).
pub const fn point_bytes(q: SrsQuery) -> usize {
    match q {
        SrsQuery::BG2 => 192,
        _ => 96,
    }
}

/// Points per positioned read: 12 MiB of G1 points, 24 MiB of G2.
const READ_POINTS: usize = 1 << 17;

/// An open `.params` file whose query points are read on demand.
#[derive(Debug)]
pub struct SrsFile {
    file: File,
    path: PathBuf,
    layout: Layout,
    /// Bytes of the file, from its start, left to the page cache; what a read takes beyond
    /// them is dropped from the cache right after it ([`SrsFile::set_cache_share`]).
    cache_share: AtomicU64,
}

impl SrsFile {
    /// Opens `srs`'s file and checks that it still holds the points `srs` was loaded with:
    /// the same section lengths and the same [`Srs::fingerprint`] (the verifying key and 17
    /// sampled points of each query).
    ///
    /// # Errors
    /// As [`Srs::check_file`]; [`SrsError::BadLength`] when the file is not the one `srs`
    /// was read from.
    pub fn open(srs: &Srs) -> Result<SrsFile, SrsError> {
        let path = srs.path.clone();
        let (file, layout) = super::open_walked(&path)?;
        let lens = srs.lens();
        let f = SrsFile::new(file, path, layout);
        let same_lens = [
            (layout.h.len, lens.h),
            (layout.l.len, lens.l),
            (layout.a.len, lens.a),
            (layout.b_g1.len, lens.b),
        ]
        .iter()
        .all(|&(got, want)| got == want as u64);
        let changed = |reason: &str| SrsError::BadLength {
            path: f.path.clone(),
            section: "h",
            offset: layout.h.prefix_offset,
            len: layout.h.len,
            reason: format!("{reason} than when the SRS was loaded: the file was replaced"),
        };
        if !same_lens {
            return Err(changed("other section lengths"));
        }
        if f.fingerprint(srs)? != srs.fingerprint() {
            return Err(changed("other points"));
        }
        Ok(f)
    }

    /// Leaves the first `bytes` of the file to the page cache and drops what a read takes
    /// beyond them from it as soon as it is decoded (`POSIX_FADV_DONTNEED`). Every prove
    /// reads the whole file in order, and a cache smaller than the file would otherwise
    /// hold none of it by the time it is read again (each read evicting the pages the
    /// next prove needs first): with a share that fits, that part is read from memory
    /// and only the rest from the disk. Default: all of it (nothing is dropped).
    pub fn set_cache_share(&self, bytes: u64) {
        self.cache_share.store(bytes, Ordering::Relaxed);
    }

    /// An open file of `layout` (walked), before anything is checked.
    pub(super) fn new(file: File, path: PathBuf, layout: Layout) -> SrsFile {
        SrsFile {
            file,
            path,
            layout,
            cache_share: AtomicU64::new(u64::MAX),
        }
    }

    /// Checks every query point of the file as [`Srs::load`] does (with `check_points`
    /// the subgroup too), a chunk at a time: what a daemon that streams the SRS from the
    /// file checks once, holding nothing.
    ///
    /// # Errors
    /// [`SrsError::BadPoint`] for the first bad point, [`SrsError::Io`].
    pub fn check_points(&self, check_points: bool) -> Result<(), SrsError> {
        super::decode::SectionReader {
            file: &self.file,
            path: &self.path,
            check_points,
        }
        .check_queries(&self.layout)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Points of query `q` in the file.
    pub fn len(&self, q: SrsQuery) -> usize {
        self.section(q).len as usize
    }

    /// Whether query `q` has no points.
    pub fn is_empty(&self, q: SrsQuery) -> bool {
        self.len(q) == 0
    }

    fn section(&self, q: SrsQuery) -> &Section {
        match q {
            SrsQuery::H => &self.layout.h,
            SrsQuery::L => &self.layout.l,
            SrsQuery::A => &self.layout.a,
            SrsQuery::BG1 => &self.layout.b_g1,
            SrsQuery::BG2 => &self.layout.b_g2,
        }
    }

    /// Reads points `first..first + n` of query `q` into `dst` (`n` = `dst.len()` over the
    /// point size) in blst's affine layout: coordinates in Montgomery form as
    /// little-endian u64 limbs, x then y (for G2 each coordinate c0 then c1), the bytes a
    /// `&[G1Affine]` or `&[G2Affine]` holds in memory. Reads and decodes in parallel
    /// pieces.
    ///
    /// # Errors
    /// [`SrsError::Io`] on a failed or short read; [`SrsError::BadPoint`] for a point whose
    /// encoding is not a finite point's (flag bits, a coordinate not below the modulus);
    /// [`SrsError::BadLength`] when the range is not in the query.
    pub fn read_into(&self, q: SrsQuery, first: usize, dst: &mut [u8]) -> Result<(), SrsError> {
        let pb = point_bytes(q);
        let s = *self.section(q);
        let n = dst.len() / pb;
        if !dst.len().is_multiple_of(pb) || first + n > s.len as usize {
            return Err(SrsError::BadLength {
                path: self.path.clone(),
                section: s.name,
                offset: s.prefix_offset,
                len: s.len,
                reason: format!(
                    "a read of {} bytes from point {first} does not fit the section",
                    dst.len()
                ),
            });
        }
        dst.par_chunks_mut(READ_POINTS * pb)
            .enumerate()
            .try_for_each(|(k, piece)| {
                let at = first + k * READ_POINTS;
                let offset = s.data_offset + (at * pb) as u64;
                self.file
                    .read_exact_at(piece, offset)
                    .map_err(|source| SrsError::Io {
                        path: self.path.clone(),
                        source,
                    })?;
                self.drop_beyond_share(offset, piece.len() as u64);
                piece
                    .chunks_exact_mut(pb)
                    .enumerate()
                    .try_for_each(|(i, p)| match to_blst(p) {
                        true => Ok(()),
                        false => Err(SrsError::BadPoint {
                            path: self.path.clone(),
                            section: s.name,
                            index: (at + i) as u64,
                            offset: offset + (i * pb) as u64,
                            reason: "not a finite point's encoding (flags or a coordinate)",
                        }),
                    })
            })
    }

    /// Drops the part of `offset..offset + len` beyond the cache share from the page cache
    /// (advice only: an error changes nothing but the cache).
    fn drop_beyond_share(&self, offset: u64, len: u64) {
        let share = self.cache_share.load(Ordering::Relaxed);
        let from = offset.max(share);
        let end = offset + len;
        if let Some(n) = std::num::NonZeroU64::new(end.saturating_sub(from)) {
            let _ = rustix::fs::fadvise(&self.file, from, Some(n), rustix::fs::Advice::DontNeed);
        }
    }

    /// [`Srs::fingerprint`] of the points in the file, with `srs`'s verifying key.
    pub(super) fn fingerprint(&self, srs: &Srs) -> Result<[u8; 32], SrsError> {
        let mut err = None;
        let fp = srs.fingerprint_with(|q, i| {
            let pb = point_bytes(q);
            let mut buf = vec![0u8; pb];
            let s = self.section(q);
            if let Err(source) = self
                .file
                .read_exact_at(&mut buf, s.data_offset + (i * pb) as u64)
            {
                err.get_or_insert(SrsError::Io {
                    path: self.path.clone(),
                    source,
                });
            }
            buf
        });
        match err {
            Some(e) => Err(e),
            None => Ok(fp),
        }
    }
}

/// One point's uncompressed encoding (big-endian coordinates, G2's as c1 ‖ c0) rewritten
/// in place as blst's affine point; false when a flag is set or a coordinate is not below
/// the modulus.
fn to_blst(p: &mut [u8]) -> bool {
    if p[0] & 0xe0 != 0 {
        return false;
    }
    let coords = p.len() / 48;
    let mut limbs = [[0u64; 6]; 4];
    for (c, out) in limbs.iter_mut().enumerate().take(coords) {
        let Ok(raw) = <[u8; 48]>::try_from(&p[c * 48..(c + 1) * 48]) else {
            return false;
        };
        let Some(fp) = Option::<Fp>::from(Fp::from_bytes_be(&raw)) else {
            return false;
        };
        *out = blst::blst_fp::from(fp).l;
    }
    // G2: the file has x.c1, x.c0, y.c1, y.c0; memory has x.c0, x.c1, y.c0, y.c1.
    let order: &[usize] = match coords {
        2 => &[0, 1],
        _ => &[1, 0, 3, 2],
    };
    for (slot, &c) in order.iter().enumerate() {
        for (w, limb) in limbs[c].iter().enumerate() {
            let at = slot * 48 + w * 8;
            p[at..at + 8].copy_from_slice(&limb.to_le_bytes());
        }
    }
    true
}
