//! The structured reference string: a bellperson `.params` file read into resident,
//! decoded affine points plus the verifying key. Owns [`Srs`], [`SrsOptions`] and
//! [`SrsError`]; the section walk lives in `srs/layout.rs`, point decoding in
//! `srs/decode.rs`, the writer in `srs/write.rs`. Layout and density rules:
//! `../shared/filecoin-facts.md` §6.
//!
//! The file is read with positioned reads in large chunks, double-buffered against a
//! parallel decode, rather than through mmap: mapping a file is `unsafe` (the crate
//! forbids it), and a file truncated under a live mapping would raise SIGBUS where a read
//! returns an error. From the page cache both run at memory speed.

mod decode;
mod file;
mod layout;
pub(crate) mod sections;
mod write;

use std::fs::File;
use std::path::{Path, PathBuf};

use blstrs::{Bls12, G1Affine, G2Affine};

use crate::VerifyingKey;

pub use file::{point_bytes, SrsFile, SrsQuery};
pub use layout::{Layout, Section, SectionKind};

/// How much checking a load does beyond the always-on structural checks (lengths,
/// sections, file size) and the on-curve check every decoded point gets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SrsOptions {
    /// Also check that every query point is in the prime-order subgroup (the verifying
    /// key's points always are checked). Costs roughly one scalar multiplication per point.
    pub check_points: bool,
}

/// Proving parameters resident in host memory. Query names follow the paper / bellperson.
#[derive(Clone, Debug)]
pub struct Srs {
    /// What devices attached to the host points (a registration of their pages for direct
    /// copies, `HostPins`). Declared first so that it is dropped before the points; clear
    /// it before replacing a query vector.
    pub host_pins: HostPins,
    /// Where the parameters were read from (empty when built in memory).
    pub path: PathBuf,
    /// The verifying key.
    pub vk: VerifyingKey,
    /// H query: `domain − 1` points.
    pub h: Vec<G1Affine>,
    /// L query: one point per aux variable.
    pub l: Vec<G1Affine>,
    /// A query: inputs, then the aux variables in the A density (identity points filtered).
    pub a: Vec<G1Affine>,
    /// B query in G1: the inputs and aux variables in the B density.
    pub b_g1: Vec<G1Affine>,
    /// B query in G2: same indices as `b_g1`.
    pub b_g2: Vec<G2Affine>,
    /// Set when the query points were dropped from host memory because every device that
    /// proves with them holds them in its own memory ([`Srs::released`]); the five vectors
    /// are then empty and this keeps what they were.
    pub released: Option<Released>,
    /// For a released SRS: its file, open, for devices that stream the points from it
    /// ([`SrsFile`]); `None` when it has no file or the file no longer holds its points.
    pub file: Option<std::sync::Arc<SrsFile>>,
}

/// Values that devices attach to an [`Srs`]'s host points, one per type, dropped before
/// the points (a GPU backend's page-lock registration of them, so that streamed chunks are
/// copied straight from them). A clone of the `Srs` starts with none: its points are other
/// memory.
#[derive(Default)]
pub struct HostPins(std::sync::Mutex<Vec<std::sync::Arc<dyn std::any::Any + Send + Sync>>>);

impl HostPins {
    /// The attached value of type `T`, attaching `make()` first when there is none (one
    /// caller makes it; the others wait for it).
    pub fn get_or_attach<T: std::any::Any + Send + Sync>(
        &self,
        make: impl FnOnce() -> T,
    ) -> std::sync::Arc<T> {
        let mut pins = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = pins.iter().find_map(|p| p.clone().downcast::<T>().ok()) {
            return t;
        }
        let t = std::sync::Arc::new(make());
        pins.push(t.clone());
        t
    }

    /// Drops every attached value (before the points they refer to change).
    pub fn clear(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Values attached.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether none is attached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Clone for HostPins {
    fn clone(&self) -> HostPins {
        HostPins::default()
    }
}

impl std::fmt::Debug for HostPins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostPins({})", self.len())
    }
}

/// What a released [`Srs`] keeps of its query points: their lengths and identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Released {
    /// Points of H, L, A and B (B in G1 and B in G2 have the same length).
    pub lens: QueryLens,
    /// [`Srs::fingerprint`] of the points that were there.
    pub fingerprint: [u8; 32],
}

