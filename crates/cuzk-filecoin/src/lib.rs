//! Filecoin proof kinds for cuzk: parse requests, build each partition's circuit with the
//! storage-proofs crates, assemble and verify multi-partition proofs in filecoin-proofs'
//! byte format, name parameter files, and make test sectors and parameters.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
