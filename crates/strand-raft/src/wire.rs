//! The Raft wire protocol between nodes: which messages there are
//! ([`RaftMessage`]) and the format of `POST /__strand/raft/batch`.
//!
//! A message sent alone is `POST /__strand/raft/{group}/{name}` with the
//! message's MessagePack body; the answer is the MessagePack body of the
//! group's answer.
//!
//! A batch's body is a MessagePack array of at most
//! [`MAX_BATCH_MESSAGES`] messages, each an array
//! `[group: uint, kind: str, body: bin]` (`kind` is `append` or `vote`,
//! `body` the same MessagePack bytes `/__strand/raft/{group}/{kind}`
//! takes). The answer streams: one frame per message, sent as soon as
//! its group has answered (so one slow group delays no other group's
//! answer), each a big-endian `u32` length and the MessagePack array
//! `[index: uint, ok: bool, body: bin]`: the message's place in the
//! batch, and the group's answer when `ok`, else the error's text
//! (UTF-8).

use bytes::{Buf, Bytes, BytesMut};

/// A Raft message one node sends another, by what it asks of the peer's
/// group; its name is the last segment of the route it is sent alone to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RaftMessage {
    /// openraft's append entries (heartbeats included): `append`.
    Append,
    /// A vote request: `vote`.
    Vote,
    /// One chunk of a snapshot a leader installs on a follower:
    /// `snapshot`.
    Snapshot,
    /// An entry a follower forwards to its group's leader: `propose`.
    Propose,
    /// The leader asks a voter that holds every entry to campaign at once,
    /// handing it the leadership: `elect`.
    Elect,
    /// The leader is about to drop a learner from the group: it stops
    /// answering for the group now (`release`).
    Release,
}

impl RaftMessage {
    /// Every message.
    pub const ALL: [Self; 6] = [
        Self::Append,
        Self::Vote,
        Self::Snapshot,
        Self::Propose,
        Self::Elect,
        Self::Release,
    ];

    /// The message's name on the wire.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Append => "append",
            Self::Vote => "vote",
            Self::Snapshot => "snapshot",
            Self::Propose => "propose",
            Self::Elect => "elect",
            Self::Release => "release",
        }
    }

    /// The message named `name`, if there is one.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The route the message goes to when it is sent alone:
    /// `/__strand/raft/{group}/{name}`.
    #[must_use]
    pub fn path(self, group: usize) -> String {
        format!("/__strand/raft/{group}/{}", self.name())
    }

    /// Whether a batch may carry the message (appends and votes: small,
    /// frequent and sent by every group).
    #[must_use]
    pub fn batched(self) -> bool {
        matches!(self, Self::Append | Self::Vote)
    }
}

/// The header that carries the cluster token on every message between
/// nodes (`/__strand/raft/...`).
pub const CLUSTER_TOKEN_HEADER: &str = "strand-cluster-token";

/// The path a node serves its segment files to its peers on (POST, the
/// object's name as the body).
pub const SEGMENT_PATH: &str = "/__strand/raft/segment";

/// The path of the batch route.
pub const BATCH_PATH: &str = "/__strand/raft/batch";

/// The most messages one batch holds (a sender's limit, and the
/// receiver's: a longer list is refused).
pub const MAX_BATCH_MESSAGES: usize = 64;

/// A batch takes no more messages once their bodies reach this many
/// bytes; a message larger than this alone is not batched (it goes to
/// `/__strand/raft/{group}/{kind}` by itself).
pub const MAX_BATCHED_BYTES: usize = 4 << 20;

/// The largest batch body the receiver reads: [`MAX_BATCHED_BYTES`] of
/// message bodies and their framing (a few bytes a message).
pub const MAX_BATCH_BODY: usize = MAX_BATCHED_BYTES + (64 << 10);

/// Why a batch is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchRefused {
    /// The body is not a batch.
    #[error("a malformed raft batch: {0}")]
    Malformed(String),
    /// The batch holds more messages than [`MAX_BATCH_MESSAGES`].
    #[error("a raft batch of {0} messages; at most {MAX_BATCH_MESSAGES} are taken")]
    TooMany(usize),
}

