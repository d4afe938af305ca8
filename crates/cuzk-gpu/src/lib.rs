//! Everything CUDA: one `Device` handle per ordinal, NVRTC compilation of the kernels under
//! `kernels/` with an on-disk cache, the VRAM arena and pinned host pool, the field, curve,
//! NTT, MSM, classification and batch-addition kernels, and the GPU `Backend`.
//! Other crates never see a raw pointer: `unsafe` lives only here.
#![deny(missing_docs)]
