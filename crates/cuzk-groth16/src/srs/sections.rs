//! Writing a parameters file fast ([`Srs::save`], and the parameter generator while it
//! computes): the same bytes as [`Srs::write_to`] (bellperson's `Parameters::write` layout:
//! the verifying key, then h, l, a, b_g1, b_g2, each behind a big-endian u32 count, points
//! uncompressed), but every batch of points is serialized and written at its own offset by
//! positioned writes on all cores, so serialization and the kernel's copying into the page
//! cache overlap instead of alternating with one writer. It writes a temporary file beside
//! `path`, syncs it and renames it. The sections' offsets follow from the verifying key and
//! the counts alone, so the generator writes each section while it computes the next
//! ([`SectionFile`]).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use blstrs::{G1Affine, G2Affine};
use rayon::prelude::*;

use crate::{Srs, SrsError};

/// Points serialized and written per task (3 MiB of G1, 6 MiB of G2).
const POINTS_PER_TASK: usize = 1 << 15;

/// One section's points.
pub(crate) enum Points<'a> {
    G1(&'a [G1Affine]),
    G2(&'a [G2Affine]),
}

impl Points<'_> {
    fn len(&self) -> usize {
        match self {
            Points::G1(p) => p.len(),
            Points::G2(p) => p.len(),
        }
    }

    fn point_bytes(&self) -> usize {
        match self {
            Points::G1(_) => 96,
            Points::G2(_) => 192,
        }
    }

    /// Serializes points [start, start + count) into `buf`.
    fn serialize(&self, start: usize, count: usize, buf: &mut Vec<u8>) {
        buf.clear();
        match self {
            Points::G1(p) => {
                for q in &p[start..start + count] {
                    buf.extend_from_slice(&q.to_uncompressed());
                }
            }
            Points::G2(p) => {
                for q in &p[start..start + count] {
                    buf.extend_from_slice(&q.to_uncompressed());
                }
            }
        }
    }
}

/// The points of each section of `srs`, in file order (H, L, A, B in G1, B in G2).
fn section_counts(srs: &Srs) -> [usize; 5] {
    [
        srs.h.len(),
        srs.l.len(),
        srs.a.len(),
        srs.b_g1.len(),
        srs.b_g2.len(),
    ]
}

/// Writes `srs` to `path` in bellperson's layout with parallel positioned writes.
///
/// # Errors
/// [`SrsError::Io`] naming `path` when a write fails or a section has more than 2^32 − 1
/// points; the temporary file is removed then.
pub(super) fn save(srs: &Srs, path: &Path) -> Result<(), SrsError> {
    let file = SectionFile::create(path, &srs.vk, section_counts(srs))?;
    let written = (|| {
        file.write(Section::H, Points::G1(&srs.h))?;
        file.write(Section::L, Points::G1(&srs.l))?;
        file.write(Section::A, Points::G1(&srs.a))?;
        file.write(Section::BG1, Points::G1(&srs.b_g1))?;
        file.write(Section::BG2, Points::G2(&srs.b_g2))
    })();
    match written {
        Ok(()) => file.finish(),
        Err(e) => {
            file.discard();
            Err(e)
        }
    }
}

/// The point sections of a parameters file, in file order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Section {
    H = 0,
    L = 1,
    A = 2,
    BG1 = 3,
    BG2 = 4,
}

/// A parameters file being written section by section, in any order and from any thread,
/// once the verifying key and every section's count are known: the offsets follow from
/// them. A temporary file beside the destination until [`SectionFile::finish`] syncs and
/// renames it.
pub(crate) struct SectionFile {
    file: File,
    tmp: PathBuf,
    path: PathBuf,
    /// Where each section's points start.
    starts: [u64; 5],
    counts: [usize; 5],
}

