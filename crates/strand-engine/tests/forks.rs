//! Forks across groups (`docs/forks.md` §6): with eight groups a fork and
//! its source almost never share one, so creation pins in one group and
//! creates in another, reads stitch pages from several groups, and the
//! janitor delivers unpins across groups until soft-deleted sources go.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use strand::{BucketStreamId, StreamCommand, StreamErrorCode, StreamResponse};
use strand_engine::{Engine, EngineConfig, ForkRequest, ManualClock, ReadFrom, WriteRequest};

const BUCKET: &str = "acme";

fn engine() -> Engine {
    Engine::start_with_clock(
        EngineConfig {
            groups: 8,
            ..EngineConfig::default()
        },
        Arc::new(ManualClock::new(1_000)),
    )
}

fn sid(i: usize) -> BucketStreamId {
    BucketStreamId::new(BUCKET, format!("s{i}"))
}

async fn create(
    e: &Engine,
    id: &BucketStreamId,
    content_type: &str,
    body: &[u8],
) -> StreamResponse {
    e.create_stream(
        StreamCommand::CreateStream {
            stream_id: id.clone(),
            content_type: content_type.into(),
            initial_payload: Bytes::copy_from_slice(body),
            close_after: false,
            stream_seq: None,
            producer: None,
            stream_ttl_seconds: None,
            stream_expires_at_ms: None,
            attrs: None,
            now_ms: 1_000,
        },
        true,
    )
    .await
    .unwrap()
}

async fn append(e: &Engine, id: &BucketStreamId, body: &[u8]) -> StreamResponse {
    e.write(WriteRequest {
        stream_id: id.clone(),
        content_type: Some("text/plain".into()),
        media_type_match: true,
        payload: Bytes::copy_from_slice(body),
        close: false,
        stream_seq: None,
        producer: None,
        record_match: None,
    })
    .await
    .unwrap()
    .response
}

fn request(
    fork: &BucketStreamId,
    source: &BucketStreamId,
    at: Option<u64>,
    sub: u64,
) -> ForkRequest {
    ForkRequest {
        stream_id: fork.clone(),
        source_id: source.clone(),
        fork_offset: at,
        sub_offset: sub,
        stream_ttl_seconds: None,
        stream_expires_at_ms: None,
        close: false,
        initial_payload: Bytes::new(),
        attrs: None,
    }
}

/// Every byte of a stream from its first offset, `page` bytes at a time.
async fn read_all(e: &Engine, id: &BucketStreamId, page: usize) -> Result<Vec<u8>, StreamResponse> {
    let mut out = Vec::new();
    let mut from = ReadFrom::Start;
    for _ in 0..10_000 {
        let read = e.read(id.clone(), from, page).await.unwrap()?;
        for slice in &read.slices {
            out.extend_from_slice(slice);
        }
        if read.up_to_date {
            return Ok(out);
        }
        assert!(read.next_offset > read.offset, "a read made no progress");
        from = ReadFrom::Offset(read.next_offset);
    }
    panic!("read of {id} did not end");
}

/// A small deterministic generator (no dependency, same sequence every run).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % below.max(1)
    }
}

