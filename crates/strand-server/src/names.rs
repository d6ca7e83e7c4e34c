//! Stream names under the Durable Streams mount (`docs/stream-urls.md`).
//!
//! A stream on the mount is named by its whole path after `/v1/stream/`:
//! any number of segments, each percent-decoded. The state machine's ids
//! are narrower (a stream id of at most 122 bytes with the bucket, no `/`,
//! no `..`), so a name maps onto a [`BucketStreamId`] in the default
//! bucket one of two ways, decided by the name alone (so the mapping is
//! the same on every node, after every restart and in every snapshot):
//!
//! * **direct**: one segment that is a valid stream id is that stream
//!   (`/v1/stream/x` is `/{default}/x`); two segments that are a valid
//!   affinity key and stream id are that pair (`/v1/stream/a/x` is
//!   `/{default}/a/x`, sharing a group with the other streams of `a`).
//!   Neither segment may start with `~`.
//! * **hashed**: every other name is the stream `~{readable}~{hash}`, where
//!   `hash` is 32 hex digits of the BLAKE3 hash of the canonical name and
//!   `readable` a short, lossy rendering of it for people reading
//!   snapshots and logs. Hashed ids start with `~`, so they never meet a
//!   direct one.
//!
//! The canonical name joins the decoded segments with `/`, writing `%` as
//! `%25` and a slash inside a segment (sent as `%2F`) as `%2F`, so
//! `a%2Fb` and `a/b` are different streams. It is also the name
//! authorization grants match by prefix.

use std::borrow::Cow;
use strand::BucketStreamId;

use crate::errors::ApiError;

/// The longest canonical stream name the mount accepts, in bytes.
pub(crate) const MAX_NAME_BYTES: usize = 4096;

/// The first segment reserved for the protocol's own API (PROTOCOL §6:
/// subscriptions live under `/v1/stream/__ds/`).
pub(crate) const RESERVED_SEGMENT: &str = "__ds";

/// Hex digits of the hash in a hashed stream id (128 bits).
const HASH_HEX: usize = 32;
/// The most bytes of readable text in a hashed stream id.
const READABLE_MAX: usize = 48;
/// The combined identity limit of the machine's ids (spec 01 §16.2).
const MAX_STREAM_PATH_BYTES: usize = 122;

/// A stream named by a request: its id and the name grants match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// The machine's id of the stream.
    pub id: BucketStreamId,
    /// The stream's name for authorization grants: the mount's canonical
    /// name, or `[affinity/]stream` on the bucketed layout.
    pub name: String,
}

/// The stream a path under the mount names; `raw` is the path after
/// `/v1/stream/`, still percent-encoded, without its query.
///
/// # Errors
///
/// 400 for an empty name or segment, a segment that is `.`, `..`, not
/// UTF-8 once decoded or holds NUL, and a name over [`MAX_NAME_BYTES`];
/// 404 for the reserved `__ds/` prefix.
pub(crate) fn mount_stream(bucket: &str, raw: &str) -> Result<Named, ApiError> {
    if raw.is_empty() {
        return Err(ApiError::not_found("no stream named"));
    }
    let mut segments: Vec<Cow<'_, str>> = Vec::new();
    let mut canonical = String::with_capacity(raw.len());
    for part in raw.split('/') {
        if part.is_empty() {
            return Err(ApiError::bad_request(
                "a stream name may not hold an empty path segment (a leading, trailing or doubled '/')",
            ));
        }
        // Most names hold no escape: their segments are borrowed as they are.
        let decoded = if part.contains('%') {
            Cow::Owned(percent_decode(part).ok_or_else(|| {
                ApiError::bad_request("the stream name is not valid percent-encoded UTF-8")
            })?)
        } else {
            Cow::Borrowed(part)
        };
        if decoded == "." || decoded == ".." || decoded.contains('\0') {
            return Err(ApiError::bad_request(
                "stream name segments may not be '.' or '..' or hold NUL",
            ));
        }
        if !canonical.is_empty() {
            canonical.push('/');
        }
        if decoded.contains(['%', '/']) {
            for c in decoded.chars() {
                match c {
                    '%' => canonical.push_str("%25"),
                    '/' => canonical.push_str("%2F"),
                    c => canonical.push(c),
                }
            }
        } else {
            canonical.push_str(&decoded);
        }
        if canonical.len() > MAX_NAME_BYTES {
            return Err(ApiError::bad_request(format!(
                "the stream name is longer than {MAX_NAME_BYTES} bytes"
            )));
        }
        segments.push(decoded);
    }
    if segments.first().is_some_and(|s| s == RESERVED_SEGMENT) {
        return Err(ApiError::not_found(
            "/v1/stream/__ds/ is reserved for the protocol's subscription API (docs/subscriptions.md), not a stream",
        ));
    }
    let id = direct(bucket, &segments).unwrap_or_else(|| hashed(bucket, &canonical));
    Ok(Named {
        id,
        name: canonical,
    })
}

