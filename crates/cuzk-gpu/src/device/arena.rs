//! [`VramArena`]: one device allocation per device, made at start-up with an explicit,
//! logged size and sub-allocated by offset, so that nothing on the hot path allocates or
//! frees device memory. [`Scratch`] is a resettable bump range inside it that one
//! operation owns while it runs (`&mut`), so its regions cannot outlive a reset.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::device::Device;
use crate::error::{drv, GpuError, Result};

/// Sub-allocations are aligned to this many bytes (enough for 16-byte vector loads and
/// full 128-byte lines).
pub const ALIGN: usize = 256;

/// A range of device memory borrowed from an arena.
#[derive(Clone, Copy, Debug)]
pub struct DevRegion<'a> {
    ptr: u64,
    bytes: usize,
    _arena: PhantomData<&'a ()>,
}

impl<'a> DevRegion<'a> {
    /// Device address.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }
    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
    /// The empty region at address 0, for launches that must touch no memory.
    pub(crate) fn null() -> DevRegion<'static> {
        DevRegion {
            ptr: 0,
            bytes: 0,
            _arena: PhantomData,
        }
    }
    /// The sub-range [offset, offset + bytes).
    ///
    /// # Errors
    /// [`GpuError::Input`] when the sub-range does not fit.
    pub fn slice(&self, offset: usize, bytes: usize) -> Result<DevRegion<'a>> {
        if offset.checked_add(bytes).is_none_or(|e| e > self.bytes) {
            return Err(GpuError::Input(format!(
                "slice {offset}+{bytes} of a {}-byte region",
                self.bytes
            )));
        }
        Ok(DevRegion {
            ptr: self.ptr + offset as u64,
            bytes,
            _arena: PhantomData,
        })
    }
}

/// One device allocation, bump-allocated.
pub struct VramArena {
    dev: Arc<Device>,
    base: u64,
    size: usize,
    used: Cell<usize>,
}

impl VramArena {
    /// Allocates `size` bytes on `dev` (the only allocation this arena makes).
    ///
    /// # Errors
    /// A driver error (e.g. out of memory) naming the size.
    pub fn new(dev: Arc<Device>, size: usize) -> Result<VramArena> {
        let ordinal = dev.ordinal();
        drv(
            ordinal,
            || "bind context".into(),
            dev.context().bind_to_thread(),
        )?;
        // SAFETY: plain cuMemAlloc; the memory is only reached through DevRegions of this
        // arena and freed once in Drop.
        let base = drv(
            ordinal,
            || format!("allocate vram arena of {size} bytes"),
            unsafe { cudarc::driver::result::malloc_sync(size.max(ALIGN)) },
        )?;
        tracing::info!(gpu = ordinal, bytes = size, "vram arena allocated");
        Ok(VramArena {
            dev,
            base,
            size,
            used: Cell::new(0),
        })
    }

    /// The device this arena lives on.
    pub fn device(&self) -> &Arc<Device> {
        &self.dev
    }
    /// Total size.
    pub fn size(&self) -> usize {
        self.size
    }
    /// Bytes handed out so far.
    pub fn used(&self) -> usize {
        self.used.get()
    }

    /// A region of `bytes` bytes that lives as long as this borrow of the arena.
    ///
    /// # Errors
    /// [`GpuError::ArenaFull`].
    pub fn alloc(&self, bytes: usize) -> Result<DevRegion<'_>> {
        let start = self.used.get().next_multiple_of(ALIGN);
        let end =
            start
                .checked_add(bytes)
                .filter(|&e| e <= self.size)
                .ok_or(GpuError::ArenaFull {
                    asked: bytes,
                    free: self.size.saturating_sub(start),
                    size: self.size,
                })?;
        self.used.set(end);
        Ok(DevRegion {
            ptr: self.base + start as u64,
            bytes,
            _arena: PhantomData,
        })
    }

    /// The region [offset, offset + bytes) of the arena, independent of the bump pointer:
    /// for buffers whose layout is computed once and re-derived on every use.
    ///
    /// # Errors
    /// [`GpuError::Input`] when the range does not fit.
    pub fn region(&self, offset: usize, bytes: usize) -> Result<DevRegion<'_>> {
        if offset.checked_add(bytes).is_none_or(|e| e > self.size) {
            return Err(GpuError::Input(format!(
                "region {offset}+{bytes} of a {}-byte arena",
                self.size
            )));
        }
        Ok(DevRegion {
            ptr: self.base + offset as u64,
            bytes,
            _arena: PhantomData,
        })
    }

    /// A resettable scratch range of `bytes` bytes.
    ///
    /// # Errors
    /// [`GpuError::ArenaFull`].
    pub fn scratch(&self, bytes: usize) -> Result<Scratch<'_>> {
        let region = self.alloc(bytes)?;
        Ok(Scratch {
            region,
            used: Cell::new(0),
        })
    }

    /// Frees every region at once; `&mut` proves none is still borrowed.
    pub fn reset(&mut self) {
        self.used.set(0);
    }
}

