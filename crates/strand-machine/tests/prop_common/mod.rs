//! Shared support for the `prop_*` property tests.
//!
//! A test case is a list of [`Op`]s: an operation kind plus a vector of raw
//! entropy words. [`Materializer`] turns each op into a concrete [`Action`]
//! (a command, a direct method call or a query) by looking at the machine's
//! current state, so most generated commands hit existing buckets and
//! streams, use the stream's own content type, the next producer sequence,
//! a flush chunk planned by `plan_cold_flush`, and so on. Entropy word 0
//! always selects the plain, most valid choice, so shrinking moves towards
//! simple valid commands.
//!
//! [`Mode::Wild`] widens every pool with nonsense (invalid ids, reserved
//! names, extreme numbers, blank paths, mismatched content types);
//! [`Mode::Valid`] keeps nonsense rare.

#![allow(dead_code)] // each test binary uses a different subset

pub(crate) mod materialize;
pub(crate) mod query;
pub(crate) mod run;

use proptest::prelude::*;
use strand_model::BucketStreamId;

pub(crate) use materialize::Materializer;
#[allow(unused_imports)]
pub(crate) use query::Query;
#[allow(unused_imports)]
pub(crate) use run::{Action, Outcome, run};

/// JSON record content type.
pub(crate) const JSON: &str = "application/json";
/// Binary content type.
pub(crate) const OCTET: &str = "application/octet-stream";
/// Text content type.
pub(crate) const TEXT: &str = "text/plain";

/// Values that tend to hit boundaries: zero, small, the JS safe-integer
/// limit and its successor, `u32::MAX + 1`, and the top of `u64`.
pub(crate) const EXTREMES: [u64; 10] = [
    0,
    1,
    2,
    3,
    9_007_199_254_740_991,
    9_007_199_254_740_992,
    1 << 32,
    u64::MAX / 1000 + 1,
    u64::MAX - 1,
    u64::MAX,
];

/// How far generated commands stray from valid ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Mostly valid commands against existing state.
    Valid,
    /// Frequent nonsense.
    Wild,
}

/// What an op does; its operands come from the entropy words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    CreateBucket,
    DeleteBucket,
    PurgeBucket,
    SetQuota,
    CreateStream,
    CreateExternal,
    Append,
    AppendExternal,
    AppendBatch,
    Close,
    DeleteStream,
    Touch,
    UpdateAttrs,
    Publish,
    Retention,
    Flush,
    Compact,
    AckGc,
    Import,
    DirectAppend,
    DirectBatch,
    Transaction,
    Query,
}

/// One generated operation.
#[derive(Debug, Clone)]
pub(crate) struct Op {
    /// What to do.
    pub(crate) kind: Kind,
    /// Operand entropy, consumed left to right (missing words read as 0).
    pub(crate) ent: Vec<u64>,
}

/// Relative weights of the kinds per mode.
fn weights(mode: Mode) -> Vec<(u32, Kind)> {
    let purge = if mode == Mode::Valid { 1 } else { 3 };
    vec![
        (4, Kind::CreateBucket),
        (1, Kind::DeleteBucket),
        (purge, Kind::PurgeBucket),
        (2, Kind::SetQuota),
        (8, Kind::CreateStream),
        (2, Kind::CreateExternal),
        (14, Kind::Append),
        (3, Kind::AppendExternal),
        (4, Kind::AppendBatch),
        (1, Kind::Close),
        (2, Kind::DeleteStream),
        (2, Kind::Touch),
        (2, Kind::UpdateAttrs),
        (5, Kind::Publish),
        (7, Kind::Retention),
        (7, Kind::Flush),
        (3, Kind::Compact),
        (2, Kind::AckGc),
        (2, Kind::Import),
        (3, Kind::DirectAppend),
        (3, Kind::DirectBatch),
        (3, Kind::Transaction),
        (10, Kind::Query),
    ]
}

/// A strategy for one op in `mode`.
pub(crate) fn op(mode: Mode) -> impl Strategy<Value = Op> {
    let kinds: Vec<Kind> = weights(mode)
        .into_iter()
        .flat_map(|(w, k)| std::iter::repeat_n(k, w as usize))
        .collect();
    (
        prop::sample::select(kinds),
        prop::collection::vec(any::<u64>(), 32),
    )
        .prop_map(|(kind, ent)| Op { kind, ent })
}

/// A strategy for a sequence of up to `max_len` ops.
pub(crate) fn ops(mode: Mode, max_len: usize) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(mode), 1..=max_len)
}

/// Reads entropy words in order.
pub(crate) struct Ent<'a> {
    words: &'a [u64],
    pos: usize,
}

