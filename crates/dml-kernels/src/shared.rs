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

    /// Writes `values` to the elements from `start` on, without reading or referencing them (so
    /// the memory may be uninitialised).
    ///
    /// # Safety
    /// No other thread may touch those elements meanwhile; the buffer must outlive the call.
    pub(crate) unsafe fn write_run(&self, start: usize, values: impl ExactSizeIterator<Item = f32>) {
        assert!(
            start + values.len() <= self.len,
            "shared run {start}+{} of {}",
            values.len(),
            self.len
        );
        for (i, v) in values.enumerate() {
            // SAFETY: in bounds (checked above); exclusive by the caller's guarantee.
            unsafe { self.ptr.add(start + i).write(v) };
        }
    }
}

/// A new vector of `len` values written by `fill` through a shared handle (in parallel, without
/// zeroing the memory first), with whatever `fill` returns.
///
/// # Safety
/// `fill` must write every element `0..len` (through [`SharedOut::write_run`]) before it returns.
pub(crate) unsafe fn filled_vec<R>(len: usize, fill: impl FnOnce(SharedOut) -> R) -> (Vec<f32>, R) {
    let mut v: Vec<f32> = Vec::with_capacity(len);
    let out = fill(SharedOut {
        ptr: v.as_mut_ptr(),
        len,
    });
    // SAFETY: the capacity is `len` and the caller guarantees every element was written.
    unsafe { v.set_len(len) };
    (v, out)
}
