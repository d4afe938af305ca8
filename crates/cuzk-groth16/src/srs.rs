//! The structured reference string: a bellperson `.params` file read through mmap into
//! resident, decoded affine points plus the verifying key. Owns [`Srs`] and [`SrsError`].
//! Layout and density rules: `../shared/filecoin-facts.md` §6.

use std::path::{Path, PathBuf};

use blstrs::{G1Affine, G2Affine};

use crate::VerifyingKey;

/// How much checking a load does beyond the always-on structural checks (lengths,
/// sections, file size).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SrsOptions {
    /// Check every point is on its curve and in the prime-order subgroup.
    pub check_points: bool,
}

/// Proving parameters resident in host memory. Query names follow the paper / bellperson.
#[derive(Clone, Debug)]
pub struct Srs {
    /// Where the parameters were read from.
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
}

/// A parameters file that cannot be used, naming the file, the section and the offset.
#[derive(Debug, thiserror::Error)]
pub enum SrsError {
    /// The file could not be opened or mapped.
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
}

impl Srs {
    /// Reads a bellperson `.params` file.
    ///
    /// # Errors
    /// An [`SrsError`] naming the file, section and offset of the first problem.
    pub fn load(path: &Path, opts: SrsOptions) -> Result<Srs, SrsError> {
        let _ = (path, opts);
        todo!("issue #2: mmap reader")
    }

    /// Host bytes held by the decoded points.
    pub fn host_bytes(&self) -> usize {
        96 * (self.h.len() + self.l.len() + self.a.len() + self.b_g1.len()) + 192 * self.b_g2.len()
    }
}
