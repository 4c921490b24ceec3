//! The layout of macOS's `KERN_PROCARGS2` buffer, parsed without system calls so that the
//! parser is tested on every system (it is used only on macOS).
//!
//! The buffer: `argc` (a native-endian `i32`), the executable's path, NUL padding, `argc`
//! arguments, then the environment, each NUL-terminated. An empty string (or the end) ends the
//! environment; the kernel's own "apple" strings may follow it.

/// The environment entries (`NAME=value`) in a `KERN_PROCARGS2` buffer. Empty when the buffer is
/// too short to hold `argc`.
pub fn environment(buf: &[u8]) -> Vec<&[u8]> {
    let Some((argc, rest)) = buf.split_first_chunk::<4>() else {
        return Vec::new();
    };
    let argc = usize::try_from(i32::from_ne_bytes(*argc)).unwrap_or(0);
    // The path, then any padding: the arguments start at the next non-NUL byte.
    let after_path = rest
        .iter()
        .position(|&b| b == 0)
        .map_or(rest.len(), |i| i + 1);
    let rest = &rest[after_path..];
    let first = rest.iter().position(|&b| b != 0).unwrap_or(rest.len());
    let mut strings = rest[first..].split(|&b| b == 0);
    for _ in 0..argc {
        if strings.next().is_none() {
            return Vec::new();
        }
    }
    strings.take_while(|s| !s.is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(argc: i32, body: &[u8]) -> Vec<u8> {
        let mut b = argc.to_ne_bytes().to_vec();
        b.extend_from_slice(body);
        b
    }

    #[test]
    fn environment_follows_the_arguments() {
        let b = buffer(
            3,
            b"/bin/sleep\0\0\0\0sleep\0\0--x\0A=1\0CUBA_EXEC_PROCESS=i.7\0\0ptr_munge=\0",
        );
        // An empty argument counts as one: the environment starts after `--x`.
        assert_eq!(
            environment(&b),
            vec![&b"A=1"[..], &b"CUBA_EXEC_PROCESS=i.7"[..]]
        );
    }

    #[test]
    fn odd_buffers_give_what_they_hold() {
        assert!(environment(b"\x01\0").is_empty());
        // No environment at all.
        assert!(environment(&buffer(1, b"/p\0p\0")).is_empty());
        // Fewer arguments than argc says: nothing is taken for the environment.
        assert!(environment(&buffer(5, b"/p\0p\0A=1\0")).is_empty());
        // No terminating NUL at the end of the buffer.
        assert_eq!(environment(&buffer(1, b"/p\0p\0A=1")), vec![&b"A=1"[..]]);
    }
}
