//! Parsing the `KERN_PROCARGS2` buffer macOS gives for a process (its argument and environment
//! block), where the daemon and `cubactl` find the environment markers of processes and the
//! daemon the command line of a program asking for a password. Pure, so it is tested on every
//! OS; only macOS reads such a buffer.

/// The environment entries (`NAME=VALUE`) of a `KERN_PROCARGS2` buffer: argc (a native-endian
/// `i32`), the executable path, NUL padding, argc arguments each NUL-terminated, then the
/// environment entries each NUL-terminated, ended by an empty one (after which come the
/// "apple" strings the loader passes, which are not environment). Empty when malformed.
pub fn env_entries(buf: &[u8]) -> Vec<&[u8]> {
    parse(buf).map(|(_, env)| env).unwrap_or_default()
}

/// The arguments of a `KERN_PROCARGS2` buffer (`argv`, the program's name first). Empty when
/// malformed.
pub fn arguments(buf: &[u8]) -> Vec<&[u8]> {
    parse(buf).map(|(args, _)| args).unwrap_or_default()
}

/// The arguments and the environment entries of a buffer.
type Parts<'a> = (Vec<&'a [u8]>, Vec<&'a [u8]>);

fn parse(buf: &[u8]) -> Option<Parts<'_>> {
    let argc = i32::from_ne_bytes(buf.get(..4)?.try_into().ok()?);
    let rest = buf.get(4..)?;
    // The executable path, then the NULs that pad it.
    let path_end = rest.iter().position(|b| *b == 0)?;
    let rest = &rest[path_end..];
    let args_start = rest.iter().position(|b| *b != 0)?;
    let mut fields = rest[args_start..].split(|b| *b == 0);
    // Counted, not searched: an argument may be empty.
    let args = (0..argc.max(0))
        .map(|_| fields.next())
        .collect::<Option<Vec<&[u8]>>>()?;
    Some((args, fields.take_while(|f| !f.is_empty()).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(argc: i32, path: &str, pad: usize, rest: &[&str]) -> Vec<u8> {
        let mut b = argc.to_ne_bytes().to_vec();
        b.extend_from_slice(path.as_bytes());
        b.extend(std::iter::repeat_n(0u8, pad));
        for s in rest {
            b.extend_from_slice(s.as_bytes());
            b.push(0);
        }
        b
    }

    #[test]
    fn environment_after_the_arguments() {
        let b = buffer(
            3,
            "/bin/sh",
            5,
            &[
                "sh",
                "-c",
                "",
                "A=1",
                "CUBA_EXEC_PROCESS=x.7",
                "",
                "executable_path=/bin/sh",
            ],
        );
        let env = env_entries(&b);
        assert_eq!(env, vec![&b"A=1"[..], &b"CUBA_EXEC_PROCESS=x.7"[..]]);
        assert_eq!(arguments(&b), vec![&b"sh"[..], &b"-c"[..], &b""[..]]);
    }

    #[test]
    fn no_environment_and_malformed_buffers() {
        assert!(env_entries(&buffer(1, "/bin/true", 1, &["true", ""])).is_empty());
        assert!(env_entries(&[]).is_empty());
        assert!(env_entries(&[1, 0]).is_empty());
        // More arguments claimed than there are.
        assert!(env_entries(&buffer(9, "/bin/sh", 1, &["sh"])).is_empty());
        assert!(arguments(&buffer(9, "/bin/sh", 1, &["sh"])).is_empty());
        // No terminator after the path.
        assert!(env_entries(&buffer(0, "/bin/sh", 0, &[])).is_empty());
    }

    #[test]
    fn an_empty_argument_counts_and_a_missing_last_nul_is_forgiven() {
        let mut b = 3i32.to_ne_bytes().to_vec();
        b.extend_from_slice(
            b"/bin/sleep\0\0\0\0sleep\0\0--x\0A=1\0CUBA_EXEC_PROCESS=i.7\0\0ptr_munge=\0",
        );
        assert_eq!(
            env_entries(&b),
            vec![&b"A=1"[..], &b"CUBA_EXEC_PROCESS=i.7"[..]]
        );
        let mut b = 1i32.to_ne_bytes().to_vec();
        b.extend_from_slice(b"/p\0p\0A=1");
        assert_eq!(env_entries(&b), vec![&b"A=1"[..]]);
    }
}
