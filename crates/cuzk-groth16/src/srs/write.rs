//! Writing an [`Srs`] to any writer in bellperson's `Parameters::write` layout: the
//! verifying key, then h, l, a, b_g1, b_g2, each behind a big-endian u32 count, points
//! uncompressed. Points are serialized in parallel chunks and written in order. Files are
//! written by `sections.rs` (positioned writes, the same bytes).

use std::io::{self, Write};

use blstrs::{G1Affine, G2Affine};
use rayon::prelude::*;

use super::Srs;

/// Points serialized per parallel batch before being written.
const POINTS_PER_BATCH: usize = 1 << 16;

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
