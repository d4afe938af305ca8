//! cuzk-filecoin's integration tests as one binary (each module was its own, and every
//! binary links the whole Filecoin proving stack again).

mod aggregate;
mod common;
mod fake;
mod parse;
mod parts;
mod prove_2k;
mod vk_beside;
