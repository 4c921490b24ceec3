//! OS strings (paths, environment names and values) on the wire, the same bytes from every OS.
//!
//! On the wire an OS string is a byte string: on Unix the OS's own bytes, unchanged; on Windows
//! its UTF-16 as WTF-8 (UTF-8 where it is valid Unicode, a lone surrogate as its three-byte
//! form). So a Windows client and a Unix daemon (or the other way, over a host bridge) read
//! each other's text, and nothing a program can put in its environment is lost on one OS.
//! Bytes that are not UTF-8 reaching Windows become U+FFFD: Windows has no name for them.
//!
//! Used through serde's `with`: `#[serde(with = "crate::os_text")]` for an `OsString`,
//! [`opt`] for an `Option<OsString>`, [`env`] for an [`crate::Env`].

use std::ffi::{OsStr, OsString};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An OS string's wire bytes.
pub fn to_bytes(s: &OsStr) -> std::borrow::Cow<'_, [u8]> {
    imp::to_bytes(s)
}

/// The OS string of wire bytes.
pub fn from_bytes(b: Vec<u8>) -> OsString {
    imp::from_bytes(b)
}

pub fn serialize<S: Serializer>(s: &OsString, ser: S) -> Result<S::Ok, S::Error> {
    to_bytes(s).serialize(ser)
}

pub fn deserialize<'de, D: Deserializer<'de>>(de: D) -> Result<OsString, D::Error> {
    Vec::<u8>::deserialize(de).map(from_bytes)
}

/// `Option<OsString>`.
pub mod opt {
    use super::*;

    pub fn serialize<S: Serializer>(s: &Option<OsString>, ser: S) -> Result<S::Ok, S::Error> {
        s.as_deref().map(to_bytes).serialize(ser)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(de: D) -> Result<Option<OsString>, D::Error> {
        Option::<Vec<u8>>::deserialize(de).map(|b| b.map(from_bytes))
    }
}

/// `Vec<(OsString, OsString)>`.
pub mod env {
    use super::*;

    pub fn serialize<S: Serializer>(e: &[(OsString, OsString)], ser: S) -> Result<S::Ok, S::Error> {
        ser.collect_seq(e.iter().map(|(k, v)| (to_bytes(k), to_bytes(v))))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        de: D,
    ) -> Result<Vec<(OsString, OsString)>, D::Error> {
        let pairs = Vec::<(Vec<u8>, Vec<u8>)>::deserialize(de)?;
        Ok(pairs
            .into_iter()
            .map(|(k, v)| (from_bytes(k), from_bytes(v)))
            .collect())
    }
}

#[cfg(unix)]
mod imp {
    use std::borrow::Cow;
    use std::ffi::{OsStr, OsString};
    use std::os::unix::ffi::{OsStrExt, OsStringExt};

    pub fn to_bytes(s: &OsStr) -> Cow<'_, [u8]> {
        Cow::Borrowed(s.as_bytes())
    }

    pub fn from_bytes(b: Vec<u8>) -> OsString {
        OsString::from_vec(b)
    }
}

#[cfg(not(unix))]
mod imp {
    use std::borrow::Cow;
    use std::ffi::{OsStr, OsString};

    pub fn to_bytes(s: &OsStr) -> Cow<'_, [u8]> {
        match s.to_str() {
            Some(text) => Cow::Borrowed(text.as_bytes()),
            None => Cow::Owned(super::wtf8::encode(&wide(s))),
        }
    }

    pub fn from_bytes(b: Vec<u8>) -> OsString {
        match String::from_utf8(b) {
            Ok(text) => OsString::from(text),
            Err(e) => from_wide(&super::wtf8::decode(e.as_bytes())),
        }
    }

    #[cfg(windows)]
    fn wide(s: &OsStr) -> Vec<u16> {
        std::os::windows::ffi::OsStrExt::encode_wide(s).collect()
    }

    #[cfg(windows)]
    fn from_wide(w: &[u16]) -> OsString {
        std::os::windows::ffi::OsStringExt::from_wide(w)
    }

    #[cfg(not(windows))]
    fn wide(s: &OsStr) -> Vec<u16> {
        s.to_string_lossy().encode_utf16().collect()
    }

    #[cfg(not(windows))]
    fn from_wide(w: &[u16]) -> OsString {
        OsString::from(String::from_utf16_lossy(w))
    }
}

