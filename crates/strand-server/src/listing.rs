//! Listing a bucket's streams by name prefix, a page at a time
//! (`GET /__strand/streams/{bucket}`, `docs/operations.md`), and the same
//! listing for a subscription's glob backfill.
//!
//! Every group's machine keeps its streams ordered by path
//! (`[affinity/]stream`, [`strand::StreamStateMachine::streams_by_path`]).
//! A prefix of names maps onto a few ranges of paths
//! ([`crate::names::scan_ranges`]); each group reads its ranges from the
//! cursor on, checks each stream's name against the prefix and stops at
//! the page's length or after [`SCAN_BUDGET`] streams, saying where. The
//! page is the merge of the groups' answers up to the lowest place a group
//! stopped, so a call costs its page, never a scan of the node's streams.

use std::ops::Bound;

use serde::{Deserialize, Serialize};
use strand_engine::{Engine, EngineError, GroupQuery};

use crate::errors::ApiError;
use crate::names;

/// Streams a page holds unless `limit` says otherwise.
pub(crate) const DEFAULT_LIMIT: usize = 100;
/// The most streams a page may hold.
pub(crate) const MAX_LIMIT: usize = 1000;
/// The most streams one group looks at for one page.
const SCAN_BUDGET: usize = 4096;

/// A listing's query: `prefix`, `after` (the previous page's `next`) and
/// `limit`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ListQuery {
    /// Names start with this (empty: every stream).
    pub prefix: String,
    /// Continue after this cursor.
    pub after: Option<String>,
    /// At most this many streams.
    pub limit: usize,
}

impl Default for ListQuery {
    fn default() -> Self {
        Self {
            prefix: String::new(),
            after: None,
            limit: DEFAULT_LIMIT,
        }
    }
}

impl ListQuery {
    /// Parses a raw query string; unknown parameters are ignored.
    ///
    /// # Errors
    ///
    /// 400 for malformed encoding, a repeated parameter or a `limit` that
    /// is not a number from 1 to [`MAX_LIMIT`].
    pub(crate) fn parse(raw: Option<&str>) -> Result<Self, ApiError> {
        let mut out = Self::default();
        let mut seen = std::collections::BTreeSet::new();
        for pair in raw.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let key = crate::query::decode(key)?;
            if !["prefix", "after", "limit"].contains(&key.as_str()) {
                continue;
            }
            if !seen.insert(key.clone()) {
                return Err(ApiError::bad_request(format!(
                    "query parameter {key} given twice"
                )));
            }
            let value = crate::query::decode(value)?;
            match key.as_str() {
                "prefix" => out.prefix = value,
                "after" => out.after = Some(value),
                _ => {
                    out.limit = value
                        .parse()
                        .ok()
                        .filter(|n| (1..=MAX_LIMIT).contains(n))
                        .ok_or_else(|| {
                            ApiError::bad_request(format!(
                                "limit must be a number from 1 to {MAX_LIMIT}"
                            ))
                        })?;
                }
            }
        }
        if out.prefix.len() > names::MAX_NAME_BYTES
            || out
                .after
                .as_ref()
                .is_some_and(|a| a.len() > names::MAX_NAME_BYTES)
        {
            return Err(ApiError::bad_request("prefix or after is too long"));
        }
        Ok(out)
    }
}

/// One listed stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Listed {
    /// The cursor after it: its path in the bucket.
    pub path: String,
    /// Its name (the mount's canonical name, else the path).
    pub name: String,
    /// Its content type.
    pub content_type: String,
    /// The tail offset.
    pub tail: u64,
    /// The first offset still retained.
    pub retained: u64,
    /// Closed to appends.
    pub closed: bool,
    /// Created at, milliseconds since the Unix epoch.
    pub created_at_ms: u64,
}

/// A page of a listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Page {
    /// The streams, in path order.
    pub streams: Vec<Listed>,
    /// The cursor of the next page, if more may follow.
    pub next: Option<String>,
}

/// What one group found.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct GroupPage {
    found: Vec<Listed>,
    /// Everything up to this path was looked at; `None`: all of it.
    stopped_at: Option<String>,
}

/// One page of `bucket`'s streams whose names start with `query.prefix`,
/// after `query.after`, as this node's machines hold them.
///
/// # Errors
///
/// A group that does not answer.
pub(crate) async fn page(
    engine: &Engine,
    default_bucket: &str,
    bucket: &str,
    query: &ListQuery,
) -> Result<Page, EngineError> {
    page_within(engine, default_bucket, bucket, query, SCAN_BUDGET).await
}

