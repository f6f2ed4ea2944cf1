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

/// A work buffer that lives from a forward pass to its backward pass (the convolution output a
/// batch norm normalised, the unfolded input of a convolution), taken from and returned to a
/// process-wide pool: a training step frees and needs the same buffers every step, and a fresh
/// zeroed allocation costs a full extra pass over each of them.
pub struct Buffer {
    values: Vec<f32>,
    len: usize,
}

/// The pool behind [`Buffer`]: at most [`POOL_BYTES`] of idle buffers.
static POOL: std::sync::Mutex<Vec<Vec<f32>>> = std::sync::Mutex::new(Vec::new());

/// The most idle memory the pool keeps (ResNet-18 at 112², batch 32, keeps about half of it).
const POOL_BYTES: usize = 1 << 30;

impl Buffer {
    /// A buffer of `len` values with arbitrary (initialised) contents: the smallest pooled one
    /// that is long enough, else a new one.
    pub(crate) fn take(len: usize) -> Self {
        let reused = {
            let mut pool = POOL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let best = (0..pool.len())
                .filter(|&i| pool[i].len() >= len)
                .min_by_key(|&i| pool[i].len());
            best.map(|i| pool.swap_remove(i))
        };
        Self {
            values: reused.unwrap_or_else(|| vec![0.0; len]),
            len,
        }
    }
}

impl std::ops::Deref for Buffer {
    type Target = [f32];

    fn deref(&self) -> &[f32] {
        &self.values[..self.len]
    }
}

impl std::ops::DerefMut for Buffer {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.values[..self.len]
    }
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buffer({} values)", self.len)
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        let values = std::mem::take(&mut self.values);
        let mut pool = POOL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let held: usize = pool.iter().map(|v| v.len() * 4).sum();
        if held + values.len() * 4 <= POOL_BYTES {
            pool.push(values);
        }
    }
}

/// Deterministic test values `((i·7919 + seed·104729) mod 1000 − offset) / scale`: a spread of
/// magnitudes and signs that reproduces exactly, shared by the kernels' tests.
#[cfg(test)]
pub(crate) fn test_values(n: usize, seed: usize, offset: f32, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7919 + seed * 104_729) % 1000) as f32 - offset) / scale)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::Buffer;

    #[test]
    fn buffers_are_reused_and_sized_as_asked() {
        let mut a = Buffer::take(1000);
        assert_eq!(a.len(), 1000);
        a[999] = 7.0;
        let ptr = a.as_ptr();
        drop(a);
        // The pooled buffer is long enough for a shorter request and comes back (other tests may
        // take it first when they run in parallel, so only the length is asserted strictly).
        let b = Buffer::take(10);
        assert_eq!(b.len(), 10);
        if b.as_ptr() == ptr {
            assert_eq!(b.values[999], 7.0, "contents are kept, not cleared");
        }
    }
}
