//! The host side of a GPU prove without a device, behind `cuzk bench gpu staging`: listing
//! one assignment's staging pieces (the prepare stage's share: each compacted piece's set
//! bits counted) and filling a staging of the slot layout from them in upload batches,
//! each timed. The staging is plain memory here, not pinned; the upload is left out.

use std::time::{Duration, Instant};

use cuzk_groth16::Assignment;

use crate::backend::prepare::{fill_batched, shape_of_assignment, staging_pieces, UPLOAD_BATCH};
use crate::error::{GpuError, Result};

/// One staging of an assignment, timed.
#[derive(Clone, Copy, Debug)]
pub struct StagingTimes {
    /// Listing the pieces (the prepare stage's share), after a deferred assignment's
    /// witness is made ready for its rows (`R1cs::row_witness`: a pass classifying its
    /// values, which the backend does in its call setup).
    pub pieces: Duration,
    /// Filling the staging from them, batch by batch, on the rayon pool.
    pub fill: Duration,
    /// Bytes of the staging.
    pub bytes: usize,
}

/// Stages `asg` into `buf` (grown to the slot layout's size; reused across calls, so that
/// only the first call pays for fresh pages) and times the two steps.
///
/// # Errors
/// The fill's errors (a layout the pieces do not fit: a bug).
pub fn time_staging(asg: &Assignment, buf: &mut Vec<u8>) -> Result<StagingTimes> {
    let shape = shape_of_assignment(asg);
    let bytes = shape.bytes();
    buf.resize(bytes, 0);
    let t = Instant::now();
    let rows = match asg.deferred() {
        Some(r1cs) => Some(
            r1cs.row_witness(&asg.input_assignment, &asg.aux_assignment)
                .map_err(|e| GpuError::Input(e.to_string()))?,
        ),
        None => None,
    };
    let pieces = staging_pieces(&shape, asg, rows.as_ref());
    let pieces_time = t.elapsed();
    let t = Instant::now();
    fill_batched(buf, 0..bytes, &pieces, UPLOAD_BATCH, |_, _| Ok(()))?;
    Ok(StagingTimes {
        pieces: pieces_time,
        fill: t.elapsed(),
        bytes,
    })
}
