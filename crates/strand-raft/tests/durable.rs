//! A durable node through the engine: appends survive a restart at the
//! same offsets (snapshot + log replay), producer retries after the
//! restart are deduplicated, and damaged logs are handled as the log
//! store promises (torn tail truncated, middle damage an error naming the
//! file and offset).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use strand::{BucketStreamId, ProducerRequest, StreamCommand, StreamResponse};
use strand_engine::{Engine, EngineConfig, ManualClock, ReadFrom, WriteRequest};
use strand_raft::{
    DurableOptions, Fsync, LogError, LogStats, LogStore, RaftNode, group_dir, start_durable,
};

use strand_testkit::eventually;

fn config() -> EngineConfig {
    EngineConfig {
        groups: 2,
        ..EngineConfig::default()
    }
}

fn options(dir: &Path, snapshot_every: u64) -> DurableOptions {
    DurableOptions {
        snapshot_every,
        leader_timeout: Duration::from_secs(20),
        ..DurableOptions::new(dir)
    }
}

async fn open(dir: &Path, snapshot_every: u64) -> Engine {
    open_node(dir, snapshot_every).await.into_engine()
}

async fn open_node(dir: &Path, snapshot_every: u64) -> RaftNode {
    start_durable(
        config(),
        Arc::new(ManualClock::new(1_000)),
        &options(dir, snapshot_every),
    )
    .await
    .unwrap()
}

/// The log writer counters of every group together.
fn log_totals(node: &RaftNode) -> LogStats {
    node.status()
        .iter()
        .map(|s| s.log)
        .fold(LogStats::default(), LogStats::combined)
}

