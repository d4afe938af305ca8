//! The section walk of a `.params` file: reads only the length prefixes, checks each
//! against the bytes left and against the other sections, and records where every
//! section's points start. Nothing is allocated from a length before it is known to fit
//! the file. Decoding the points is `decode.rs`'s job.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::SrsError;

/// Bytes of an uncompressed G1 point.
pub const G1_BYTES: u64 = 96;
/// Bytes of an uncompressed G2 point.
pub const G2_BYTES: u64 = 192;
/// The verifying key's fixed part: alpha_g1, beta_g1, beta_g2, gamma_g2, delta_g1, delta_g2.
pub const VK_FIXED_BYTES: u64 = 3 * G1_BYTES + 3 * G2_BYTES;

/// Which group a section's points are in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SectionKind {
    /// Uncompressed G1 points, 96 bytes each.
    G1,
    /// Uncompressed G2 points, 192 bytes each.
    G2,
}

impl SectionKind {
    /// Bytes per point.
    pub fn point_bytes(self) -> u64 {
        match self {
            SectionKind::G1 => G1_BYTES,
            SectionKind::G2 => G2_BYTES,
        }
    }
}

/// One length-prefixed run of points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Section {
    /// Name used in errors ("ic", "h", "l", "a", "b_g1", "b_g2").
    pub name: &'static str,
    /// Point group.
    pub kind: SectionKind,
    /// Offset of the u32 length prefix.
    pub prefix_offset: u64,
    /// Offset of the first point.
    pub data_offset: u64,
    /// Number of points.
    pub len: u64,
}

/// Where every section of a well-formed `.params` file lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The verifying key's IC points.
    pub ic: Section,
    /// H query.
    pub h: Section,
    /// L query.
    pub l: Section,
    /// A query.
    pub a: Section,
    /// B query in G1.
    pub b_g1: Section,
    /// B query in G2.
    pub b_g2: Section,
    /// Total file size.
    pub file_len: u64,
}

impl Layout {
    /// Walks the length prefixes of `file` (`file_len` bytes, named `path` in errors).
    ///
    /// # Errors
    /// [`SrsError::Truncated`] when the file ends inside the fixed verifying key, a length
    /// prefix, or a section whose length is plausible; [`SrsError::BadLength`] when a length
    /// contradicts the file size or another section; [`SrsError::TrailingBytes`] when bytes
    /// follow the last section; [`SrsError::Io`] on a read error.
    pub fn walk(file: &File, file_len: u64, path: &Path) -> Result<Layout, SrsError> {
        let mut w = Walker {
            file,
            file_len,
            path,
            pos: VK_FIXED_BYTES,
        };
        if file_len < VK_FIXED_BYTES {
            return Err(w.truncated("vk", 0, VK_FIXED_BYTES, file_len));
        }
        let ic = w.section("ic", SectionKind::G1, |len| {
            (len == 0).then(|| "the verifying key needs at least the ONE input".to_string())
        })?;
        let h = w.section("h", SectionKind::G1, |len| {
            (!(len + 1).is_power_of_two())
                .then(|| "the H query holds domain − 1 points for a power-of-two domain".into())
        })?;
        let l = w.section("l", SectionKind::G1, |_| None)?;
        let n_vars = ic.len + l.len;
        let a = w.section("a", SectionKind::G1, |len| {
            if len < ic.len {
                Some(format!(
                    "the A query holds every input, and there are {} inputs",
                    ic.len
                ))
            } else if len > n_vars {
                Some(format!("more than the {n_vars} inputs and aux variables"))
            } else {
                None
            }
        })?;
        let b_g1 = w.section("b_g1", SectionKind::G1, |len| {
            (len > n_vars).then(|| format!("more than the {n_vars} inputs and aux variables"))
        })?;
        let b_g2 = w.section("b_g2", SectionKind::G2, |len| {
            (len != b_g1.len).then(|| format!("b_g1 holds {} points and b_g2 must match", b_g1.len))
        })?;
        if w.pos < file_len {
            return Err(SrsError::TrailingBytes {
                path: path.to_path_buf(),
                offset: w.pos,
                extra: file_len - w.pos,
            });
        }
        Ok(Layout {
            ic,
            h,
            l,
            a,
            b_g1,
            b_g2,
            file_len,
        })
    }
}

struct Walker<'a> {
    file: &'a File,
    file_len: u64,
    path: &'a Path,
    pos: u64,
}

impl Walker<'_> {
    /// Reads the prefix at `pos`, checks it with `implausible` (which returns why a length
    /// is impossible), then checks that the points fit in the file.
    fn section(
        &mut self,
        name: &'static str,
        kind: SectionKind,
        implausible: impl FnOnce(u64) -> Option<String>,
    ) -> Result<Section, SrsError> {
        let prefix_offset = self.pos;
        let left = self.file_len - prefix_offset;
        if left < 4 {
            return Err(self.truncated(name, prefix_offset, 4, left));
        }
        let mut raw = [0u8; 4];
        self.file
            .read_exact_at(&mut raw, prefix_offset)
            .map_err(|source| SrsError::Io {
                path: self.path.to_path_buf(),
                source,
            })?;
        let len = u64::from(u32::from_be_bytes(raw));
        let data_offset = prefix_offset + 4;
        let need = len * kind.point_bytes();
        let have = self.file_len - data_offset;
        if let Some(reason) = implausible(len) {
            return Err(self.bad_length(name, prefix_offset, len, reason));
        }
        if need > have {
            return Err(self.truncated(name, data_offset, need, have));
        }
        self.pos = data_offset + need;
        Ok(Section {
            name,
            kind,
            prefix_offset,
            data_offset,
            len,
        })
    }

    fn truncated(&self, section: &'static str, offset: u64, expected: u64, got: u64) -> SrsError {
        SrsError::Truncated {
            path: self.path.to_path_buf(),
            section,
            offset,
            expected,
            got,
        }
    }

    fn bad_length(&self, section: &'static str, offset: u64, len: u64, reason: String) -> SrsError {
        SrsError::BadLength {
            path: self.path.to_path_buf(),
            section,
            offset,
            len,
            reason,
        }
    }
}
