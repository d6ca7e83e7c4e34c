//! Serde `with` module for the entry's `payload` (a `Vec<u8>`).
//!
//! Human-readable formats (serde JSON) keep the plain `Vec<u8>` shape: an
//! array of numbers, exactly as the derived impl writes and reads it.
//! Binary formats (MessagePack frames) write one byte string (`bin`) with a
//! single copy and read it back the same way; an array of small integers is
//! accepted too.

use std::fmt;

use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serializer};

/// Serializes `bytes` as a sequence (human-readable) or a byte string.
pub(crate) fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
    if serializer.is_human_readable() {
        serializer.collect_seq(bytes)
    } else {
        if u32::try_from(bytes.len()).is_err() {
            return Err(serde::ser::Error::custom(
                "byte string longer than 4 GiB cannot be encoded",
            ));
        }
        serializer.serialize_bytes(bytes)
    }
}

/// Deserializes what [`serialize`] wrote.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
    if deserializer.is_human_readable() {
        Vec::<u8>::deserialize(deserializer)
    } else {
        deserializer.deserialize_byte_buf(BytesVisitor)
    }
}

struct BytesVisitor;

impl<'de> Visitor<'de> for BytesVisitor {
    type Value = Vec<u8>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a byte string")
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
        Ok(v.to_vec())
    }

    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
        Ok(v)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
        // Cap the pre-allocation: the length hint comes from the input.
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
        while let Some(b) = seq.next_element::<u8>()? {
            out.push(b);
        }
        Ok(out)
    }
}