impl Drop for VramArena {
    fn drop(&mut self) {
        let _ = self.dev.context().bind_to_thread();
        // SAFETY: base came from malloc_sync in new() and is freed exactly once; no
        // DevRegion can outlive the arena (they borrow it).
        match unsafe { cudarc::driver::result::free_sync(self.base) } {
            Ok(()) => {}
            // At process exit the driver may be torn down before the last worker thread
            // drops its slots; the driver has released the memory with the context.
            Err(e) if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_DEINITIALIZED => {
                tracing::debug!(
                    gpu = self.dev.ordinal(),
                    "vram arena dropped after driver shutdown"
                );
            }
            Err(e) => {
                tracing::warn!(gpu = self.dev.ordinal(), cause = %e, "vram arena free failed");
            }
        }
    }
}

/// A bump range inside an arena that an operation resets and reuses.
pub struct Scratch<'a> {
    region: DevRegion<'a>,
    used: Cell<usize>,
}

impl Scratch<'static> {
    /// The bytes `carve` takes from a scratch, wherever in it the carving starts: what it
    /// carves from [`Scratch::sizing`], plus one alignment.
    pub fn measure(carve: impl FnOnce(&Scratch<'static>) -> Result<()>) -> usize {
        let s = Scratch::sizing();
        // A sizing scratch never runs out (a quarter of the address space).
        let _ = carve(&s);
        s.used() + ALIGN
    }

    /// A scratch over no memory that only counts: carving an operation's regions from it
    /// gives the bytes that operation needs ([`Scratch::used`]), with the alignment its
    /// real carving pays. Its regions are not device memory: they size, never launch.
    pub fn sizing() -> Scratch<'static> {
        Scratch {
            region: DevRegion {
                ptr: 0,
                bytes: usize::MAX >> 2,
                _arena: PhantomData,
            },
            used: Cell::new(0),
        }
    }
}

impl<'a> Scratch<'a> {
    /// Bytes handed out so far (up to the end of the last region).
    pub fn used(&self) -> usize {
        self.used.get()
    }
    /// A scratch range over an existing region (e.g. one carved from another scratch).
    pub fn within(region: &DevRegion<'a>) -> Scratch<'a> {
        Scratch {
            region: *region,
            used: Cell::new(0),
        }
    }
    /// Forgets every region handed out; `&mut` proves none is still borrowed.
    pub fn reset(&mut self) {
        self.used.set(0);
    }
    /// Size of the scratch range.
    pub fn size(&self) -> usize {
        self.region.bytes()
    }
    /// Bytes still free (before alignment of the next region).
    pub fn free(&self) -> usize {
        self.region.bytes().saturating_sub(self.used.get())
    }
    /// A region of `bytes` bytes, valid until the next reset.
    ///
    /// # Errors
    /// [`GpuError::ArenaFull`].
    pub fn alloc(&self, bytes: usize) -> Result<DevRegion<'_>> {
        let start = self.used.get().next_multiple_of(ALIGN);
        let size = self.region.bytes();
        let end = start
            .checked_add(bytes)
            .filter(|&e| e <= size)
            .ok_or(GpuError::ArenaFull {
                asked: bytes,
                free: size.saturating_sub(start),
                size,
            })?;
        self.used.set(end);
        Ok(DevRegion {
            ptr: self.region.ptr() + start as u64,
            bytes,
            _arena: PhantomData,
        })
    }
}
