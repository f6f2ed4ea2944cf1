//! A mutable buffer shared by parallel tasks that write disjoint parts of it.

/// The start of an `f32` buffer, shared by tasks that write disjoint ranges of it.
#[derive(Clone, Copy)]
pub(crate) struct SharedOut {
    ptr: *mut f32,
    len: usize,
}

// SAFETY: the pointer is only dereferenced through `slice` and `at`, whose callers guarantee
// that no two threads touch the same elements.
unsafe impl Send for SharedOut {}
unsafe impl Sync for SharedOut {}

impl SharedOut {
    /// Shares `buffer` for the lifetime of the parallel section that uses the handle.
    pub(crate) fn new(buffer: &mut [f32]) -> Self {
        Self {
            ptr: buffer.as_mut_ptr(),
            len: buffer.len(),
        }
    }

    /// The raw pointer `offset` values in.
    ///
    /// # Safety
    /// `offset` must lie within the buffer, which must outlive every use of the pointer.
    pub(crate) unsafe fn at(self, offset: usize) -> *mut f32 {
        debug_assert!(offset <= self.len);
        // SAFETY: guaranteed by the caller.
        unsafe { self.ptr.add(offset) }
    }

    /// The elements `start..start + len`.
    ///
    /// # Safety
    /// No other live reference may overlap them, and the buffer must outlive the slice.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn slice(&self, start: usize, len: usize) -> &mut [f32] {
        assert!(
            start + len <= self.len,
            "shared slice {start}..{} of {}",
            start + len,
            self.len
        );
        // SAFETY: in bounds (checked above); exclusive by the caller's guarantee.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) }
    }
}
