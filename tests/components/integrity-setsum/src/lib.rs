//! A downstream use of `strand-integrity` alone: recompute a stream's
//! integrity setsum from its appends (read back from wherever they are
//! stored) and compare it with the value a snapshot or a replica reports.

use strand_integrity::{IntegrityDomain, StreamIntegrity};

/// One append of a stream as it was written.
#[derive(Debug, Clone, Copy)]
pub enum Append<'a> {
    /// Inline bytes.
    Inline(&'a [u8]),
    /// Bytes kept in an object: its path, the bytes it contributes to the
    /// stream and the whole object's size.
    External {
        /// The object's path.
        s3_path: &'a str,
        /// Bytes the append adds to the stream.
        payload_len: u64,
        /// The whole object's size.
        object_size: u64,
    },
}

/// The stream's id parts.
#[derive(Debug, Clone, Copy)]
pub struct StreamName<'a> {
    /// The bucket.
    pub bucket: &'a str,
    /// The affinity key, if the stream has one.
    pub affinity: Option<&'a str>,
    /// The local stream name.
    pub stream: &'a str,
}

/// The total setsum (lowercase hex) and record count of the appends, in
/// order from offset 0.
pub fn recompute(name: StreamName<'_>, appends: &[Append<'_>]) -> (String, u64) {
    let domain = IntegrityDomain::new(name.bucket, name.affinity, name.stream);
    let mut integrity = StreamIntegrity::new();
    let mut offset = 0u64;
    for append in appends {
        match *append {
            Append::Inline(bytes) => {
                let end = offset + bytes.len() as u64;
                integrity.append_inline(domain, offset, end, bytes);
                offset = end;
            }
            Append::External {
                s3_path,
                payload_len,
                object_size,
            } => {
                let end = offset + payload_len;
                integrity.append_external(domain, offset, end, s3_path, object_size);
                offset = end;
            }
        }
    }
    let snapshot = integrity.snapshot(0, offset);
    (snapshot.total_setsum, snapshot.total_records)
}