/// Waits (bounded) until the janitor has delivered every unpin.
async fn settle(e: &Engine) {
    crate::eventually(
        "the janitor delivers every unpin",
        Duration::from_secs(10),
        || async {
            for g in 0..e.group_count() {
                if e.query_group(g, |m| m.has_pending_fork_unpins())
                    .await
                    .unwrap()
                {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_fork_chains_read_their_model_across_groups() {
    const STREAMS: usize = 10;
    for seed in 1..=6u64 {
        let e = engine();
        let mut rng = Lcg(seed);
        let mut model: Vec<Option<Vec<u8>>> = vec![None; STREAMS];
        for step in 0..120u64 {
            let s = usize::try_from(rng.next(STREAMS as u64)).unwrap();
            match rng.next(5) {
                0 => {
                    let body: Vec<u8> = (0..rng.next(20))
                        .map(|i| b'a' + ((step + i) % 26) as u8)
                        .collect();
                    if let StreamResponse::Created { .. } =
                        create(&e, &sid(s), "text/plain", &body).await
                    {
                        model[s] = Some(body);
                    }
                }
                1 | 2 => {
                    let body: Vec<u8> = (0..1 + rng.next(12))
                        .map(|i| b'A' + ((step + i) % 26) as u8)
                        .collect();
                    if let StreamResponse::Appended { .. } = append(&e, &sid(s), &body).await {
                        model[s].as_mut().unwrap().extend_from_slice(&body);
                    }
                }
                3 => {
                    let from = usize::try_from(rng.next(STREAMS as u64)).unwrap();
                    let Some(source) = model[from].clone() else {
                        continue;
                    };
                    let at = rng.next(source.len() as u64 + 1);
                    let sub = rng.next(3);
                    let r = e
                        .create_fork(request(&sid(s), &sid(from), Some(at), sub))
                        .await
                        .unwrap();
                    if let StreamResponse::Created { .. } = r {
                        let at = usize::try_from(at).unwrap();
                        let end = (at + usize::try_from(sub).unwrap()).min(source.len());
                        model[s] = Some(source[..end].to_vec());
                    }
                }
                _ => {
                    if let StreamResponse::Deleted = e.delete(sid(s)).await.unwrap() {
                        model[s] = None;
                    }
                }
            }
            // Every live stream reads as its model, in small and big pages.
            for (i, want) in model.iter().enumerate() {
                if let Some(want) = want {
                    for page in [3, 64 * 1024] {
                        let got = read_all(&e, &sid(i), page).await.unwrap();
                        assert_eq!(
                            &got, want,
                            "seed {seed} step {step} stream s{i} page {page}"
                        );
                    }
                }
            }
        }
        // Delete everything: soft-deleted sources go with their last fork.
        for _ in 0..2 {
            for s in 0..STREAMS {
                let _ = e.delete(sid(s)).await.unwrap();
                settle(&e).await;
            }
        }
        for g in 0..e.group_count() {
            let left = e
                .query_group(g, |m| m.snapshot().streams.len())
                .await
                .unwrap();
            assert_eq!(left, 0, "seed {seed}: group {g} keeps streams");
        }
        e.shutdown().await;
    }
}

#[tokio::test]
async fn sub_offsets_take_bytes_or_json_values() {
    let e = engine();
    let (bin, json) = (sid(0), sid(1));
    create(&e, &bin, "text/plain", b"first").await;
    append(&e, &bin, b"second").await;
    // Binary: the first 3 bytes of the message at the fork offset.
    let r = e
        .create_fork(request(&sid(2), &bin, Some(5), 3))
        .await
        .unwrap();
    assert!(
        matches!(r, StreamResponse::Created { next_offset: 8, .. }),
        "{r:?}"
    );
    assert_eq!(read_all(&e, &sid(2), 100).await.unwrap(), b"firstsec");
    // Past the message's end, or with no message at the offset: refused.
    let r = e
        .create_fork(request(&sid(3), &bin, Some(5), 7))
        .await
        .unwrap();
    assert_eq!(r.error_code(), Some(StreamErrorCode::InvalidFork));
    let r = e
        .create_fork(request(&sid(3), &bin, Some(11), 1))
        .await
        .unwrap();
    assert_eq!(r.error_code(), Some(StreamErrorCode::InvalidFork));
    // JSON: whole stored values.
    create(
        &e,
        &json,
        "application/json",
        b"{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n",
    )
    .await;
    let r = e
        .create_fork(request(&sid(4), &json, Some(0), 2))
        .await
        .unwrap();
    assert!(matches!(r, StreamResponse::Created { .. }), "{r:?}");
    assert_eq!(
        read_all(&e, &sid(4), 100).await.unwrap(),
        b"{\"a\":1}\n{\"b\":2}\n"
    );
    let r = e
        .create_fork(request(&sid(5), &json, Some(0), 4))
        .await
        .unwrap();
    assert_eq!(r.error_code(), Some(StreamErrorCode::InvalidFork));
    // A JSON fork offset inside a value is refused.
    let r = e
        .create_fork(request(&sid(5), &json, Some(3), 0))
        .await
        .unwrap();
    assert_eq!(r.error_code(), Some(StreamErrorCode::InvalidFork));
    // A refused fork leaves no pin behind: the source deletes for good.
    assert_eq!(
        e.delete(json.clone()).await.unwrap(),
        StreamResponse::Deleted
    );
    e.delete(sid(4)).await.unwrap();
    settle(&e).await;
    assert!(!e.is_soft_deleted(json.clone()).await.unwrap());
    assert!(e.head(json).await.unwrap().is_none());
}

#[tokio::test]
async fn a_repeated_fork_request_keeps_one_pin() {
    let e = engine();
    let (src, f) = (sid(0), sid(1));
    create(&e, &src, "text/plain", b"hello").await;
    for expected in [true, false] {
        let r = e.create_fork(request(&f, &src, None, 0)).await.unwrap();
        assert_eq!(
            matches!(r, StreamResponse::Created { .. }),
            expected,
            "{r:?}"
        );
        assert!(matches!(
            r,
            StreamResponse::Created { .. } | StreamResponse::AlreadyExists { .. }
        ));
    }
    let pins = e
        .query(&src, {
            let src = src.clone();
            move |m| {
                m.snapshot()
                    .streams
                    .into_iter()
                    .find(|s| s.metadata.stream_id == src)
                    .and_then(|s| s.fork)
                    .map_or(0, |f| f.fork_pins.len())
            }
        })
        .await
        .unwrap();
    assert_eq!(pins, 1);
}

#[tokio::test]
async fn a_fork_below_its_sources_fork_offset_reads_the_grandparent() {
    let e = engine();
    let (a, b, c) = (sid(0), sid(1), sid(2));
    create(&e, &a, "text/plain", b"abcdef").await;
    e.create_fork(request(&b, &a, Some(4), 0)).await.unwrap();
    append(&e, &b, b"XY").await;
    e.create_fork(request(&c, &b, Some(2), 0)).await.unwrap();
    append(&e, &c, b"Z").await;
    for page in [1, 2, 100] {
        assert_eq!(read_all(&e, &b, page).await.unwrap(), b"abcdXY");
        assert_eq!(read_all(&e, &c, page).await.unwrap(), b"abZ");
    }
    // A page may not run past a fork offset: reading `c` from 1 in one
    // page gives `b` then `Z`, never `a`'s `c`.
    let read = e
        .read(c.clone(), ReadFrom::Offset(1), 100)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.slices.concat(), b"bZ");
    assert!(read.up_to_date);
}