impl<'a> Ent<'a> {
    /// A reader over `words`.
    pub(crate) fn new(words: &'a [u64]) -> Self {
        Self { words, pos: 0 }
    }

    /// The next word (0 once the words run out).
    pub(crate) fn word(&mut self) -> u64 {
        let w = self.words.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        w
    }

    /// A value in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.word() % n as u64) as usize
    }

    /// True with probability `pct` percent; word 0 gives false.
    pub(crate) fn chance(&mut self, pct: u64) -> bool {
        self.word() % 100 >= 100 - pct.min(100)
    }

    /// One element of a non-empty slice.
    pub(crate) fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }

    /// One of [`EXTREMES`].
    pub(crate) fn extreme(&mut self) -> u64 {
        self.pick(&EXTREMES)
    }
}

/// The id and content-type pools of a mode.
#[derive(Debug, Clone)]
pub(crate) struct Pools {
    /// Valid bucket ids.
    pub(crate) buckets: Vec<String>,
    /// Invalid or unknown bucket ids (empty in valid mode).
    pub(crate) odd_buckets: Vec<String>,
    /// Valid stream ids with the content type they are normally created
    /// with. No two share bucket and local stream id (no "affinity ties",
    /// see `prop_restore_equivalence.rs`).
    pub(crate) streams: Vec<(BucketStreamId, &'static str)>,
    /// Affinity ties, invalid and reserved ids (empty in valid mode).
    pub(crate) odd_streams: Vec<(BucketStreamId, &'static str)>,
}

impl Pools {
    /// The pools for `mode`.
    pub(crate) fn new(mode: Mode) -> Self {
        let buckets = vec!["bkt1".to_string(), "bkt2".to_string()];
        let streams = vec![
            (BucketStreamId::new("bkt1", "s1"), JSON),
            (BucketStreamId::new("bkt1", "s2"), OCTET),
            (BucketStreamId::with_affinity("bkt1", "k", "t1"), JSON),
            (BucketStreamId::with_affinity("bkt1", "k", "t2"), TEXT),
            (BucketStreamId::new("bkt2", "s1"), OCTET),
            (BucketStreamId::with_affinity("bkt2", "k", "t3"), JSON),
        ];
        let (mut odd_buckets, mut odd_streams) = (Vec::new(), Vec::new());
        if mode == Mode::Wild {
            odd_buckets.extend(["X", "", "bkt3", "BAD!", "a/b"].map(String::from));
            odd_streams.extend([
                (BucketStreamId::with_affinity("bkt1", "j", "s1"), OCTET),
                (BucketStreamId::with_affinity("bkt1", "k", "s1"), JSON),
                (BucketStreamId::new("bkt1", "streams"), OCTET),
                (
                    BucketStreamId::with_affinity("bkt1", "k", "snapshot"),
                    OCTET,
                ),
                (BucketStreamId::new("bkt1", "snapshot"), TEXT),
                (BucketStreamId::new("bkt1", ""), OCTET),
                (BucketStreamId::new("bkt1", "a/b"), OCTET),
                (BucketStreamId::with_affinity("bkt1", "", "s1"), OCTET),
                (BucketStreamId::new("X", "s1"), OCTET),
                (BucketStreamId::new("bkt3", "s1"), ""),
                (
                    BucketStreamId::new("bkt2", "s2"),
                    "application/json; charset=utf-8",
                ),
            ]);
        }
        Self {
            buckets,
            odd_buckets,
            streams,
            odd_streams,
        }
    }

    /// These pools without streams that share bucket and local stream id
    /// with another pool stream (the affinity ties).
    pub(crate) fn without_ties(mut self) -> Self {
        let all: Vec<BucketStreamId> = self.all_streams().map(|(s, _)| s.clone()).collect();
        self.odd_streams.retain(|(s, _)| {
            !all.iter()
                .any(|o| o != s && o.bucket_id == s.bucket_id && o.stream_id == s.stream_id)
        });
        self
    }

    /// Every bucket id of the pools.
    pub(crate) fn all_buckets(&self) -> impl Iterator<Item = &String> {
        self.buckets.iter().chain(&self.odd_buckets)
    }

    /// Every stream id of the pools.
    pub(crate) fn all_streams(&self) -> impl Iterator<Item = &(BucketStreamId, &'static str)> {
        self.streams.iter().chain(&self.odd_streams)
    }
}

/// The proptest configuration: `cases` cases (the `PROPTEST_CASES`
/// environment variable overrides it, for longer runs), no regression files
/// (the integration-test layout has no `lib.rs` for proptest to anchor
/// them).
pub(crate) fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}