impl SectionFile {
    /// Creates the temporary file at its full length with the verifying key and the
    /// sections' count prefixes written.
    ///
    /// # Errors
    /// [`SrsError::Io`] naming `path`; a section of more than 2^32 − 1 points is refused.
    pub fn create(
        path: &Path,
        vk: &crate::VerifyingKey,
        counts: [usize; 5],
    ) -> Result<SectionFile, SrsError> {
        let io_err = |source| SrsError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut tmp_name = path
            .file_name()
            .map(|n| n.to_os_string())
            .unwrap_or_default();
        tmp_name.push(format!(".tmp-{}", std::process::id()));
        let tmp = path.with_file_name(tmp_name);
        let mut head = Vec::new();
        vk.write(&mut head).map_err(io_err)?;
        let mut offset = head.len() as u64;
        let mut starts = [0u64; 5];
        let mut prefixes = Vec::with_capacity(5);
        for (s, &count) in counts.iter().enumerate() {
            let len = u32::try_from(count).map_err(|_| {
                io_err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{count} points do not fit a u32 count"),
                ))
            })?;
            prefixes.push((offset, len.to_be_bytes()));
            starts[s] = offset + 4;
            let point_bytes = if s == Section::BG2 as usize { 192 } else { 96 };
            offset = starts[s] + (count * point_bytes) as u64;
        }
        let file = File::create(&tmp).map_err(io_err)?;
        let f = SectionFile {
            file,
            tmp,
            path: path.to_path_buf(),
            starts,
            counts,
        };
        let made = (|| {
            f.file.set_len(offset)?;
            f.file.write_all_at(&head, 0)?;
            for (at, bytes) in prefixes {
                f.file.write_all_at(&bytes, at)?;
            }
            Ok(())
        })();
        match made {
            Ok(()) => Ok(f),
            Err(e) => Err(f.abandon(e)),
        }
    }

    /// Writes one section's points at their offset, in tasks on all cores.
    ///
    /// # Errors
    /// [`SrsError::Io`] naming the destination; points of another count or group than
    /// the section's are refused.
    pub fn write(&self, section: Section, points: Points<'_>) -> Result<(), SrsError> {
        let s = section as usize;
        let group_ok = matches!(
            (section, &points),
            (Section::BG2, Points::G2(_))
                | (
                    Section::H | Section::L | Section::A | Section::BG1,
                    Points::G1(_)
                )
        );
        if !group_ok || points.len() != self.counts[s] {
            return Err(self.io_err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{section:?}: {} points given for a section of {}",
                    points.len(),
                    self.counts[s]
                ),
            )));
        }
        let start = self.starts[s];
        let point_bytes = points.point_bytes() as u64;
        (0..points.len())
            .step_by(POINTS_PER_TASK)
            .collect::<Vec<_>>()
            .into_par_iter()
            .try_for_each_init(Vec::new, |buf, first| {
                let count = POINTS_PER_TASK.min(points.len() - first);
                points.serialize(first, count, buf);
                self.file
                    .write_all_at(buf, start + first as u64 * point_bytes)
            })
            .map_err(|e| self.io_err(e))
    }

    /// Syncs the file and moves it to its destination.
    ///
    /// # Errors
    /// [`SrsError::Io`] naming the destination; the temporary file is removed then.
    pub fn finish(self) -> Result<(), SrsError> {
        match self
            .file
            .sync_all()
            .and_then(|()| std::fs::rename(&self.tmp, &self.path))
        {
            Ok(()) => Ok(()),
            Err(e) => Err(self.abandon(e)),
        }
    }

    /// Removes the temporary file after the I/O error `e` (best effort: it is ours and
    /// useless) and returns `e` naming the destination.
    pub fn abandon(self, e: io::Error) -> SrsError {
        let err = self.io_err(e);
        self.discard();
        err
    }

    /// Removes the temporary file (best effort) after a failure elsewhere.
    pub fn discard(self) {
        let _ = std::fs::remove_file(&self.tmp);
    }

    fn io_err(&self, source: io::Error) -> SrsError {
        SrsError::Io {
            path: self.path.clone(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paramgen::{generate, CpuFixedBase};
    use crate::synthetic::{SyntheticCircuit, SyntheticShape};
    use rand_chacha::rand_core::SeedableRng;

    /// The parameters of the synthetic circuit of 2^`lg` rows and structure `seed`.
    fn srs_of(lg: u32, seed: u64) -> Srs {
        let c = SyntheticCircuit::with_log_n(lg, seed, SyntheticShape::default()).expect("circuit");
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed + 2);
        generate(c, &mut rng, &CpuFixedBase::default())
            .expect("generates")
            .srs
    }

    /// A fresh folder under the system's temp dir, named for the test and this process.
    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("cuzk-paramgen-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    /// The parallel writer's file is byte for byte the sequential writer's, with sections
    /// longer than one task.
    #[test]
    fn same_bytes_as_the_sequential_writer() {
        let srs = srs_of(16, 2);
        assert!(srs.h.len() > POINTS_PER_TASK && srs.l.len() > POINTS_PER_TASK);
        let mut want = Vec::new();
        srs.write_to(&mut want).expect("writes");
        let dir = temp_dir("save");
        let path = dir.join("p.params");
        save(&srs, &path).expect("saves");
        let got = std::fs::read(&path).expect("reads");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(got.len(), want.len());
        assert!(got == want, "bytes differ");
    }

    /// Generating into a file writes each query while the next is computed: the file is
    /// the sequential writer's bytes, "save" is the last stage, and a file that cannot be
    /// created is an error that leaves nothing behind.
    #[test]
    fn generating_into_a_file_writes_the_same_bytes() {
        use crate::paramgen::{generate_in_domain, ParamgenError, ToxicWaste};
        let c = SyntheticCircuit::with_log_n(16, 3, SyntheticShape::default()).expect("circuit");
        let toxic = ToxicWaste::random(&mut rand_chacha::ChaCha20Rng::seed_from_u64(6));
        let fb = CpuFixedBase::default();
        let dir = temp_dir("into");
        let path = dir.join("p.params");
        let g = generate_in_domain(c, &toxic, &fb, None, Some(&path)).expect("generates");
        assert!(g.srs.h.len() > POINTS_PER_TASK && g.srs.l.len() > POINTS_PER_TASK);
        let mut want = Vec::new();
        g.srs.write_to(&mut want).expect("writes");
        let got = std::fs::read(&path).expect("reads");
        assert!(got == want, "bytes differ");
        assert_eq!(g.stages.last().map(|(n, _)| *n), Some("save"));
        let missing = dir.join("no-such-dir").join("p.params");
        match generate_in_domain(c, &toxic, &fb, None, Some(&missing)) {
            Err(ParamgenError::Write(SrsError::Io { path, .. })) => assert_eq!(path, missing),
            other => panic!("expected a write error, got {other:?}"),
        }
        let left: Vec<_> = std::fs::read_dir(&dir).expect("lists").collect();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(left.len(), 1, "only p.params: {left:?}");
    }

    /// A section is written only with its own count and group.
    #[test]
    fn a_section_of_another_size_is_refused() {
        let srs = srs_of(8, 2);
        let dir = temp_dir("sec");
        let file = SectionFile::create(&dir.join("p.params"), &srs.vk, section_counts(&srs))
            .expect("creates");
        let short = &srs.h[1..];
        assert!(file.write(Section::H, Points::G1(short)).is_err());
        assert!(file.write(Section::BG2, Points::G1(&srs.b_g1)).is_err());
        assert!(file.write(Section::H, Points::G1(&srs.h)).is_ok());
        file.discard();
        let left = std::fs::read_dir(&dir).expect("lists").count();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(left, 0, "the temporary file is removed");
    }
}
