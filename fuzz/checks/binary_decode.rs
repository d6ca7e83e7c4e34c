//! Arbitrary bytes into the binary snapshot decoder: never a panic, and
//! whatever decodes re-encodes to the same snapshot.
//!
//! The first input byte picks the mode. `0`: the rest is used as the file
//! as is (exercises the header, framing and checksum checks). Otherwise the
//! rest is split into frame bodies that are framed with correct indexes,
//! CRCs and footer, so the fuzzer reaches the MessagePack body decoders and
//! the restore validation behind them.

use strand_snapshot::{CollectSink, DecodeLimits, decode_binary, encode_binary};

const MAGIC: &[u8; 8] = b"\x89STRSNAP";

fn crc(bytes: &[&[u8]]) -> u64 {
    let mut digest = crc64fast::Digest::new();
    for b in bytes {
        digest.write(b);
    }
    digest.sum64()
}

fn push_frame(out: &mut Vec<u8>, kind: u8, index: u64, body: &[u8]) -> u64 {
    let len = body.len() as u64;
    let sum = crc(&[&[kind], &index.to_le_bytes(), &len.to_le_bytes(), body]);
    out.push(kind);
    out.extend_from_slice(&index.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&sum.to_le_bytes());
    out.extend_from_slice(body);
    sum
}

/// `[kind, len, body[len]]*` from the input, framed, plus a valid footer.
fn framed(mut data: &[u8]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&[1, 0, 0, 0]);
    let mut crcs = Vec::new();
    let (mut index, mut streams) = (0u64, 0u64);
    while let [kind, len, rest @ ..] = data {
        let n = usize::from(*len).min(rest.len());
        let kind = kind % 8;
        crcs.extend_from_slice(&push_frame(&mut out, kind, index, &rest[..n]).to_le_bytes());
        streams += u64::from(kind == 2);
        index += 1;
        data = &rest[n..];
    }
    // {"frames": index, "streams": streams, "checksum": crc(crcs)}
    let mut footer = vec![0x83];
    for (key, value) in [
        ("frames", index),
        ("streams", streams),
        ("checksum", crc(&[&crcs])),
    ] {
        footer.push(0xa0 | key.len() as u8);
        footer.extend_from_slice(key.as_bytes());
        footer.push(0xcf);
        footer.extend_from_slice(&value.to_be_bytes());
    }
    push_frame(&mut out, 7, index, &footer);
    out
}

/// One fuzz input: never a panic, decode-encode-decode is the identity.
pub(crate) fn check(data: &[u8]) {
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    let input = if *mode == 0 {
        rest.to_vec()
    } else {
        framed(rest)
    };
    let limits = DecodeLimits::default().with_max_frame_len(1 << 20);
    let mut sink = CollectSink::new();
    if decode_binary(input.as_slice(), &mut sink, &limits).is_ok() {
        let snapshot = sink.into_snapshot();
        let mut again = Vec::new();
        encode_binary(&mut again, &snapshot, &snapshot.streams).expect("re-encode");
        let mut sink = CollectSink::new();
        decode_binary(again.as_slice(), &mut sink, &DecodeLimits::default()).expect("re-decode");
        assert_eq!(sink.into_snapshot(), snapshot);
    }
    let _ = strand_machine::restore_from_with_limits(input.as_slice(), &limits);
}