/// WTF-8: UTF-16 with lone surrogates, as bytes (kept on every OS so it is tested everywhere).
#[cfg_attr(unix, allow(dead_code))]
mod wtf8 {
    /// UTF-16 as WTF-8: each code point, or lone surrogate, in UTF-8's form.
    pub fn encode(wide: &[u16]) -> Vec<u8> {
        let mut out = Vec::with_capacity(wide.len());
        for unit in char::decode_utf16(wide.iter().copied()) {
            let point = match unit {
                Ok(c) => u32::from(c),
                Err(e) => u32::from(e.unpaired_surrogate()),
            };
            push(&mut out, point);
        }
        out
    }

    fn push(out: &mut Vec<u8>, cp: u32) {
        // Truncating casts are the encoding: each byte holds six bits of the code point.
        match cp {
            0..=0x7f => out.push(cp as u8),
            0x80..=0x7ff => out.extend([0xc0 | (cp >> 6) as u8, 0x80 | (cp & 0x3f) as u8]),
            0x800..=0xffff => out.extend([
                0xe0 | (cp >> 12) as u8,
                0x80 | ((cp >> 6) & 0x3f) as u8,
                0x80 | (cp & 0x3f) as u8,
            ]),
            _ => out.extend([
                0xf0 | (cp >> 18) as u8,
                0x80 | ((cp >> 12) & 0x3f) as u8,
                0x80 | ((cp >> 6) & 0x3f) as u8,
                0x80 | (cp & 0x3f) as u8,
            ]),
        }
    }

    /// WTF-8 (or any bytes) as UTF-16: a surrogate's three-byte form is that surrogate; what
    /// is neither UTF-8 nor that becomes U+FFFD.
    pub fn decode(b: &[u8]) -> Vec<u16> {
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            let lead = b[i];
            let (len, init) = match lead {
                0x00..=0x7f => (1, u32::from(lead)),
                0xc2..=0xdf => (2, u32::from(lead & 0x1f)),
                0xe0..=0xef => (3, u32::from(lead & 0x0f)),
                0xf0..=0xf4 => (4, u32::from(lead & 0x07)),
                _ => (0, 0),
            };
            let tail = b.get(i + 1..i + len.max(1)).unwrap_or(&[]);
            let whole = len > 0 && tail.len() + 1 == len && tail.iter().all(|t| t & 0xc0 == 0x80);
            let cp = tail
                .iter()
                .fold(init, |cp, t| (cp << 6) | u32::from(t & 0x3f));
            let minimum = [0, 0, 0x80, 0x800, 0x10000][len.min(4)];
            if !whole || cp < minimum || cp > 0x10ffff {
                out.push(0xfffd);
                i += 1;
                continue;
            }
            match char::from_u32(cp) {
                Some(c) => out.extend_from_slice(c.encode_utf16(&mut [0; 2])),
                // A lone surrogate (0xd800..=0xdfff).
                None => out.push(cp as u16),
            }
            i += len;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wtf8_keeps_text_and_lone_surrogates() {
        let text: Vec<u16> = "aé€😀".encode_utf16().collect();
        assert_eq!(wtf8::encode(&text), "aé€😀".as_bytes());
        assert_eq!(wtf8::decode("aé€😀".as_bytes()), text);
        let lone = [0x61, 0xd800, 0x62];
        let bytes = wtf8::encode(&lone);
        assert_eq!(bytes, [0x61, 0xed, 0xa0, 0x80, 0x62]);
        assert_eq!(wtf8::decode(&bytes), lone);
        assert_eq!(wtf8::decode(&[0xff, 0x61, 0xc3]), [0xfffd, 0x61, 0xfffd]);
    }

    #[cfg(unix)]
    #[test]
    fn unix_bytes_cross_unchanged() {
        use std::os::unix::ffi::OsStrExt;
        let s = OsStr::from_bytes(&[0x66, 0xff, 0x00]);
        assert_eq!(to_bytes(s).as_ref(), [0x66, 0xff, 0x00]);
        assert_eq!(from_bytes(vec![0x66, 0xff, 0x00]), s);
    }
}
