//! Giving freed heap memory back to the kernel.

extern "C" {
    /// `<malloc/malloc.h>`: frees what it can of `zone` (every zone when null) until `goal`
    /// bytes are released (0: as much as possible). Not in the `libc` crate.
    fn malloc_zone_pressure_relief(zone: *mut libc::c_void, goal: libc::size_t) -> libc::size_t;
}

/// Returns the free pages of every malloc zone to the kernel, as the system does under memory
/// pressure: after a burst of large clients has gone, resident memory would otherwise stay near
/// its peak. Walks every zone: call it rarely, off the async threads.
pub fn release_free() {
    // SAFETY: a null zone means every zone; the call only releases the allocator's free pages.
    unsafe {
        malloc_zone_pressure_relief(std::ptr::null_mut(), 0);
    }
}