/// The lengths of the query vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryLens {
    /// H: `domain − 1`.
    pub h: usize,
    /// L: one per aux variable.
    pub l: usize,
    /// A.
    pub a: usize,
    /// B in G1 and in G2.
    pub b: usize,
}

impl QueryLens {
    /// Host bytes the decoded points of these lengths take (96 per G1 point, 192 per G2).
    pub fn decoded_bytes(&self) -> u64 {
        96 * (self.h + self.l + self.a + self.b) as u64 + 192 * self.b as u64
    }
}

/// A parameters file that cannot be used, naming the file, the section and the offset.
#[derive(Debug, thiserror::Error)]
pub enum SrsError {
    /// The file could not be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        /// File path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file ends before a section does.
    #[error("{path}: truncated in section {section} at offset {offset}: need {expected} bytes, have {got}")]
    Truncated {
        /// File path.
        path: PathBuf,
        /// Section name ("vk", "ic", "h", "l", "a", "b_g1", "b_g2").
        section: &'static str,
        /// Byte offset where the section (or its length prefix) starts.
        offset: u64,
        /// Bytes the section needs.
        expected: u64,
        /// Bytes left in the file.
        got: u64,
    },
    /// A length prefix is impossible (too large for the file or inconsistent with others).
    #[error("{path}: bad length {len} for section {section} at offset {offset}: {reason}")]
    BadLength {
        /// File path.
        path: PathBuf,
        /// Section name.
        section: &'static str,
        /// Offset of the length prefix.
        offset: u64,
        /// The length read.
        len: u64,
        /// Why it is impossible.
        reason: String,
    },
    /// A point's encoding is invalid, off the curve or outside the subgroup.
    #[error("{path}: bad point {index} in section {section} at offset {offset}: {reason}")]
    BadPoint {
        /// File path.
        path: PathBuf,
        /// Section name.
        section: &'static str,
        /// Index of the point within the section.
        index: u64,
        /// Byte offset of the point.
        offset: u64,
        /// What is wrong.
        reason: &'static str,
    },
    /// Bytes remain after the last section.
    #[error("{path}: {extra} trailing bytes after offset {offset}")]
    TrailingBytes {
        /// File path.
        path: PathBuf,
        /// Offset where the trailing bytes start.
        offset: u64,
        /// How many.
        extra: u64,
    },
    /// The `.vk` file beside the parameters holds another verifying key than the
    /// parameters' own: one of the two files is not what it claims to be (a damaged or
    /// substituted file, or parameters of another circuit), and proofs made with these
    /// parameters would not verify against that key.
    #[error(
        "{params}: its verifying key differs from the one in {vk} beside it; \
         the two files do not belong together (fetch both again)"
    )]
    VkMismatch {
        /// The parameters file.
        params: PathBuf,
        /// The verifying key file beside it.
        vk: PathBuf,
    },
    /// The `.vk` file beside the parameters cannot be read as a verifying key.
    #[error("{vk} (beside {params}): not a verifying key: {reason}")]
    BadVk {
        /// The parameters file.
        params: PathBuf,
        /// The verifying key file beside it.
        vk: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

/// The largest `.vk` file read: a verifying key holds one G1 point per public input, and
/// the largest Filecoin circuit (WindowPoSt 32 GiB, 25,840 inputs) needs 2.5 MB.
const MAX_VK_FILE_BYTES: u64 = 64 << 20;

/// The verifying key in the `.vk` file beside `params` and that file's path, `None` when
/// there is no such file.
fn read_vk_beside(params: &Path) -> Result<Option<(VerifyingKey, PathBuf)>, SrsError> {
    let Some(vk_path) = Srs::vk_path_beside(params).filter(|p| p.is_file()) else {
        return Ok(None);
    };
    let bad = |reason: String| SrsError::BadVk {
        params: params.to_path_buf(),
        vk: vk_path.clone(),
        reason,
    };
    let io_err = |source| SrsError::Io {
        path: vk_path.clone(),
        source,
    };
    let len = std::fs::metadata(&vk_path).map_err(io_err)?.len();
    if len > MAX_VK_FILE_BYTES {
        return Err(bad(format!(
            "{len} bytes, more than any verifying key ({MAX_VK_FILE_BYTES})"
        )));
    }
    let bytes = std::fs::read(&vk_path).map_err(io_err)?;
    let mut cursor = std::io::Cursor::new(&bytes[..]);
    // bellperson's reader checks every point is on the curve and in the subgroup.
    let vk = VerifyingKey::read(&mut cursor).map_err(|e| bad(e.to_string()))?;
    let extra = bytes.len() as u64 - cursor.position();
    if extra != 0 {
        return Err(bad(format!("{extra} trailing bytes after the key")));
    }
    Ok(Some((vk, vk_path)))
}

/// Opens a `.params` file and walks its length prefixes ([`Layout::walk`]): what
/// [`Srs::load`] and [`Srs::check_file`] both start with.
pub(crate) fn open_walked(path: &Path) -> Result<(File, Layout), SrsError> {
    let io_err = |source| SrsError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io_err)?;
    let file_len = file.metadata().map_err(io_err)?.len();
    let layout = Layout::walk(&file, file_len, path)?;
    Ok((file, layout))
}

