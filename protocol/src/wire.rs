//! The encoding: 4-byte big-endian length + bincode body. The only file that names bincode, with
//! one fixed configuration, so the encoding can be swapped without touching anything else.

use bincode::config::{BigEndian, Configuration, Limit, Varint};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio_util::codec::LengthDelimitedCodec;

/// Largest frame either side accepts. Checked from the length prefix, before allocating.
pub const MAX_FRAME: usize = 8 * 1024 * 1024;

/// The most output bytes one reply may carry, leaving room for the rest of the frame.
pub const MAX_OUTPUT_PER_FRAME: u32 = 4 * 1024 * 1024;

type Config = Configuration<BigEndian, Varint, Limit<MAX_FRAME>>;

/// bincode's standard configuration, big-endian, with a decode limit: a length field inside a
/// body can never make the decoder allocate more than a frame can hold.
const CONFIG: Config = bincode::config::standard()
    .with_big_endian()
    .with_limit::<MAX_FRAME>();

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("cannot encode message: {0}")]
    Encode(String),
    #[error("malformed message: {0}")]
    Decode(String),
    #[error("malformed message: {0} unexpected trailing bytes")]
    Trailing(usize),
    #[error("message of {0} bytes exceeds the frame limit of {MAX_FRAME} bytes")]
    TooLarge(usize),
}

/// Encodes a message body (without the length prefix), appending to `out`. A body over
/// [`MAX_FRAME`] is [`WireError::TooLarge`] with its size: bincode applies the limit only when
/// decoding, so the size is checked here, and callers can tell "too large" from a failure.
pub fn encode_into<T: Serialize>(value: &T, out: &mut Vec<u8>) -> Result<(), WireError> {
    bincode::serde::encode_into_std_write(value, out, CONFIG)
        .map_err(|e| WireError::Encode(e.to_string()))?;
    if out.len() > MAX_FRAME {
        return Err(WireError::TooLarge(out.len()));
    }
    Ok(())
}

/// Encodes a message body (without the length prefix).
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, WireError> {
    let mut out = Vec::new();
    encode_into(value, &mut out)?;
    Ok(out)
}

/// Decodes a whole message body; bytes left over are an error, not ignored.
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, WireError> {
    let (value, used) = bincode::serde::decode_from_slice(body, CONFIG)
        .map_err(|e| WireError::Decode(e.to_string()))?;
    if used != body.len() {
        return Err(WireError::Trailing(body.len() - used));
    }
    Ok(value)
}

/// The framing codec both sides use: `u32` big-endian length, then the body.
pub fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .length_field_length(4)
        .big_endian()
        .max_frame_length(MAX_FRAME)
        .new_codec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_over_the_frame_limit_is_too_large_with_its_size() {
        let big = "x".repeat(MAX_FRAME);
        match encode(&big) {
            // The bytes plus their length field.
            Err(WireError::TooLarge(n)) => assert!(n > MAX_FRAME && n < MAX_FRAME + 16, "{n}"),
            other => panic!("expected TooLarge, got {other:?}"),
        }
        assert!(encode(&"x".repeat(MAX_FRAME - 16)).is_ok());
    }
}