/// Splits a raw path into percent-decoded segments, refusing what no
/// stream name may hold: non-UTF-8, NUL, `.` and `..` segments.
pub fn segments(path: &str) -> Result<Vec<String>, ApiError> {
    let mut out = Vec::new();
    for raw in path.split('/').filter(|s| !s.is_empty()) {
        let decoded = percent_decode(raw)
            .ok_or_else(|| ApiError::bad_request("path is not valid percent-encoded UTF-8"))?;
        if decoded == "." || decoded == ".." || decoded.contains('\0') {
            return Err(ApiError::bad_request(
                "path segments may not be '.', '..' or hold NUL",
            ));
        }
        out.push(decoded);
    }
    Ok(out)
}

/// Percent-decodes `text`; `None` for a malformed escape or non-UTF-8.
pub(crate) fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The direct id of one or two segments, when they make a valid one.
fn direct(bucket: &str, segments: &[Cow<'_, str>]) -> Option<BucketStreamId> {
    let id = match segments {
        [stream] => BucketStreamId::new(bucket, stream.as_ref()),
        [affinity, stream] => {
            BucketStreamId::with_affinity(bucket, affinity.as_ref(), stream.as_ref())
        }
        _ => return None,
    };
    if segments.iter().any(|s| s.starts_with('~')) {
        return None;
    }
    strand::validate_stream_id(&id).ok().map(|()| id)
}

/// The hashed id of a canonical name.
fn hashed(bucket: &str, canonical: &str) -> BucketStreamId {
    let hash = blake3::hash(canonical.as_bytes());
    let hex: String = hash
        .as_bytes()
        .iter()
        .take(HASH_HEX / 2)
        .map(|b| format!("{b:02x}"))
        .collect();
    let readable = readable(canonical, readable_room(bucket));
    BucketStreamId::new(bucket, format!("~{readable}~{hex}"))
}

/// How many characters of readable text a hashed id of `bucket` holds:
/// `~` + readable + `~` + hash, within the combined limit.
fn readable_room(bucket: &str) -> usize {
    MAX_STREAM_PATH_BYTES
        .saturating_sub(bucket.len() + 1 + 2 + HASH_HEX)
        .min(READABLE_MAX)
}

/// The readable rendering of (the start of) a canonical name, at most
/// `room` characters: a character-wise map, so the rendering of a prefix
/// is a prefix of the rendering of every name that starts with it.
fn readable(canonical: &str, room: usize) -> String {
    canonical
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' => c,
            '/' => '~',
            _ => '_',
        })
        .take(room)
        .collect()
}

/// The attribute a hashed stream of the mount keeps its canonical name
/// under (in `metadata`), so listings can show and filter by the name
/// the id no longer holds. Checked against the id's hash when read.
pub(crate) const NAME_ATTR: &str = "strand.name";

/// The attributes a stream is created with: for a hashed id, the
/// client's `attrs` (if any) with the canonical name added under
/// [`NAME_ATTR`]; any other id's attributes unchanged.
pub(crate) fn with_name(
    id: &BucketStreamId,
    name: &str,
    attrs: Option<strand::StreamAttrs>,
) -> Option<strand::StreamAttrs> {
    if !is_hashed(id) || hashed(&id.bucket_id, name) != *id {
        return attrs;
    }
    let mut attrs = attrs.unwrap_or_default();
    attrs.metadata.insert(
        NAME_ATTR.to_owned(),
        serde_json::Value::String(name.to_owned()),
    );
    Some(attrs)
}

