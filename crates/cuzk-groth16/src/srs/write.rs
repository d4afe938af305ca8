//! Writing an [`Srs`] in bellperson's `Parameters::write` layout: the verifying key, then
//! h, l, a, b_g1, b_g2, each behind a big-endian u32 count, points uncompressed. Points
//! are serialized in parallel chunks and written in order.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use blstrs::{G1Affine, G2Affine};
use rayon::prelude::*;

use super::{Srs, SrsError};

/// Points serialized per parallel batch before being written.
const POINTS_PER_BATCH: usize = 1 << 16;

pub(super) fn save(srs: &Srs, path: &Path) -> Result<(), SrsError> {
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
        let mut w = BufWriter::with_capacity(1 << 20, file);
        write_to(srs, &mut w)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        // Best effort: the temporary file is ours and useless after a failed write.
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(io_err)
}

pub(super) fn write_to<W: Write>(srs: &Srs, mut w: W) -> io::Result<()> {
    srs.vk.write(&mut w)?;
    write_g1s(&mut w, &srs.h)?;
    write_g1s(&mut w, &srs.l)?;
    write_g1s(&mut w, &srs.a)?;
    write_g1s(&mut w, &srs.b_g1)?;
    write_g2s(&mut w, &srs.b_g2)?;
    w.flush()
}

fn write_len<W: Write>(w: &mut W, len: usize) -> io::Result<()> {
    let len = u32::try_from(len).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{len} points do not fit a u32 count"),
        )
    })?;
    w.write_all(&len.to_be_bytes())
}

fn write_g1s<W: Write>(w: &mut W, points: &[G1Affine]) -> io::Result<()> {
    write_len(w, points.len())?;
    let mut buf = Vec::new();
    for batch in points.chunks(POINTS_PER_BATCH) {
        buf.resize(batch.len() * 96, 0);
        buf.par_chunks_mut(96)
            .zip(batch)
            .for_each(|(dst, p)| dst.copy_from_slice(&p.to_uncompressed()));
        w.write_all(&buf)?;
    }
    Ok(())
}

fn write_g2s<W: Write>(w: &mut W, points: &[G2Affine]) -> io::Result<()> {
    write_len(w, points.len())?;
    let mut buf = Vec::new();
    for batch in points.chunks(POINTS_PER_BATCH) {
        buf.resize(batch.len() * 192, 0);
        buf.par_chunks_mut(192)
            .zip(batch)
            .for_each(|(dst, p)| dst.copy_from_slice(&p.to_uncompressed()));
        w.write_all(&buf)?;
    }
    Ok(())
}
