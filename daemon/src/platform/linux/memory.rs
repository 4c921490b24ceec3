//! Giving freed heap memory back to the kernel.

/// Returns the free pages of every malloc arena to the kernel. glibc keeps freed memory for
/// reuse and only gives back what sits at the very top of a heap, so after a burst of large
/// clients has gone, resident memory would otherwise stay at its peak. Walks every arena: call
/// it rarely, off the async threads.
pub fn release_free() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only inspects and trims the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}