/// Whether `existing` attributes are `given` ones as a stream created
/// before hashed streams kept their name holds them: the same, without
/// [`NAME_ATTR`]. Such a stream's create is repeated without the name, so
/// that it stays idempotent.
pub(crate) fn created_without_name(
    existing: Option<&strand::StreamAttrs>,
    given: Option<&strand::StreamAttrs>,
) -> bool {
    let Some(given) = given else {
        return false;
    };
    if existing.is_some_and(|e| e.metadata.contains_key(NAME_ATTR)) {
        return false;
    }
    let mut stripped = given.clone();
    stripped.metadata.remove(NAME_ATTR);
    // The machine stores empty attributes as none.
    let stripped = (!stripped.is_empty()).then_some(stripped);
    stripped.as_ref() == existing
}

/// The canonical name a hashed stream keeps in its attributes, when it
/// hashes to the stream's id.
pub(crate) fn kept_name<'a>(
    id: &BucketStreamId,
    attrs: Option<&'a strand::StreamAttrs>,
) -> Option<&'a str> {
    let name = attrs?.metadata.get(NAME_ATTR)?.as_str()?;
    (is_hashed(id) && hashed(&id.bucket_id, name) == *id).then_some(name)
}

fn is_hashed(id: &BucketStreamId) -> bool {
    id.affinity_key.is_none() && id.stream_id.starts_with('~')
}

/// The name a listing shows for the stream at `path` (`[affinity/]stream`)
/// of `bucket`: on the mount's bucket the canonical name — a hashed
/// stream's from its [`NAME_ATTR`] when that hashes to its id — else the
/// path, the name grants match on the bucketed layout.
pub(crate) fn listed_name(
    default_bucket: &str,
    id: &BucketStreamId,
    path: &str,
    attrs: Option<&strand::StreamAttrs>,
) -> String {
    if id.bucket_id != default_bucket {
        return path.to_owned();
    }
    if let Some(name) = kept_name(id, attrs) {
        return name.to_owned();
    }
    // A direct id: its segments hold no `/`, so escaping `%` makes the
    // canonical name.
    path.replace('%', "%25")
}