fn create(id: &BucketStreamId) -> StreamCommand {
    StreamCommand::CreateStream {
        stream_id: id.clone(),
        content_type: "text/plain".into(),
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

fn write(id: &BucketStreamId, body: Vec<u8>, seq: Option<u64>) -> WriteRequest {
    WriteRequest {
        stream_id: id.clone(),
        content_type: Some("text/plain".into()),
        media_type_match: true,
        payload: Bytes::from(body),
        close: false,
        stream_seq: None,
        producer: seq.map(|s| ProducerRequest {
            producer_id: "writer".into(),
            producer_epoch: 0,
            producer_seq: s,
        }),
        record_match: None,
    }
}

fn body(i: u64) -> Vec<u8> {
    format!("append-{i:05};").into_bytes()
}

/// Appends `n` bodies with producer seqs from `first`; returns each
/// append's `(offset, next_offset)`.
async fn append_all(e: &Engine, id: &BucketStreamId, first: u64, n: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for i in first..first + n {
        let outcome = e.write(write(id, body(i), Some(i))).await.unwrap();
        match outcome.response {
            StreamResponse::Appended {
                offset,
                next_offset,
                deduplicated: false,
                ..
            } => out.push((offset, next_offset)),
            other => panic!("append {i}: {other:?}"),
        }
    }
    out
}

async fn read_all(e: &Engine, id: &BucketStreamId) -> Vec<u8> {
    let read = e
        .read(id.clone(), ReadFrom::Start, usize::MAX)
        .await
        .unwrap()
        .unwrap();
    read.slices.iter().flat_map(|s| s.iter().copied()).collect()
}

fn expected(first: u64, n: u64) -> Vec<u8> {
    (first..first + n).flat_map(body).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_survive_a_restart_at_their_offsets_and_retries_are_deduplicated() {
    let tmp = tempfile::tempdir().unwrap();
    // A snapshot every 40 entries: the restart restores a snapshot, then
    // replays the log after it; the purged segments' entries are gone.
    let ids = [
        BucketStreamId::new("acme", "a"),
        BucketStreamId::new("acme", "b"),
    ];
    let mut offsets = Vec::new();
    {
        let node = open_node(tmp.path(), 40).await;
        let e = node.engine().clone();
        for id in &ids {
            let r = e.create_stream(create(id), true).await.unwrap();
            assert!(matches!(r, StreamResponse::Created { .. }), "{r:?}");
            offsets.push(append_all(&e, id, 0, 150).await);
        }
        let status = e.group_status();
        assert_eq!(status.len(), 2);
        assert!(status.iter().all(|s| s.leader == Some(1)), "{status:?}");
        assert_eq!(
            node.status()
                .into_iter()
                .map(|s| s.replication)
                .collect::<Vec<_>>(),
            status
        );
        // Every append went through the log writer and an fsync.
        let log = log_totals(&node);
        assert!(log.entries >= 300 && log.synced_entries >= 300, "{log:?}");
        assert!(log.fsyncs >= 1 && log.fsyncs <= log.writes, "{log:?}");
        e.shutdown().await;
    }
    assert!(
        std::fs::metadata(group_dir(tmp.path(), 0).join("snapshot.meta")).is_ok()
            || std::fs::metadata(group_dir(tmp.path(), 1).join("snapshot.meta")).is_ok()
    );
    let e = open(tmp.path(), 40).await;
    for (id, offsets) in ids.iter().zip(&offsets) {
        assert_eq!(read_all(&e, id).await, expected(0, 150), "{id}");
        // The retry of the last append is a duplicate, answered with its
        // original offsets; the next sequence number lands at the tail.
        let retry = e.write(write(id, body(149), Some(149))).await.unwrap();
        match retry.response {
            StreamResponse::Appended {
                offset,
                next_offset,
                deduplicated: true,
                ..
            } => assert_eq!((offset, next_offset), offsets[149]),
            other => panic!("retry: {other:?}"),
        }
        let next = append_all(&e, id, 150, 1).await;
        assert_eq!(next[0].0, offsets[149].1);
    }
    e.shutdown().await;
    // A third start sees the post-restart appends too.
    let e = open(tmp.path(), 40).await;
    for id in &ids {
        assert_eq!(read_all(&e, id).await, expected(0, 151));
    }
    e.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_dir_made_with_other_groups_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    open(tmp.path(), 1000).await.shutdown().await;
    let err = start_durable(
        EngineConfig {
            groups: 3,
            ..EngineConfig::default()
        },
        Arc::new(ManualClock::new(1_000)),
        &options(tmp.path(), 1000),
    )
    .await
    .err()
    .unwrap();
    assert!(err.to_string().contains("2 groups"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_dir_in_use_is_refused_until_its_node_stops() {
    let tmp = tempfile::tempdir().unwrap();
    let first = open(tmp.path(), 1000).await;
    // A second node on the same directory (another open file description,
    // as another process would have) is refused, naming the directory.
    let err = start_durable(
        config(),
        Arc::new(ManualClock::new(1_000)),
        &options(tmp.path(), 1000),
    )
    .await
    .err()
    .unwrap();
    let text = err.to_string();
    assert!(
        matches!(err, strand_raft::StartError::Locked { .. }),
        "{text}"
    );
    assert!(text.contains(&tmp.path().display().to_string()), "{text}");
    assert!(text.contains("in use by another process"), "{text}");
    // The running node is unharmed; once it stops, the directory opens.
    let id = BucketStreamId::new("acme", "locked");
    let r = first.create_stream(create(&id), true).await.unwrap();
    assert!(matches!(r, StreamResponse::Created { .. }), "{r:?}");
    append_all(&first, &id, 0, 3).await;
    first.shutdown().await;
    let again = open(tmp.path(), 1000).await;
    assert_eq!(read_all(&again, &id).await, expected(0, 3));
    again.shutdown().await;
}

/// The record offsets of a segment file (its header format: `len`,
/// `!len`, crc, payload).
fn record_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut at = 0;
    let mut out = Vec::new();
    while at + 16 <= bytes.len() {
        out.push(at);
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        at += 16 + len;
    }
    out
}

/// A log with entries in it: one stream and `n` appends, all in group
/// `group`'s single segment.
async fn written_log(dir: &Path, n: u64) -> (PathBuf, BucketStreamId) {
    let e = open(dir, 100_000).await;
    let id = BucketStreamId::new("acme", "torn");
    e.create_stream(create(&id), true).await.unwrap();
    append_all(&e, &id, 0, n).await;
    let group = e.group_for(&id);
    e.shutdown().await;
    let seg = group_dir(dir, group).join("log").join("0000000001.seg");
    assert!(seg.exists());
    (seg, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_tail_is_truncated_and_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let (seg, id) = written_log(tmp.path(), 20).await;
    let bytes = std::fs::read(&seg).unwrap();
    let last = *record_offsets(&bytes).last().unwrap();
    // Cut the last record in the middle.
    let cut = last + (bytes.len() - last) / 2;
    std::fs::write(&seg, &bytes[..cut]).unwrap();
    let (store, recovery) = LogStore::open(seg.parent().unwrap(), Fsync::Always).unwrap();
    store.close();
    let (file, offset, _reason) = recovery.truncated.unwrap();
    assert_eq!(file, seg);
    assert_eq!(offset, last as u64);
    assert_eq!(std::fs::metadata(&seg).unwrap().len(), last as u64);
    // The node starts on the truncated log and serves what it holds.
    let e = open(tmp.path(), 100_000).await;
    let data = read_all(&e, &id).await;
    assert!(expected(0, 20).starts_with(&data));
    e.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_byte_in_the_last_record_is_truncated() {
    let tmp = tempfile::tempdir().unwrap();
    let (seg, _) = written_log(tmp.path(), 10).await;
    let mut bytes = std::fs::read(&seg).unwrap();
    let last = *record_offsets(&bytes).last().unwrap();
    let n = bytes.len();
    bytes[n - 1] ^= 0x20;
    std::fs::write(&seg, &bytes).unwrap();
    let (store, recovery) = LogStore::open(seg.parent().unwrap(), Fsync::Always).unwrap();
    store.close();
    assert_eq!(recovery.truncated.unwrap().1, last as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_byte_in_a_middle_record_fails_startup_with_file_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let (seg, _) = written_log(tmp.path(), 10).await;
    let mut bytes = std::fs::read(&seg).unwrap();
    let records = record_offsets(&bytes);
    let middle = records[records.len() / 2];
    bytes[middle + 20] ^= 0x01;
    std::fs::write(&seg, &bytes).unwrap();
    let err = LogStore::open(seg.parent().unwrap(), Fsync::Always)
        .err()
        .unwrap();
    match &err {
        LogError::Corrupt { path, offset, .. } => {
            assert_eq!(path, &seg);
            assert_eq!(*offset, middle as u64);
        }
        other => panic!("{other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains(&seg.display().to_string()), "{text}");
    assert!(text.contains(&format!("byte {middle}")), "{text}");
    // The node refuses to start on it, with the same message.
    let start = start_durable(
        config(),
        Arc::new(ManualClock::new(1_000)),
        &options(tmp.path(), 100_000),
    )
    .await
    .err()
    .unwrap();
    assert!(
        start.to_string().contains(&format!("byte {middle}")),
        "{start}"
    );
}

/// Concurrent writers: what queues behind a proposal in flight is
/// proposed as one batch entry; every append is answered with its own
/// outcome, lands exactly once, and survives a restart (the batches
/// replay).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_batched_into_entries_answer_each_and_replay() {
    let tmp = tempfile::tempdir().unwrap();
    let ids: Vec<BucketStreamId> = (0..8)
        .map(|i| BucketStreamId::new("acme", format!("c{i}")))
        .collect();
    let sorted = |bytes: Vec<u8>| {
        let mut parts: Vec<Vec<u8>> = bytes
            .split(|b| *b == b';')
            .filter(|p| !p.is_empty())
            .map(<[u8]>::to_vec)
            .collect();
        parts.sort();
        parts
    };
    let want = sorted(expected(0, 40));
    {
        let node = open_node(tmp.path(), 20_000).await;
        let e = node.engine().clone();
        for id in &ids {
            e.create_stream(create(id), true).await.unwrap();
        }
        let mut tasks = Vec::new();
        for id in &ids {
            for i in 0..40u64 {
                let (e, id) = (e.clone(), id.clone());
                tasks.push(tokio::spawn(async move {
                    e.write(write(&id, body(i), None)).await
                }));
            }
        }
        for task in tasks {
            match task.await.unwrap().unwrap().response {
                StreamResponse::Appended {
                    deduplicated: false,
                    ..
                } => {}
                other => panic!("{other:?}"),
            }
        }
        for id in &ids {
            assert_eq!(sorted(read_all(&e, id).await), want, "{id}");
        }
        let log = log_totals(&node);
        // Each append is one proposal, in a batch entry or alone.
        assert!(log.proposals >= 320 + 8, "{log:?}");
        e.shutdown().await;
    }
    let e = open(tmp.path(), 20_000).await;
    for id in &ids {
        assert_eq!(sorted(read_all(&e, id).await), want, "{id}");
    }
    e.shutdown().await;
}

/// Whether a segment file holds a purge record (kind 5).
fn holds_a_purge(seg: &Path) -> bool {
    let bytes = std::fs::read(seg).unwrap_or_default();
    record_offsets(&bytes)
        .into_iter()
        .any(|at| bytes.get(at + 16) == Some(&5))
}

/// A few large appends, far fewer entries than `snapshot_every`, pass
/// `snapshot_log_bytes`: the group snapshots by bytes, then purges its
/// log up to the snapshot (a single node keeps nothing behind it). A
/// restart restores the snapshot, replays the entries after it from the
/// log files, and serves every byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_appends_snapshot_by_bytes_and_purge_the_log_by_bytes() {
    const LIMIT: u64 = 256 << 10;
    let tmp = tempfile::tempdir().unwrap();
    let options = DurableOptions {
        snapshot_every: 100_000,
        snapshot_log_bytes: LIMIT,
        leader_timeout: Duration::from_secs(20),
        ..DurableOptions::new(tmp.path())
    };
    let clock = || Arc::new(ManualClock::new(1_000));
    let id = BucketStreamId::new("acme", "large");
    let large = |i: u64| vec![b'a' + (i % 26) as u8; 32 << 10];
    let want: Vec<u8> = (0..24).flat_map(large).collect();
    let node = start_durable(config(), clock(), &options).await.unwrap();
    let e = node.engine().clone();
    let group = e.group_for(&id);
    e.create_stream(create(&id), true).await.unwrap();
    // 24 appends of 32 KiB: 768 KiB, three times the limit.
    for i in 0..24 {
        e.write(write(&id, large(i), Some(i))).await.unwrap();
    }
    let seg = group_dir(tmp.path(), group)
        .join("log")
        .join("0000000001.seg");
    let snapshot = eventually(
        "a snapshot and a purge by bytes",
        Duration::from_secs(30),
        || async {
            let status = node.status().into_iter().nth(group);
            let snapshot = status.and_then(|s| s.snapshot).unwrap_or_default();
            (snapshot.built >= 1 && holds_a_purge(&seg)).then_some(snapshot)
        },
    )
    .await;
    // The entries: a blank, the membership, the create, the appends.
    let index = snapshot.index.unwrap();
    assert!(index < 30, "{snapshot:?}");
    assert_eq!(read_all(&e, &id).await, want);
    e.shutdown().await;
    // Only the entries after a snapshot stay (at most LIMIT, eight 32 KiB
    // entries, after each); the entries after the latest are replayed.
    let (log, recovery) = LogStore::open(seg.parent().unwrap(), Fsync::Always).unwrap();
    log.close();
    assert!(recovery.entries < 24, "{recovery:?}");
    let e = start_durable(config(), clock(), &options)
        .await
        .unwrap()
        .into_engine();
    assert_eq!(read_all(&e, &id).await, want);
    e.shutdown().await;
}
