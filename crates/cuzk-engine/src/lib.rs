//! The service core of cuzk, with no wire protocol: job tracker, scheduler, partition
//! pipeline (synthesis pool, GPU/CPU workers), SRS manager, memory budget, metrics and the
//! per-partition timeline.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