/// One message of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BatchMessage {
    pub(crate) group: usize,
    pub(crate) kind: RaftMessage,
    pub(crate) body: Vec<u8>,
}

fn malformed(what: impl std::fmt::Debug) -> BatchRefused {
    BatchRefused::Malformed(format!("{what:?}"))
}

fn u32_len(len: usize) -> Result<u32, String> {
    u32::try_from(len).map_err(|_| format!("a length of {len} does not fit a batch"))
}

/// Writes a batch of `(group, kind, body)` messages.
pub(crate) fn encode_batch<'a>(
    messages: impl ExactSizeIterator<Item = (usize, RaftMessage, &'a [u8])>,
) -> Result<Vec<u8>, String> {
    use rmp::encode;
    let e = |e: encode::ValueWriteError| e.to_string();
    let mut out = Vec::new();
    encode::write_array_len(&mut out, u32_len(messages.len())?).map_err(e)?;
    for (group, kind, body) in messages {
        encode::write_array_len(&mut out, 3).map_err(e)?;
        encode::write_uint(&mut out, group as u64).map_err(e)?;
        encode::write_str(&mut out, kind.name()).map_err(e)?;
        encode::write_bin_len(&mut out, u32_len(body.len())?).map_err(e)?;
        out.extend_from_slice(body);
    }
    Ok(out)
}

/// Reads `len` bytes off the front of `rd`.
fn take<'a>(rd: &mut &'a [u8], len: u32) -> Result<&'a [u8], BatchRefused> {
    let len = usize::try_from(len).map_err(malformed)?;
    if rd.len() < len {
        return Err(BatchRefused::Malformed(format!(
            "{len} bytes announced, {} left",
            rd.len()
        )));
    }
    let (data, rest) = rd.split_at(len);
    *rd = rest;
    Ok(data)
}

/// Reads a batch: every message, or why the body is refused (never a
/// panic, whatever the bytes).
pub(crate) fn decode_batch(body: &[u8]) -> Result<Vec<BatchMessage>, BatchRefused> {
    use rmp::decode;
    let mut rd = body;
    let count = decode::read_array_len(&mut rd).map_err(malformed)?;
    let count = usize::try_from(count).map_err(malformed)?;
    if count > MAX_BATCH_MESSAGES {
        return Err(BatchRefused::TooMany(count));
    }
    let mut messages = Vec::with_capacity(count);
    for _ in 0..count {
        if decode::read_array_len(&mut rd).map_err(malformed)? != 3 {
            return Err(BatchRefused::Malformed(
                "a message is not [group, kind, body]".to_owned(),
            ));
        }
        let group: usize = decode::read_int(&mut rd).map_err(malformed)?;
        let len = decode::read_str_len(&mut rd).map_err(malformed)?;
        let kind = take(&mut rd, len)?;
        let kind = std::str::from_utf8(kind)
            .ok()
            .and_then(RaftMessage::from_name)
            .filter(|k| k.batched())
            .ok_or_else(|| {
                BatchRefused::Malformed(format!(
                    "kind {:?} cannot be batched",
                    String::from_utf8_lossy(kind)
                ))
            })?;
        let len = decode::read_bin_len(&mut rd).map_err(malformed)?;
        let body = take(&mut rd, len)?.to_vec();
        messages.push(BatchMessage { group, kind, body });
    }
    if !rd.is_empty() {
        return Err(BatchRefused::Malformed(format!(
            "{} bytes after the last message",
            rd.len()
        )));
    }
    Ok(messages)
}

/// The largest answer frame a sender reads (an append's or a vote's
/// answer is a few dozen bytes; this only bounds a misbehaving peer).
pub(crate) const MAX_ANSWER_FRAME: usize = 16 << 20;