/// [`page`], each group looking at no more than `budget` streams.
async fn page_within(
    engine: &Engine,
    default_bucket: &str,
    bucket: &str,
    query: &ListQuery,
    budget: usize,
) -> Result<Page, EngineError> {
    let ranges = names::scan_ranges(default_bucket, bucket, &query.prefix);
    let now_ms = engine.now_ms();
    let mut found = Vec::new();
    let mut end: Option<String> = None;
    for group in 0..engine.group_count() {
        let scan = ListScan {
            default_bucket: default_bucket.to_owned(),
            bucket: bucket.to_owned(),
            ranges: ranges.clone(),
            query: query.clone(),
            now_ms,
            budget,
        };
        let page = engine.ask(group, scan).await?;
        if let Some(stopped) = page.stopped_at
            && end.as_ref().is_none_or(|e| stopped < *e)
        {
            end = Some(stopped);
        }
        found.extend(page.found);
    }
    // Only what every group has looked at is complete.
    if let Some(end) = &end {
        found.retain(|l| l.path <= *end);
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    let next = if found.len() > query.limit {
        found.truncate(query.limit);
        found.last().map(|l| l.path.clone())
    } else {
        end
    };
    Ok(Page {
        streams: found,
        next,
    })
}

/// One group's part of a page, as a question another node can answer
/// for a group this node does not hold.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ListScan {
    default_bucket: String,
    bucket: String,
    ranges: Vec<String>,
    query: ListQuery,
    now_ms: u64,
    budget: usize,
}

impl GroupQuery for ListScan {
    const KIND: &'static str = "list-scan";
    type Answer = GroupPage;
    fn run(self, m: &strand::StreamStateMachine) -> GroupPage {
        scan(
            m,
            &self.default_bucket,
            &self.bucket,
            &self.ranges,
            &self.query,
            self.now_ms,
            self.budget,
        )
    }
}

/// One group's part of a page.
fn scan(
    m: &strand::StreamStateMachine,
    default_bucket: &str,
    bucket: &str,
    ranges: &[String],
    query: &ListQuery,
    now_ms: u64,
    budget: usize,
) -> GroupPage {
    let mut found = Vec::new();
    let mut scanned = 0usize;
    for range in ranges {
        let from = match &query.after {
            Some(after) if after.as_str() >= range.as_str() => Bound::Excluded(after.as_str()),
            _ => Bound::Included(range.as_str()),
        };
        for s in m.streams_by_path(bucket, from, now_ms) {
            let path = s.path();
            if !path.starts_with(range.as_str()) {
                break;
            }
            scanned += 1;
            let name = names::listed_name(default_bucket, &s.metadata.stream_id, &path, s.attrs);
            if name.starts_with(&query.prefix) {
                found.push(Listed {
                    path: path.clone(),
                    name,
                    content_type: s.metadata.content_type.clone(),
                    tail: s.metadata.tail_offset,
                    retained: s.retained_offset,
                    closed: s.metadata.status == strand::StreamStatus::Closed,
                    created_at_ms: s.metadata.created_at_ms,
                });
            }
            // One more than a page tells the merge that more follow.
            if found.len() > query.limit || scanned >= budget {
                return GroupPage {
                    found,
                    stopped_at: Some(path),
                };
            }
        }
    }
    GroupPage {
        found,
        stopped_at: None,
    }
}

/// The JSON of a listed stream.
#[derive(Serialize)]
struct ListedJson<'a> {
    name: &'a str,
    id: &'a str,
    url: String,
    content_type: &'a str,
    next_offset: String,
    retained_offset: String,
    bytes: u64,
    closed: bool,
    created_at_ms: u64,
}

/// The JSON body of a page.
/// `mount`: the bucket is the protocol mount's.
pub(crate) fn to_json(
    bucket: &str,
    mount: bool,
    query: &ListQuery,
    page: &Page,
) -> serde_json::Value {
    let streams: Vec<ListedJson<'_>> = page
        .streams
        .iter()
        .map(|l| ListedJson {
            name: &l.name,
            id: &l.path,
            url: url_of(bucket, mount, l),
            content_type: &l.content_type,
            next_offset: crate::offsets::render(l.tail),
            retained_offset: crate::offsets::render(l.retained),
            bytes: l.tail.saturating_sub(l.retained),
            closed: l.closed,
            created_at_ms: l.created_at_ms,
        })
        .collect();
    serde_json::json!({
        "bucket": bucket,
        "prefix": query.prefix,
        "streams": streams,
        "next": page.next,
    })
}