/// The path prefixes (in the machine's path order, none a prefix of
/// another) that hold every stream of `bucket` whose listed name starts
/// with `prefix`: on the mount's bucket the direct paths and the hashed
/// ids' readable renderings, else the prefix itself. A superset: the
/// listing still checks each name.
pub(crate) fn scan_ranges(default_bucket: &str, bucket: &str, prefix: &str) -> Vec<String> {
    if bucket != default_bucket {
        return vec![prefix.to_owned()];
    }
    let direct = prefix.split('%').next().unwrap_or_default().to_owned();
    let hashed = format!("~{}", readable(prefix, readable_room(bucket)));
    let mut ranges = if hashed.starts_with(&direct) {
        vec![direct]
    } else if direct.starts_with(&hashed) {
        vec![hashed]
    } else {
        vec![direct, hashed]
    };
    ranges.sort();
    ranges
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn id(raw: &str) -> BucketStreamId {
        mount_stream("default", raw).unwrap().id
    }

    fn status(raw: &str) -> u16 {
        mount_stream("default", raw).unwrap_err().status.as_u16()
    }

    #[test]
    fn one_and_two_valid_segments_map_directly() {
        assert_eq!(id("events"), BucketStreamId::new("default", "events"));
        assert_eq!(id("a%20b"), BucketStreamId::new("default", "a b"));
        assert_eq!(
            id("chat/42"),
            BucketStreamId::with_affinity("default", "chat", "42")
        );
        assert_eq!(mount_stream("default", "chat/42").unwrap().name, "chat/42");
    }

    #[test]
    fn other_names_hash_to_ids_the_machine_accepts() {
        let long = "x".repeat(1500);
        let names = [
            "yjs/svc/docs/doc-1/.updates",
            "yjs/svc/docs/doc-1/.awareness/default",
            "chat/abc/0b3c8f2e-7c57-4d43-9b0e-4a1f2d2b1d55",
            "streams",
            "a..b",
            "~tilde",
            "a%2Fb",
            ".hidden",
            long.as_str(),
        ];
        let mut seen = std::collections::BTreeSet::new();
        for name in names {
            let named = mount_stream("default", name).unwrap();
            strand::validate_stream_id(&named.id).unwrap();
            assert!(named.id.stream_id.starts_with('~') || name == ".hidden");
            assert!(seen.insert(named.id.clone()), "{name}: a collision");
            // The same name, the same id: nothing but the name decides.
            assert_eq!(mount_stream("default", name).unwrap(), named);
        }
        // A long bucket leaves less room, never too little.
        let wide = "b".repeat(64);
        let named = mount_stream(&wide, long.as_str()).unwrap();
        strand::validate_stream_id(&named.id).unwrap();
        // The id is a format: a change would orphan every stored stream.
        assert_eq!(
            id("yjs/svc/docs/doc-1/.updates").stream_id,
            "~yjs~svc~docs~doc-1~_updates~6d2371ea91272b6ff743f0e86a4404d0"
        );
    }

    #[test]
    fn escaped_slashes_and_percents_stay_distinct() {
        let escaped = mount_stream("default", "a%2Fb").unwrap();
        let real = mount_stream("default", "a/b").unwrap();
        assert_ne!(escaped.id, real.id);
        assert_eq!(escaped.name, "a%2Fb");
        assert_eq!(real.name, "a/b");
        let percent = mount_stream("default", "a%252Fb").unwrap();
        assert_eq!(percent.name, "a%252Fb");
        assert_ne!(percent.id, escaped.id);
    }

    #[test]
    fn hashed_streams_carry_their_name_and_listings_find_it() {
        let named = mount_stream("default", "yjs/svc/docs/doc-1/.updates").unwrap();
        let attrs = with_name(&named.id, &named.name, None);
        let path = named.id.stream_id.clone();
        assert_eq!(
            listed_name("default", &named.id, &path, attrs.as_ref()),
            "yjs/svc/docs/doc-1/.updates"
        );
        // A name that does not hash to the id is not believed.
        let mut forged = attrs.clone().unwrap();
        forged.metadata.insert(NAME_ATTR.into(), "secret/x".into());
        assert_eq!(
            listed_name("default", &named.id, &path, Some(&forged)),
            path
        );
        assert_eq!(listed_name("default", &named.id, &path, None), path);
        // Direct ids keep their attributes and list under their name.
        let direct = mount_stream("default", "chat/4%252").unwrap();
        assert_eq!(with_name(&direct.id, &direct.name, None), None);
        assert!(created_without_name(None, attrs.as_ref()));
        assert!(!created_without_name(attrs.as_ref(), attrs.as_ref()));
        assert_eq!(
            listed_name("default", &direct.id, "chat/4%2", None),
            "chat/4%252"
        );
        // The prefix's ranges hold the path of every matching name.
        for (name, prefix) in [
            ("yjs/svc/docs/doc-1/.updates", "yjs/"),
            ("yjs/svc/docs/doc-1/.updates", "yjs/svc/docs/d"),
            ("chat/42", "chat/"),
            ("chat/4%252", "chat/4%25"),
            ("x", ""),
            (long_name().as_str(), &long_name()[..90]),
        ] {
            let named = mount_stream("default", name).unwrap();
            let path = named.id.stream_id.clone();
            let path = match &named.id.affinity_key {
                Some(a) => format!("{a}/{path}"),
                None => path,
            };
            let ranges = scan_ranges("default", "default", prefix);
            assert!(
                ranges.iter().any(|r| path.starts_with(r.as_str())),
                "{name} under {prefix}: {ranges:?}"
            );
        }
        assert_eq!(scan_ranges("default", "acme", "a/"), ["a/"]);
        assert_eq!(scan_ranges("default", "default", ""), [""]);
    }

    fn long_name() -> String {
        format!("{}/tail", "segment".repeat(20))
    }

    #[test]
    fn refusals() {
        assert_eq!(status("a//b"), 400);
        assert_eq!(status("a/"), 400);
        assert_eq!(status("a/%2e%2e/b"), 400);
        assert_eq!(status("a/./b"), 400);
        assert_eq!(status("a/%00"), 400);
        assert_eq!(status("a/%ff"), 400);
        assert_eq!(status("a/%4"), 400);
        assert_eq!(status(&"y".repeat(MAX_NAME_BYTES + 1)), 400);
        assert_eq!(status("__ds/subscriptions/x"), 404);
        assert_eq!(status(""), 404);
        assert!(mount_stream("default", &"y".repeat(MAX_NAME_BYTES)).is_ok());
    }
}
