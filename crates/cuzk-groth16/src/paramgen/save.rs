//! Writing fresh parameters fast: the same bytes as [`Srs::save`] (bellperson's
//! `Parameters::write` layout: the verifying key, then h, l, a, b_g1, b_g2, each behind a
//! big-endian u32 count, points uncompressed), but every batch of points is serialized and
//! written at its own offset by positioned writes on all cores, so serialization and the
//! kernel's copying into the page cache overlap instead of alternating with one writer.
//! Like [`Srs::save`] it writes a temporary file beside `path`, syncs it and renames it.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use blstrs::{G1Affine, G2Affine};
use rayon::prelude::*;

use crate::{Srs, SrsError};

/// Points serialized and written per task (3 MiB of G1, 6 MiB of G2).
const POINTS_PER_TASK: usize = 1 << 15;

/// One section's points.
enum Points<'a> {
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

/// Writes `srs` to `path` in bellperson's layout with parallel positioned writes.
///
/// # Errors
/// [`SrsError::Io`] naming `path` when a write fails or a section has more than 2^32 − 1
/// points; the temporary file is removed then.
pub fn save(srs: &Srs, path: &Path) -> Result<(), SrsError> {
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
    let result = (|| {
        let file = File::create(&tmp)?;
        write_at(srs, &file)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        // Best effort: the temporary file is ours and useless after a failed write.
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(io_err)
}

/// Writes the whole layout into `file` from offset 0.
fn write_at(srs: &Srs, file: &File) -> io::Result<()> {
    let mut vk = Vec::new();
    srs.vk.write(&mut vk)?;
    let sections = [
        Points::G1(&srs.h),
        Points::G1(&srs.l),
        Points::G1(&srs.a),
        Points::G1(&srs.b_g1),
        Points::G2(&srs.b_g2),
    ];
    // (section, first point, points, file offset) for every task; the count prefixes go
    // with the verifying key in the head writes below.
    let mut tasks = Vec::new();
    let mut heads: Vec<(u64, [u8; 4])> = Vec::new();
    let mut offset = vk.len() as u64;
    for (s, points) in sections.iter().enumerate() {
        let len = u32::try_from(points.len()).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} points do not fit a u32 count", points.len()),
            )
        })?;
        heads.push((offset, len.to_be_bytes()));
        offset += 4;
        for start in (0..points.len()).step_by(POINTS_PER_TASK) {
            let count = POINTS_PER_TASK.min(points.len() - start);
            tasks.push((s, start, count, offset));
            offset += (count * points.point_bytes()) as u64;
        }
    }
    file.set_len(offset)?;
    file.write_all_at(&vk, 0)?;
    for (at, bytes) in heads {
        file.write_all_at(&bytes, at)?;
    }
    tasks
        .into_par_iter()
        .try_for_each_init(Vec::new, |buf, (s, start, count, at)| {
            sections[s].serialize(start, count, buf);
            file.write_all_at(buf, at)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paramgen::{generate, CpuFixedBase};
    use crate::synthetic::{SyntheticCircuit, SyntheticShape};
    use rand_chacha::rand_core::SeedableRng;

    /// The parallel writer's file is byte for byte the sequential writer's, with sections
    /// longer than one task.
    #[test]
    fn same_bytes_as_the_sequential_writer() {
        let c = SyntheticCircuit::with_log_n(16, 2, SyntheticShape::default()).expect("circuit");
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(4);
        let srs = generate(c, &mut rng, &CpuFixedBase::default())
            .expect("generates")
            .srs;
        assert!(srs.h.len() > POINTS_PER_TASK && srs.l.len() > POINTS_PER_TASK);
        let mut want = Vec::new();
        srs.write_to(&mut want).expect("writes");
        let dir = std::env::temp_dir().join(format!("cuzk-paramgen-save-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("p.params");
        save(&srs, &path).expect("saves");
        let got = std::fs::read(&path).expect("reads");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(got.len(), want.len());
        assert!(got == want, "bytes differ");
    }
}
