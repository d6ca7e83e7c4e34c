//! A tour of strand's state machine: buckets, streams, an idempotent
//! producer retry, JSON record coordinates, a cold flush, a published
//! snapshot with retention, and a snapshot/restore round trip.
//!
//! Run with `cargo run -p strand --example quickstart`.

use bytes::Bytes;
use strand::{
    BucketStreamId, ColdChunkRef, ProducerRequest, StreamCommand, StreamResponse,
    StreamStateMachine,
};

fn show(step: &str, response: &StreamResponse) {
    println!(
        "{step:<44} -> {}",
        serde_json::to_string(response).unwrap_or_default()
    );
}

fn append(
    id: &BucketStreamId,
    ct: &str,
    body: &str,
    producer: Option<ProducerRequest>,
) -> StreamCommand {
    StreamCommand::Append {
        stream_id: id.clone(),
        content_type: Some(ct.into()),
        payload: Bytes::copy_from_slice(body.as_bytes()),
        close_after: false,
        stream_seq: None,
        producer,
        now_ms: 1_000,
        record_match: None,
    }
}

fn create(id: &BucketStreamId, ct: &str) -> StreamCommand {
    StreamCommand::CreateStream {
        stream_id: id.clone(),
        content_type: ct.into(),
        initial_payload: Bytes::new(),
        close_after: false,
        stream_seq: None,
        producer: None,
        stream_ttl_seconds: None,
        stream_expires_at_ms: None,
        attrs: None,
        now_ms: 1_000,
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut m = StreamStateMachine::new();
    show(
        "create bucket acme",
        &m.apply(StreamCommand::CreateBucket {
            bucket_id: "acme".into(),
        }),
    );

    let log = BucketStreamId::new("acme", "log");
    show(
        "create acme/log (text/plain)",
        &m.apply(create(&log, "text/plain")),
    );
    let writer = ProducerRequest {
        producer_id: "w".into(),
        producer_epoch: 0,
        producer_seq: 0,
    };
    show(
        "append 'hello ' as producer w/0/0",
        &m.apply(append(&log, "text/plain", "hello ", Some(writer.clone()))),
    );
    show(
        "retry w/0/0 (deduplicated)",
        &m.apply(append(&log, "text/plain", "ignored", Some(writer))),
    );
    show(
        "append 'world'",
        &m.apply(append(&log, "text/plain", "world", None)),
    );
    let read = m.read(&log, 0, 64).map_err(|e| format!("{e:?}"))?;
    println!(
        "{:<44} -> {:?}",
        "read acme/log from 0",
        String::from_utf8_lossy(&read.payload)
    );

    let events = BucketStreamId::new("acme", "events");
    show(
        "create acme/events (application/json)",
        &m.apply(create(&events, "application/json")),
    );
    show(
        "append two JSON records",
        &m.apply(append(
            &events,
            "application/json",
            "{\"a\":1}\n{\"b\":2}\n",
            None,
        )),
    );
    println!("{:<44} -> {:?}", "record range", m.record_range(&events));
    println!(
        "{:<44} -> {:?}",
        "offset of record 1",
        m.offset_for_record(&events, 1)
    );

    let candidate = m
        .plan_cold_flush(&log, 1, 6)
        .map_err(|e| format!("{e:?}"))?
        .ok_or("nothing to flush")?;
    show(
        "flush planned prefix [0,6) to the cold tier",
        &m.apply(StreamCommand::FlushCold {
            stream_id: log.clone(),
            chunk: ColdChunkRef {
                start_offset: candidate.start_offset,
                end_offset: candidate.end_offset,
                s3_path: "acme/log/000000.bin".into(),
                object_size: candidate.end_offset - candidate.start_offset,
                payload_digest: candidate.payload_digest,
                ..ColdChunkRef::default()
            },
        }),
    );
    show(
        "publish a snapshot at offset 6",
        &m.apply(StreamCommand::PublishSnapshot {
            stream_id: log.clone(),
            snapshot_offset: 6,
            content_type: "text/plain".into(),
            payload: Bytes::from_static(b"state@6"),
            expected_digest: None,
            now_ms: 2_000,
        }),
    );
    show(
        "advance retention to 6",
        &m.apply(StreamCommand::AdvanceRetention {
            stream_id: log.clone(),
            retained_offset: 6,
            now_ms: 2_000,
        }),
    );

    let snapshot = m.snapshot();
    let json = serde_json::to_string(&snapshot)?;
    let restored = StreamStateMachine::restore(serde_json::from_str(&json)?)?;
    println!(
        "{:<44} -> {} bytes of JSON, {} streams",
        "snapshot",
        json.len(),
        snapshot.streams.len()
    );
    println!(
        "{:<44} -> {}",
        "restored snapshot is identical",
        restored.snapshot() == snapshot
    );
    for usage in m.bucket_usage_report() {
        println!(
            "{:<44} -> {:?}",
            format!("usage of {}", usage.bucket_id),
            usage.usage
        );
    }
    Ok(())
}