/// [`open_walked`], then the verifying key, checked against a `.vk` file beside the
/// parameters when there is one (before the large sections: a mismatch fails in
/// milliseconds, not after the read); the key returned is the `.vk` file's.
fn open_with_vk(path: &Path) -> Result<(File, Layout, VerifyingKey), SrsError> {
    let (file, layout) = open_walked(path)?;
    let reader = decode::SectionReader {
        file: &file,
        path,
        check_points: false,
    };
    let vk = reader.read_vk(&layout)?;
    let vk = match read_vk_beside(path)? {
        Some((file_vk, _)) if file_vk == vk => file_vk,
        Some((_, vk_path)) => {
            return Err(SrsError::VkMismatch {
                params: path.to_path_buf(),
                vk: vk_path,
            })
        }
        None => vk,
    };
    Ok((file, layout, vk))
}

/// The query lengths of a walked file.
fn lens_of(layout: &Layout) -> QueryLens {
    QueryLens {
        h: layout.h.len as usize,
        l: layout.l.len as usize,
        a: layout.a.len as usize,
        b: layout.b_g1.len as usize,
    }
}

impl Srs {
    /// Reads a bellperson `.params` file: walks the length prefixes first (so a bad length
    /// is reported before anything is allocated), then decodes every section in parallel.
    ///
    /// # Errors
    /// An [`SrsError`] naming the file, section and offset of the first problem:
    /// [`SrsError::Io`], [`SrsError::Truncated`], [`SrsError::BadLength`],
    /// [`SrsError::BadPoint`] (bad encoding, point at infinity, off the curve, or, for the
    /// verifying key and with [`SrsOptions::check_points`], outside the subgroup) or
    /// [`SrsError::TrailingBytes`]; [`SrsError::VkMismatch`] or [`SrsError::BadVk`] when a
    /// `.vk` file beside it (see [`Srs::vk_path_beside`]) holds another key or none.
    ///
    /// When that `.vk` file exists, the loaded [`Srs::vk`] is the one read from it (after
    /// checking it equals the parameters' own), so that every self-check of a proof made
    /// with these parameters is against the published key, not the one that came with
    /// the parameters.
    pub fn load(path: &Path, opts: SrsOptions) -> Result<Srs, SrsError> {
        let (file, layout, vk) = open_with_vk(path)?;
        let reader = decode::SectionReader {
            file: &file,
            path,
            check_points: opts.check_points,
        };
        let h = reader.read_g1(&layout.h)?;
        let l = reader.read_g1(&layout.l)?;
        let a = reader.read_g1(&layout.a)?;
        let b_g1 = reader.read_g1(&layout.b_g1)?;
        let b_g2 = reader.read_g2(&layout.b_g2)?;
        tracing::debug!(
            path = %path.display(),
            n_h = h.len(),
            n_l = l.len(),
            n_a = a.len(),
            n_b = b_g1.len(),
            "srs loaded"
        );
        Ok(Srs {
            host_pins: HostPins::default(),
            path: path.to_path_buf(),
            vk,
            h,
            l,
            a,
            b_g1,
            b_g2,
            released: None,
            file: None,
        })
    }

