//! Structure-aware: the input is read through `arbitrary::Unstructured` as
//! a sequence of `StreamCommand`s built from a small vocabulary (two
//! buckets and an invalid one, four streams, three content types, two
//! producers), applied to a machine that starts with buckets `bkt1` and `bkt2`.
//!
//! Input layout: byte 0 modulo 49 is the split point; then one record of
//! [`RECORD`] bytes per command (the last may be short; missing bytes read
//! as zero): byte 0 modulo 18 picks the kind (0 CreateBucket, 1
//! DeleteBucket, 2 PurgeBucket, 3 SetBucketQuota, 4-5 CreateStream, 6
//! CreateExternal, 7-9 Append, 10 AppendExternal, 11 AppendBatch, 12
//! PublishSnapshot, 13 AdvanceRetention, 14 FlushCold, 15
//! TouchStreamAccess, 16 Close, 17 AckColdGc or DeleteStream), byte 1
//! modulo 4 the stream, byte 2 modulo 3 the bucket, the rest the operands
//! (all zero: the plain, mostly valid choice). `cargo xtask fuzz` seeds the
//! corpus with the command-kind sequences of the conformance traces in this
//! layout. Checks: no panic, and restore equivalence (spec 07 §7 P1) at a
//! split point chosen by the input: `restore(snapshot())` gives back the
//! same snapshot (directly, through JSON text and through the binary
//! format), and the remaining commands give equal responses and snapshots
//! on the original and the restored machines.
//!
//! The exceptions are exactly those of
//! `crates/strand-machine/tests/prop_restore_equivalence.rs`:
//!
//! * P2 raw frontier: `AdvanceRetention` asks for an offset above 0 only
//!   when the stream's snapshot entry has `cold_frontier_offset > 0`.
//! * Affinity ties: the vocabulary has no two streams sharing bucket and
//!   local stream id.
//! * Saturated usage gauge: external payloads stay small.
//! * P3: a restore that fails must fail with `PayloadLengthMismatch` on a
//!   stream that took a successful external create or append; the case is
//!   then skipped.

use std::collections::BTreeSet;

use arbitrary::{Result, Unstructured};
use bytes::Bytes;
use strand_machine::{StreamCommand, StreamResponse, StreamStateMachine};
use strand_model::{BucketStreamId, ColdChunkRef, ExternalPayloadRef, ProducerRequest};
use strand_snapshot::{StreamSnapshot, StreamSnapshotError, encode_binary};

const JSON: &str = "application/json";
const OCTET: &str = "application/octet-stream";
const TEXT: &str = "text/plain";
const BUCKETS: [&str; 3] = ["bkt1", "bkt2", "B!"];
/// Bytes per command record.
pub(crate) const RECORD: usize = 24;
/// Number of command kinds (the first byte of a record, modulo this).
const KINDS: u8 = 18;