/// The path a client reads a listed stream at: on the mount by its name
/// (each segment percent-encoded, `%2F` and `%25` inside a segment
/// decoded first), else — a bucketed stream, or a hashed one whose name is
/// not known — on the bucketed layout by its id.
fn url_of(bucket: &str, mount: bool, l: &Listed) -> String {
    use crate::subs::api::encode_component as encode;
    let unknown_hashed = l.name == l.path && l.path.starts_with('~');
    let mut url = String::new();
    if mount && !unknown_hashed {
        url.push_str("/v1/stream");
        for segment in l.name.split('/') {
            url.push('/');
            // A canonical segment escapes only `%` and `/`.
            let sent = names::percent_decode(segment).unwrap_or_else(|| segment.to_owned());
            url.push_str(&encode(&sent));
        }
    } else {
        url.push('/');
        url.push_str(&encode(bucket));
        for segment in l.path.split('/') {
            url.push('/');
            url.push_str(&encode(segment));
        }
    }
    url
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Pages that stop where a group ran out of budget still list every
    /// match once, in order, when few streams match among many.
    #[tokio::test]
    async fn budgeted_pages_miss_nothing() {
        let engine = Engine::start(strand_engine::EngineConfig {
            groups: 3,
            ..strand_engine::EngineConfig::default()
        });
        let mut expected = Vec::new();
        for i in 0..300u32 {
            // Every seventh stream matches the prefix `k`.
            let name = if i % 7 == 0 {
                format!("k{i:03}")
            } else {
                format!("j{i:03}")
            };
            if name.starts_with('k') {
                expected.push(name.clone());
            }
            let response = engine
                .create_stream(
                    strand::StreamCommand::CreateStream {
                        stream_id: strand::BucketStreamId::new("default", name.as_str()),
                        content_type: "text/plain".into(),
                        initial_payload: bytes::Bytes::new(),
                        close_after: false,
                        stream_seq: None,
                        producer: None,
                        stream_ttl_seconds: None,
                        stream_expires_at_ms: None,
                        attrs: None,
                        now_ms: 1,
                    },
                    false,
                )
                .await
                .unwrap();
            assert!(matches!(response, strand::StreamResponse::Created { .. }));
        }
        for (prefix, limit, budget) in [("k", 4, 5), ("", 10, 3), ("k", 1000, 1)] {
            let mut query = ListQuery {
                prefix: prefix.to_owned(),
                after: None,
                limit,
            };
            let mut listed = Vec::new();
            for _ in 0..10_000 {
                let page = page_within(&engine, "default", "default", &query, budget)
                    .await
                    .unwrap();
                assert!(page.streams.len() <= limit);
                listed.extend(page.streams.into_iter().map(|l| l.name));
                match page.next {
                    Some(next) => query.after = Some(next),
                    None => break,
                }
            }
            let want: Vec<String> = if prefix.is_empty() {
                let mut all: Vec<String> = (0..300u32)
                    .map(|i| {
                        if i % 7 == 0 {
                            format!("k{i:03}")
                        } else {
                            format!("j{i:03}")
                        }
                    })
                    .collect();
                all.sort();
                all
            } else {
                expected.clone()
            };
            assert_eq!(
                listed, want,
                "prefix {prefix:?}, limit {limit}, budget {budget}"
            );
        }
        engine.shutdown().await;
    }

    #[test]
    fn urls_name_the_stream() {
        let listed = |name: &str, path: &str| Listed {
            path: path.to_owned(),
            name: name.to_owned(),
            content_type: String::new(),
            tail: 0,
            retained: 0,
            closed: false,
            created_at_ms: 0,
        };
        assert_eq!(
            url_of(
                "default",
                true,
                &listed("yjs/d 1/.updates", "~yjs~d_1~_updates~ab")
            ),
            "/v1/stream/yjs/d%201/.updates"
        );
        assert_eq!(
            url_of("default", true, &listed("a%2Fb/c%25d", "~a_2Fb~c_25d~ab")),
            "/v1/stream/a%2Fb/c%25d"
        );
        assert_eq!(
            url_of("default", true, &listed("~x~ab", "~x~ab")),
            "/default/~x~ab"
        );
        assert_eq!(url_of("acme", false, &listed("t/e", "t/e")), "/acme/t/e");
        for name in ["a%2Fb", "x%25y", "plain", "%2F%25%252F"] {
            let named = crate::names::mount_stream(
                "default",
                &url_of("default", true, &listed(name, "p"))["/v1/stream/".len()..],
            )
            .unwrap();
            assert_eq!(named.name, name);
        }
    }

    #[test]
    fn queries() {
        assert_eq!(ListQuery::parse(None).unwrap(), ListQuery::default());
        let q = ListQuery::parse(Some("prefix=yjs%2F&after=b&limit=5&x=1")).unwrap();
        assert_eq!(q.prefix, "yjs/");
        assert_eq!(q.after.as_deref(), Some("b"));
        assert_eq!(q.limit, 5);
        for bad in [
            "limit=0",
            "limit=1001",
            "limit=x",
            "prefix=a&prefix=b",
            "prefix=%zz",
        ] {
            assert_eq!(
                ListQuery::parse(Some(bad)).unwrap_err().status.as_u16(),
                400,
                "{bad}"
            );
        }
    }
}