    /// Opens a `.params` file to stream its points from it instead of loading them: the
    /// verifying key is read and checked as [`Srs::load`] does (against a `.vk` file beside
    /// it too), the query points are not read. The result is a released SRS
    /// ([`Srs::released`]) whose [`Srs::file`] is the open file, with the fingerprint of
    /// the file's points. Check the points with [`SrsFile::check_points`] before proving
    /// with it.
    ///
    /// # Errors
    /// As [`Srs::load`], less the query points' [`SrsError::BadPoint`].
    pub fn open_streamed(path: &Path) -> Result<Srs, SrsError> {
        let (file, layout, vk) = open_with_vk(path)?;
        let lens = lens_of(&layout);
        let mut srs = Srs {
            host_pins: HostPins::default(),
            path: path.to_path_buf(),
            vk,
            h: Vec::new(),
            l: Vec::new(),
            a: Vec::new(),
            b_g1: Vec::new(),
            b_g2: Vec::new(),
            released: Some(Released {
                lens,
                fingerprint: [0; 32],
            }),
            file: None,
        };
        let f = SrsFile::new(file, path.to_path_buf(), layout);
        let fingerprint = f.fingerprint(&srs)?;
        srs.released = Some(Released { lens, fingerprint });
        srs.file = Some(std::sync::Arc::new(f));
        Ok(srs)
    }

    /// Checks a `.params` file's shape without reading its points: opens it and walks the
    /// length prefixes, so a truncated file, an impossible length or trailing bytes are
    /// found in a few reads (milliseconds, even for a 47 GB file). A file that passes can
    /// still hold a bad point; [`Srs::load`] finds those.
    ///
    /// # Errors
    /// [`SrsError::Io`], [`SrsError::Truncated`], [`SrsError::BadLength`] or
    /// [`SrsError::TrailingBytes`], as [`Srs::load`] reports them.
    pub fn check_file(path: &Path) -> Result<QueryLens, SrsError> {
        let (_, layout) = open_walked(path)?;
        Ok(lens_of(&layout))
    }

    /// The verifying key file that belongs beside the parameters file `params`: the same
    /// name with the extension `.vk` (`v28-….params` → `v28-….vk`, filecoin-proofs'
    /// naming). `None` when `params` has no `.params` extension.
    pub fn vk_path_beside(params: &Path) -> Option<PathBuf> {
        (params.extension()? == "params").then(|| params.with_extension("vk"))
    }

    /// Copies bellperson's in-memory parameters (for tests and tools that already hold a
    /// `Parameters`). The path is left empty.
    pub fn from_bellperson(params: &bellperson::groth16::Parameters<Bls12>) -> Srs {
        Srs {
            host_pins: HostPins::default(),
            path: PathBuf::new(),
            vk: params.vk.clone(),
            h: params.h.to_vec(),
            l: params.l.to_vec(),
            a: params.a.to_vec(),
            b_g1: params.b_g1.to_vec(),
            b_g2: params.b_g2.to_vec(),
            released: None,
            file: None,
        }
    }

    /// Writes the parameters in bellperson's `Parameters::write` layout to `path`,
    /// through a temporary file renamed into place (a crash never leaves a partial file
    /// under the final name).
    ///
    /// # Errors
    /// [`SrsError::Io`] when the file cannot be written.
    pub fn save(&self, path: &Path) -> Result<(), SrsError> {
        sections::save(self, path)
    }

    /// Writes the parameters in bellperson's `Parameters::write` layout.
    ///
    /// # Errors
    /// The writer's error.
    pub fn write_to<W: std::io::Write>(&self, w: W) -> std::io::Result<()> {
        write::write_to(self, w)
    }

    /// Number of public inputs, `ONE` included (the verifying key's IC length).
    pub fn n_inputs(&self) -> usize {
        self.vk.ic.len()
    }

    /// Number of aux (private) variables: the L query's length.
    pub fn n_aux(&self) -> usize {
        self.lens().l
    }

    /// log2 of the evaluation domain (`h.len() + 1` is a power of two, checked on load).
    pub fn lg_domain(&self) -> u32 {
        (self.lens().h + 1).next_power_of_two().trailing_zeros()
    }

    /// Host bytes held by the decoded points (0 once released).
    pub fn host_bytes(&self) -> usize {
        96 * (self.h.len() + self.l.len() + self.a.len() + self.b_g1.len()) + 192 * self.b_g2.len()
    }

    /// Host bytes the decoded points take when held, also for a released SRS (what a
    /// read-back would allocate).
    pub fn points_bytes(&self) -> u64 {
        self.lens().decoded_bytes()
    }