/// Writes the answer to message `index` of a batch as one frame: a
/// big-endian `u32` length, then the MessagePack array
/// `[index: uint, ok: bool, body: bin]`.
pub(crate) fn encode_answer(
    index: usize,
    answer: &Result<Vec<u8>, String>,
) -> Result<Vec<u8>, String> {
    use rmp::encode;
    let e = |e: encode::ValueWriteError| e.to_string();
    let (ok, body) = match answer {
        Ok(body) => (true, body.as_slice()),
        Err(text) => (false, text.as_bytes()),
    };
    let mut out = vec![0; 4];
    encode::write_array_len(&mut out, 3).map_err(e)?;
    encode::write_uint(&mut out, index as u64).map_err(e)?;
    encode::write_bool(&mut out, ok).map_err(|e| e.to_string())?;
    encode::write_bin_len(&mut out, u32_len(body.len())?).map_err(e)?;
    out.extend_from_slice(body);
    let len = u32_len(out.len() - 4)?;
    out[..4].copy_from_slice(&len.to_be_bytes());
    Ok(out)
}

/// Takes the next whole answer frame (without its length) off the front
/// of `buf`: `None` while it has not all arrived.
pub(crate) fn next_frame(buf: &mut BytesMut) -> Result<Option<Bytes>, BatchRefused> {
    let Some(head) = buf.first_chunk::<4>() else {
        return Ok(None);
    };
    let len = usize::try_from(u32::from_be_bytes(*head)).map_err(malformed)?;
    if len > MAX_ANSWER_FRAME {
        return Err(BatchRefused::Malformed(format!(
            "an answer frame of {len} bytes"
        )));
    }
    if buf.len() < 4 + len {
        return Ok(None);
    }
    buf.advance(4);
    Ok(Some(buf.split_to(len).freeze()))
}