fn streams() -> [(BucketStreamId, &'static str); 4] {
    [
        (BucketStreamId::new("bkt1", "s1"), JSON),
        (BucketStreamId::new("bkt1", "s2"), OCTET),
        (BucketStreamId::with_affinity("bkt1", "k", "t1"), TEXT),
        (BucketStreamId::new("bkt2", "s1"), OCTET),
    ]
}

/// True `n` times in `d` (`0 < n < d`); a zero byte (or none) gives false,
/// so zero operands mean the plain choice.
fn rare(u: &mut Unstructured<'_>, n: u8, d: u8) -> Result<bool> {
    Ok(u.arbitrary::<u8>()? % d >= d - n)
}

/// The generator's state: the clock, counters for object names and
/// producer sequence numbers.
struct Gen {
    now: u64,
    objects: u64,
    seqs: [u64; 2],
}

impl Gen {
    fn now_ms(&mut self, u: &mut Unstructured<'_>) -> Result<u64> {
        self.now += u64::from(u.int_in_range(0u16..=3000)?);
        Ok(self.now)
    }

    fn content_type(&self, u: &mut Unstructured<'_>, own: &'static str) -> Result<Option<String>> {
        Ok(match u.int_in_range(0u8..=7)? {
            0..=5 => Some(own.to_string()),
            6 => None,
            _ => Some(u.choose(&[JSON, OCTET, TEXT, ""])?.to_string()),
        })
    }

    fn payload(&self, u: &mut Unstructured<'_>, ct: &str) -> Result<Bytes> {
        if ct == JSON && !rare(u, 1, 8)? {
            let n = u.int_in_range(1u8..=3)?;
            let items: Vec<String> = (0..n).map(|i| format!("{{\"i\":{i}}}")).collect();
            // JSON streams take canonical NDJSON: every record ends in `\n`.
            return Ok(Bytes::from(match u.int_in_range(0u8..=3)? {
                0 => items.iter().map(|i| format!("{i}\n")).collect::<String>(),
                1 => format!("[{}]\n", items.join(",")),
                2 => "\n".to_string(),
                _ => items.join(""), // no final newline: rejected
            }));
        }
        let len = u.int_in_range(1u8..=24)?;
        Ok(Bytes::from(vec![u.arbitrary::<u8>()?; usize::from(len)]))
    }

    fn producer(&mut self, u: &mut Unstructured<'_>) -> Result<Option<ProducerRequest>> {
        if !rare(u, 1, 3)? {
            return Ok(None);
        }
        let which = usize::from(u.int_in_range(0u8..=1)?);
        let producer_seq = match u.int_in_range(0u8..=3)? {
            0 => self.seqs[which].saturating_sub(1),
            1 => u64::from(u.arbitrary::<u8>()?),
            _ => {
                self.seqs[which] += 1;
                self.seqs[which] - 1
            }
        };
        Ok(Some(ProducerRequest {
            producer_id: ["p1", "p2"][which].to_string(),
            producer_epoch: u64::from(u.int_in_range(0u8..=1)?),
            producer_seq,
        }))
    }

    fn external(&mut self, u: &mut Unstructured<'_>) -> Result<ExternalPayloadRef> {
        self.objects += 1;
        let payload_len = u64::from(u.int_in_range(0u16..=4096)?);
        Ok(ExternalPayloadRef {
            s3_path: format!("ext/{}", self.objects),
            payload_len,
            object_size: payload_len + u64::from(u.int_in_range(0u8..=3)?),
        })
    }

    fn offset(
        &self,
        u: &mut Unstructured<'_>,
        m: &StreamStateMachine,
        id: &BucketStreamId,
    ) -> Result<u64> {
        let tail = m.head(id).map_or(0, |h| h.tail_offset);
        Ok(match u.int_in_range(0u8..=3)? {
            0 => tail,
            1 => 0,
            2 => u.int_in_range(0..=tail)?,
            _ => tail + u64::from(u.int_in_range(1u8..=9)?),
        })
    }

    fn flush_chunk(
        &mut self,
        u: &mut Unstructured<'_>,
        m: &StreamStateMachine,
        id: &BucketStreamId,
    ) -> Result<ColdChunkRef> {
        self.objects += 1;
        let planned = m
            .plan_cold_flush(id, 0, 64 - usize::from(u.int_in_range(0u8..=63)?))
            .ok()
            .flatten();
        let mut chunk = ColdChunkRef {
            s3_path: format!("cold/{}", self.objects),
            ..ColdChunkRef::default()
        };
        match planned {
            Some(c) if !rare(u, 1, 8)? => {
                chunk.start_offset = c.start_offset;
                chunk.end_offset = c.end_offset;
                chunk.object_size = c.end_offset - c.start_offset;
                chunk.payload_digest = c.payload_digest;
            }
            _ => {
                chunk.start_offset = self.offset(u, m, id)?;
                chunk.end_offset = self.offset(u, m, id)?;
                chunk.object_size = chunk.end_offset.saturating_sub(chunk.start_offset);
            }
        }
        Ok(chunk)
    }

    /// One command against the current state of `m`.
    fn command(
        &mut self,
        input: &mut Unstructured<'_>,
        m: &StreamStateMachine,
    ) -> Result<StreamCommand> {
        let record = input.bytes(RECORD.min(input.len()))?;
        let u = &mut Unstructured::new(record);
        let kind = u.arbitrary::<u8>()? % KINDS;
        let (stream_id, own) = streams()[usize::from(u.arbitrary::<u8>()?) % 4].clone();
        let bucket_id = BUCKETS[usize::from(u.arbitrary::<u8>()?) % BUCKETS.len()].to_string();
        Ok(match kind {
            0 => StreamCommand::CreateBucket { bucket_id },
            1 => StreamCommand::DeleteBucket { bucket_id },
            2 => StreamCommand::PurgeBucket { bucket_id },
            3 => StreamCommand::SetBucketQuota {
                bucket_id,
                max_streams: u.arbitrary::<Option<u8>>()?.map(u64::from),
                max_retained_bytes: u.arbitrary::<Option<u8>>()?.map(u64::from),
            },
            4 | 5 => {
                let content_type = self.content_type(u, own)?.unwrap_or_default();
                StreamCommand::CreateStream {
                    initial_payload: self.payload(u, &content_type)?,
                    content_type,
                    close_after: rare(u, 1, 10)?,
                    stream_seq: None,
                    producer: self.producer(u)?,
                    stream_ttl_seconds: u.arbitrary::<Option<u8>>()?.map(u64::from),
                    stream_expires_at_ms: None,
                    attrs: None,
                    now_ms: self.now_ms(u)?,
                    stream_id,
                }
            }
            6 => StreamCommand::CreateExternal {
                content_type: own.to_string(),
                initial_payload: self.external(u)?,
                record_ends: Vec::new(),
                close_after: false,
                stream_seq: None,
                producer: None,
                stream_ttl_seconds: None,
                stream_expires_at_ms: None,
                attrs: None,
                now_ms: self.now_ms(u)?,
                stream_id,
            },
            7..=9 => {
                let content_type = self.content_type(u, own)?;
                StreamCommand::Append {
                    payload: self.payload(u, content_type.as_deref().unwrap_or(own))?,
                    content_type,
                    close_after: rare(u, 1, 20)?,
                    stream_seq: None,
                    producer: self.producer(u)?,
                    now_ms: self.now_ms(u)?,
                    record_match: None,
                    stream_id,
                }
            }
            10 => StreamCommand::AppendExternal {
                content_type: self.content_type(u, own)?,
                payload: self.external(u)?,
                record_ends: Vec::new(),
                close_after: false,
                stream_seq: None,
                producer: self.producer(u)?,
                now_ms: self.now_ms(u)?,
                record_match: None,
                stream_id,
            },
            11 => {
                let content_type = self.content_type(u, own)?;
                let n = u.int_in_range(0u8..=3)?;
                let mut payloads = Vec::new();
                for _ in 0..n {
                    payloads.push(self.payload(u, content_type.as_deref().unwrap_or(own))?);
                }
                StreamCommand::AppendBatch {
                    content_type,
                    payloads,
                    producer: self.producer(u)?,
                    now_ms: self.now_ms(u)?,
                    stream_id,
                }
            }
            12 => StreamCommand::PublishSnapshot {
                snapshot_offset: self.offset(u, m, &stream_id)?,
                content_type: u.choose(&[JSON, OCTET])?.to_string(),
                payload: Bytes::from(vec![1u8; usize::from(u.int_in_range(0u8..=3)?)]),
                expected_digest: None,
                now_ms: self.now_ms(u)?,
                stream_id,
            },
            13 => {
                // P2: above 0 only behind a cold frontier above 0.
                let cold = m
                    .snapshot_entries()
                    .any(|e| e.metadata.stream_id == stream_id && e.cold_frontier_offset > 0);
                let retained_offset = if cold {
                    self.offset(u, m, &stream_id)?
                } else {
                    0
                };
                StreamCommand::AdvanceRetention {
                    retained_offset,
                    now_ms: self.now_ms(u)?,
                    stream_id,
                }
            }
            14 => StreamCommand::FlushCold {
                chunk: self.flush_chunk(u, m, &stream_id)?,
                stream_id,
            },
            15 => StreamCommand::TouchStreamAccess {
                now_ms: self.now_ms(u)?,
                renew_ttl: u.arbitrary()?,
                stream_id,
            },
            16 => StreamCommand::Close {
                stream_seq: None,
                producer: self.producer(u)?,
                now_ms: self.now_ms(u)?,
                stream_id,
            },
            _ => {
                if rare(u, 1, 2)? {
                    let pending = m.pending_cold_gc_batch(usize::MAX);
                    StreamCommand::AckColdGc {
                        up_to_seq: pending.last().map_or(0, |e| e.seq),
                    }
                } else {
                    StreamCommand::DeleteStream { stream_id }
                }
            }
        })
    }
}

fn external_target(command: &StreamCommand) -> Option<&BucketStreamId> {
    match command {
        StreamCommand::CreateExternal { stream_id, .. }
        | StreamCommand::AppendExternal { stream_id, .. } => Some(stream_id),
        _ => None,
    }
}

fn restore_via_json(
    snapshot: &StreamSnapshot,
) -> std::result::Result<StreamStateMachine, StreamSnapshotError> {
    let text = serde_json::to_vec(snapshot).expect("to json");
    let back: StreamSnapshot = serde_json::from_slice(&text).expect("from json");
    assert_eq!(&back, snapshot, "snapshot JSON round trip");
    StreamStateMachine::restore(back)
}

/// The machine after the setup and the first `split` commands of `u`,
/// with the streams that took a successful external write.
fn prefix(
    u: &mut Unstructured<'_>,
    generator: &mut Gen,
    split: usize,
) -> Result<(StreamStateMachine, BTreeSet<BucketStreamId>)> {
    let mut a = StreamStateMachine::new();
    let mut external = BTreeSet::new();
    for bucket_id in ["bkt1", "bkt2"] {
        let response = a.apply(StreamCommand::CreateBucket {
            bucket_id: bucket_id.into(),
        });
        // A vocabulary the machine rejects would fuzz nothing but errors.
        assert!(
            matches!(response, StreamResponse::BucketCreated { .. }),
            "setup: {response:?}"
        );
    }
    for _ in 0..split {
        if u.is_empty() {
            break;
        }
        let command = generator.command(u, &a)?;
        let target = external_target(&command).cloned();
        let response = a.apply(command);
        if let Err(broken) = a.check_invariants() {
            panic!("after {response:?}: {broken}");
        }
        if let Some(id) = target
            && !matches!(response, StreamResponse::Error { .. })
        {
            external.insert(id);
        }
    }
    Ok((a, external))
}

/// The machine that the setup and every command record of `data` (records
/// only, no split byte) build: for tests of the vocabulary.
#[allow(dead_code)] // used by tests/tests/fuzz_regressions.rs only
pub(crate) fn machine_after(data: &[u8]) -> StreamStateMachine {
    let mut u = Unstructured::new(data);
    let mut generator = Gen {
        now: 1_000,
        objects: 0,
        seqs: [0; 2],
    };
    prefix(&mut u, &mut generator, usize::MAX)
        .map(|(a, _)| a)
        .unwrap_or_default()
}

fn run(data: &[u8]) -> Result<()> {
    let mut u = Unstructured::new(data);
    let split = usize::from(u.arbitrary::<u8>()? % 49);
    let mut generator = Gen {
        now: 1_000,
        objects: 0,
        seqs: [0; 2],
    };
    let (mut a, external) = prefix(&mut u, &mut generator, split)?;

    let snapshot = a.snapshot();
    let mut b = match StreamStateMachine::restore(snapshot.clone()) {
        Ok(b) => b,
        Err(StreamSnapshotError::PayloadLengthMismatch { stream_id, .. }) => {
            assert!(
                external.contains(&stream_id),
                "PayloadLengthMismatch on {stream_id}, which never took an external append"
            );
            assert!(restore_via_json(&snapshot).is_err());
            return Ok(());
        }
        Err(e) => panic!("a reachable state failed to restore: {e}"),
    };
    assert_eq!(b.snapshot(), snapshot, "P1: restore(S).snapshot() == S");
    let mut c = restore_via_json(&snapshot).expect("JSON-restored");
    assert_eq!(c.snapshot(), snapshot, "P1 through JSON text");
    let mut binary = Vec::new();
    encode_binary(&mut binary, &snapshot, &snapshot.streams).expect("encode binary");
    let d = strand_machine::restore_from(binary.as_slice()).expect("binary-restored");
    assert_eq!(d.snapshot(), snapshot, "P1 through the binary format");

    let mut i = 0;
    while !u.is_empty() && i < 16 {
        let command = generator.command(&mut u, &a)?;
        let shown = format!("{command:?}");
        let ra = a.apply(command.clone());
        let rb = b.apply(command.clone());
        let rc = c.apply(command);
        for (name, m) in [("live", &a), ("binary-restored", &b), ("JSON-restored", &c)] {
            if let Err(broken) = m.check_invariants() {
                panic!("suffix command {i} ({name}): {shown}: {broken}");
            }
        }
        assert_eq!(ra, rb, "suffix command {i}: {shown}");
        assert_eq!(ra, rc, "suffix command {i} (JSON-restored): {shown}");
        let sa = a.snapshot();
        assert_eq!(
            sa,
            b.snapshot(),
            "snapshot after suffix command {i}: {shown}"
        );
        assert_eq!(
            sa,
            c.snapshot(),
            "snapshot after suffix command {i} (JSON-restored)"
        );
        i += 1;
    }
    Ok(())
}

/// One fuzz input: never a panic, restore equivalence holds.
pub(crate) fn check(data: &[u8]) {
    let _ = run(data);
}