    /// The query lengths, also of a released SRS.
    pub fn lens(&self) -> QueryLens {
        match self.released {
            Some(r) => r.lens,
            None => QueryLens {
                h: self.h.len(),
                l: self.l.len(),
                a: self.a.len(),
                b: self.b_g1.len(),
            },
        }
    }

    /// Points of the B query in G2 (equal to B in G1 in any file; in memory they may differ).
    fn b_g2_len(&self) -> usize {
        match self.released {
            Some(r) => r.lens.b,
            None => self.b_g2.len(),
        }
    }

    /// Whether the query points were released from host memory.
    pub fn is_released(&self) -> bool {
        self.released.is_some()
    }

    /// A copy without the query points (verifying key, path, lengths and fingerprint
    /// kept), for when every device that proves with it holds the points itself: a
    /// 32 GiB PoRep SRS is 47.4 GB of host memory that a VRAM-resident daemon never reads.
    /// The copy keeps its file open ([`Srs::file`]) when the file still holds these
    /// points, so that a device may stream them from it.
    pub fn released(&self) -> Srs {
        // Parameters made in memory (no file, or a name that is not one) have none to keep.
        let file = match (&self.file, self.path.is_file()) {
            (Some(f), _) => Some(f.clone()),
            (None, false) => None,
            (None, true) => match SrsFile::open(self) {
                Ok(f) => Some(std::sync::Arc::new(f)),
                Err(e) => {
                    tracing::warn!(path = %self.path.display(), "srs file not kept open for streaming: {e}");
                    None
                }
            },
        };
        Srs {
            host_pins: HostPins::default(),
            path: self.path.clone(),
            vk: self.vk.clone(),
            h: Vec::new(),
            l: Vec::new(),
            a: Vec::new(),
            b_g1: Vec::new(),
            b_g2: Vec::new(),
            released: Some(Released {
                lens: self.lens(),
                fingerprint: self.fingerprint(),
            }),
            file,
        }
    }

    /// SHA-256 identity of the parameters: the verifying key's compressed points, the five
    /// query lengths and up to 17 points of each query (evenly spaced, and the last). A
    /// released SRS gives the fingerprint of the points it had. Devices key the copies they
    /// hold by it.
    pub fn fingerprint(&self) -> [u8; 32] {
        if let Some(r) = self.released {
            return r.fingerprint;
        }
        self.fingerprint_with(|q, i| match q {
            SrsQuery::H => self.h[i].to_uncompressed().to_vec(),
            SrsQuery::L => self.l[i].to_uncompressed().to_vec(),
            SrsQuery::A => self.a[i].to_uncompressed().to_vec(),
            SrsQuery::BG1 => self.b_g1[i].to_uncompressed().to_vec(),
            SrsQuery::BG2 => self.b_g2[i].to_uncompressed().to_vec(),
        })
    }

    /// [`Srs::fingerprint`] over the query lengths of [`Srs::lens`] with `point(q, i)`, the
    /// uncompressed encoding of point `i` of query `q` (the file's bytes of it).
    pub(crate) fn fingerprint_with(
        &self,
        mut point: impl FnMut(SrsQuery, usize) -> Vec<u8>,
    ) -> [u8; 32] {
        use sha2::{Digest, Sha256};
        /// Points sampled from each query (plus the last one).
        const SAMPLE_POINTS: usize = 16;
        let mut h = Sha256::new();
        let vk = &self.vk;
        h.update(vk.alpha_g1.to_compressed());
        h.update(vk.beta_g1.to_compressed());
        h.update(vk.beta_g2.to_compressed());
        h.update(vk.gamma_g2.to_compressed());
        h.update(vk.delta_g1.to_compressed());
        h.update(vk.delta_g2.to_compressed());
        for p in &vk.ic {
            h.update(p.to_compressed());
        }
        let lens = self.lens();
        for (q, len) in [
            (SrsQuery::H, lens.h),
            (SrsQuery::L, lens.l),
            (SrsQuery::A, lens.a),
            (SrsQuery::BG1, lens.b),
            (SrsQuery::BG2, self.b_g2_len()),
        ] {
            h.update((len as u64).to_le_bytes());
            if len == 0 {
                continue;
            }
            let step = len.div_ceil(SAMPLE_POINTS).max(1);
            for i in (0..len).step_by(step).chain([len - 1]) {
                h.update(point(q, i));
            }
        }
        h.finalize().into()
    }
}