/// Reads one answer frame: the message's index in its batch and its
/// answer (a slice of `frame`) or error text.
pub(crate) fn decode_answer(frame: &Bytes) -> Result<(usize, Result<Bytes, String>), BatchRefused> {
    use rmp::decode;
    let mut rd: &[u8] = frame;
    if decode::read_array_len(&mut rd).map_err(malformed)? != 3 {
        return Err(BatchRefused::Malformed(
            "an answer is not [index, ok, body]".to_owned(),
        ));
    }
    let index: usize = decode::read_int(&mut rd).map_err(malformed)?;
    let ok = decode::read_bool(&mut rd).map_err(malformed)?;
    let len = decode::read_bin_len(&mut rd).map_err(malformed)?;
    let start = frame.len() - rd.len();
    let data = take(&mut rd, len)?;
    if !rd.is_empty() {
        return Err(BatchRefused::Malformed("bytes after an answer".to_owned()));
    }
    let data = frame.slice(start..start + data.len());
    let answer = if ok {
        Ok(data)
    } else {
        Err(String::from_utf8_lossy(&data).into_owned())
    };
    Ok((index, answer))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        encode_batch(
            [
                (0usize, RaftMessage::Append, &b"\x81\xa1a\x01"[..]),
                (7, RaftMessage::Vote, &b""[..]),
            ]
            .into_iter(),
        )
        .unwrap()
    }

    #[test]
    fn a_batch_round_trips() {
        let messages = decode_batch(&sample()).unwrap();
        assert_eq!(
            messages,
            vec![
                BatchMessage {
                    group: 0,
                    kind: RaftMessage::Append,
                    body: b"\x81\xa1a\x01".to_vec()
                },
                BatchMessage {
                    group: 7,
                    kind: RaftMessage::Vote,
                    body: Vec::new()
                },
            ]
        );
        let empty = encode_batch(std::iter::empty()).unwrap();
        assert_eq!(decode_batch(&empty).unwrap(), Vec::new());
    }

    #[test]
    fn answer_frames_round_trip_and_split_anywhere() {
        let mut stream = encode_answer(1, &Ok(b"yes".to_vec())).unwrap();
        stream.extend(encode_answer(0, &Err("no group 9".to_owned())).unwrap());
        // However the bytes arrive, the same two answers come out.
        for cut in 0..=stream.len() {
            let mut buf = BytesMut::new();
            let mut answers = Vec::new();
            for part in [&stream[..cut], &stream[cut..]] {
                buf.extend_from_slice(part);
                while let Some(frame) = next_frame(&mut buf).unwrap() {
                    answers.push(decode_answer(&frame).unwrap());
                }
            }
            assert!(buf.is_empty());
            assert_eq!(
                answers,
                vec![
                    (1, Ok(Bytes::from_static(b"yes"))),
                    (0, Err("no group 9".to_owned()))
                ]
            );
        }
        let mut huge = BytesMut::from(&[0xff, 0xff, 0xff, 0xff, 0x93][..]);
        assert!(next_frame(&mut huge).is_err());
    }

    #[test]
    fn every_truncation_and_garbage_is_an_error() {
        let body = sample();
        for cut in 0..body.len() {
            assert!(
                matches!(decode_batch(&body[..cut]), Err(BatchRefused::Malformed(_))),
                "cut at {cut}"
            );
        }
        let mut longer = body.clone();
        longer.push(0);
        assert!(decode_batch(&longer).is_err());
        // Every single-byte change either decodes or is refused: no panic.
        for i in 0..body.len() {
            for b in [0x00, 0x7f, 0x90, 0xc0, 0xc4, 0xc5, 0xdc, 0xdd, 0xff] {
                let mut bad = body.clone();
                bad[i] = b;
                let _ = decode_batch(&bad);
            }
        }
        // A length beyond the body, a negative group, an unknown kind.
        assert!(
            decode_batch(&[
                0x91, 0x93, 0x00, 0xa4, b'v', b'o', b't', b'e', 0xc6, 0xff, 0xff, 0xff, 0xff
            ])
            .is_err()
        );
        assert!(
            decode_batch(&[0x91, 0x93, 0xff, 0xa4, b'v', b'o', b't', b'e', 0xc4, 0x00]).is_err()
        );
        let propose = encode_batch([(0usize, RaftMessage::Propose, &b""[..])].into_iter()).unwrap();
        assert!(
            decode_batch(&propose)
                .unwrap_err()
                .to_string()
                .contains("propose")
        );
        // Not an array at all.
        assert!(decode_batch(b"\xa3abc").is_err());
        assert!(decode_answer(&Bytes::from_static(b"\x93\x00\xc3\xc4\x05ab")).is_err());
        assert!(decode_answer(&Bytes::from_static(b"\x93\x00\xc3\xc4\x01ab")).is_err());
        assert!(decode_answer(&Bytes::from_static(b"\x92\x00\xc3")).is_err());
    }

    #[test]
    fn an_oversized_batch_is_refused() {
        let bodies: Vec<(usize, RaftMessage, &[u8])> = (0..=MAX_BATCH_MESSAGES)
            .map(|g| (g, RaftMessage::Vote, &b""[..]))
            .collect();
        let body = encode_batch(bodies.into_iter()).unwrap();
        assert_eq!(
            decode_batch(&body),
            Err(BatchRefused::TooMany(MAX_BATCH_MESSAGES + 1))
        );
        // An announced length of 2^32 - 1 messages is refused before
        // anything is allocated for them.
        assert_eq!(
            decode_batch(&[0xdd, 0xff, 0xff, 0xff, 0xff]),
            Err(BatchRefused::TooMany(u32::MAX as usize))
        );
    }

    #[test]
    fn message_names_round_trip() {
        for message in RaftMessage::ALL {
            assert_eq!(RaftMessage::from_name(message.name()), Some(message));
        }
        assert_eq!(RaftMessage::from_name("batch"), None);
        assert_eq!(RaftMessage::from_name("APPEND"), None);
        let batched: Vec<_> = RaftMessage::ALL
            .into_iter()
            .filter(|m| m.batched())
            .collect();
        assert_eq!(batched, [RaftMessage::Append, RaftMessage::Vote]);
    }
}
