//! Subscriptions as data: the specification a client `PUT`s, the events
//! the registry stream holds, and the state they fold into. Everything
//! here is pure: the same events give the same state on every node.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Lease bounds (PROTOCOL §7): a wake or claim lives this long unless
/// acknowledged, extended or released.
pub const DEFAULT_LEASE_TTL_MS: u64 = 30_000;
/// The shortest lease a subscription may ask for.
pub const MIN_LEASE_TTL_MS: u64 = 1_000;
/// The longest lease a subscription may ask for.
pub const MAX_LEASE_TTL_MS: u64 = 600_000;
/// The most streams one subscription may list explicitly in one request.
pub const MAX_EXPLICIT_STREAMS: usize = 1_000;
/// The most bytes of a subscription id.
pub const MAX_ID_BYTES: usize = 256;

/// The kind of subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// The server `POST`s each wake to a URL.
    Webhook,
    /// The server appends each wake to a stream; workers claim it.
    PullWake,
}

/// A webhook target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Webhook {
    /// Where wakes are `POST`ed.
    pub url: String,
}

/// What a client asks for (the body of `PUT …/subscriptions/{id}`), as it
/// is kept: two `PUT`s with equal specs confirm one subscription.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spec {
    /// Webhook or pull-wake.
    #[serde(rename = "type")]
    pub kind: Kind,
    /// A glob over stream names (`events/*`, `logs/**`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Streams named explicitly (canonical names), sorted, distinct.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub streams: Vec<String>,
    /// The webhook target (webhook subscriptions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<Webhook>,
    /// The stream wakes are appended to (pull-wake subscriptions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_stream: Option<String>,
    /// How long a wake or claim lasts unacknowledged.
    pub lease_ttl_ms: u64,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// How a stream came to belong to a subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkType {
    /// Named in `streams`.
    Explicit,
    /// Matched by `pattern`.
    Glob,
}

/// One event of the registry stream. Each is one JSON value; the
/// registry is their fold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Event {
    /// The node-independent secret: seeds the webhook signing key and the
    /// callback-token key. Written once, by the first node that needs it.
    Key {
        /// 32 bytes, hex.
        seed: String,
    },
    /// A subscription created (or replaced after a delete).
    Put {
        /// Its id.
        id: String,
        /// Its specification.
        spec: Spec,
        /// When it was created.
        at_ms: u64,
        /// The server's URL as the creating client saw it (for callback
        /// URLs).
        base_url: String,
        /// Its explicit streams with their tails at creation (acked there).
        explicit: Vec<(String, u64)>,
    },
    /// A subscription deleted.
    Delete {
        /// Its id.
        id: String,
    },
    /// Streams linked to a subscription, each with its acked offset
    /// (`None`: nothing acknowledged yet).
    Link {
        /// The subscription.
        id: String,
        /// How they were linked.
        link_type: LinkType,
        /// The streams.
        streams: Vec<(String, Option<u64>)>,
    },
    /// An explicit link removed.
    Unlink {
        /// The subscription.
        id: String,
        /// The stream.
        stream: String,
    },
    /// A new wake: the generation advances and the previous wake (if any)
    /// is fenced.
    Wake {
        /// The subscription.
        id: String,
        /// The new generation.
        generation: u64,
        /// Its id.
        wake_id: String,
        /// The linked streams' tails when it was made.
        snapshot: Vec<(String, u64)>,
        /// When its lease ends (webhooks; a pull-wake's lease starts with
        /// its claim).
        expires_at_ms: Option<u64>,
    },
    /// A pull-wake claimed by a worker.
    Claim {
        /// The subscription.
        id: String,
        /// The wake's generation.
        generation: u64,
        /// The worker.
        holder: String,
        /// When the claim's lease ends.
        expires_at_ms: u64,
    },
    /// Acknowledgements for the current wake; `done` ends it.
    Ack {
        /// The subscription.
        id: String,
        /// The wake's generation.
        generation: u64,
        /// Streams and the offsets acknowledged.
        acks: Vec<(String, u64)>,
        /// Whether the wake is finished.
        done: bool,
        /// The lease's new end when not done.
        expires_at_ms: Option<u64>,
    },
    /// The current wake ended without acknowledgements: released by its
    /// worker, or its lease ran out.
    End {
        /// The subscription.
        id: String,
        /// The wake's generation.
        generation: u64,
    },
}

/// A linked stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Named explicitly.
    pub explicit: bool,
    /// Matched by the pattern.
    pub glob: bool,
    /// The acknowledged offset; `None` before the first acknowledgement.
    pub acked: Option<u64>,
}

impl Link {
    /// `explicit` when named explicitly, else `glob`.
    pub fn link_type(&self) -> LinkType {
        if self.explicit {
            LinkType::Explicit
        } else {
            LinkType::Glob
        }
    }

    /// Whether `tail` holds something not acknowledged.
    pub fn pending(&self, tail: u64) -> bool {
        self.acked.is_none_or(|acked| tail > acked)
    }
}

/// The current wake of a subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wake {
    /// Its id.
    pub wake_id: String,
    /// The streams' tails when it was made.
    pub snapshot: Vec<(String, u64)>,
    /// The worker holding it (pull-wake).
    pub holder: Option<String>,
    /// When its lease ends; `None` for an unclaimed pull-wake.
    pub expires_at_ms: Option<u64>,
}

impl Wake {
    /// Whether its lease ran out at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_some_and(|at| at <= now_ms)
    }
}

/// One subscription's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// What was asked for.
    pub spec: Spec,
    /// When it was created.
    pub created_at_ms: u64,
    /// The server's URL as the creating client saw it.
    pub base_url: String,
    /// Its streams by canonical name.
    pub links: BTreeMap<String, Link>,
    /// The generation of the latest wake (0 before the first).
    pub generation: u64,
    /// The current wake, if one is open.
    pub wake: Option<Wake>,
}

/// Every subscription, folded from the registry stream's events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Registry {
    /// By id.
    pub subs: BTreeMap<String, Subscription>,
    /// The shared secret, once written.
    pub seed: Option<[u8; 32]>,
}

impl Registry {
    /// Applies one event. Events naming a missing subscription or a stale
    /// generation change nothing (they were decided against a state a
    /// later event superseded).
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::Key { seed } => {
                if self.seed.is_none() {
                    self.seed = parse_seed(seed);
                }
            }
            Event::Put {
                id,
                spec,
                at_ms,
                base_url,
                explicit,
            } => {
                let links = explicit
                    .iter()
                    .map(|(name, tail)| {
                        (
                            name.clone(),
                            Link {
                                explicit: true,
                                glob: false,
                                acked: Some(*tail),
                            },
                        )
                    })
                    .collect();
                self.subs.insert(
                    id.clone(),
                    Subscription {
                        spec: spec.clone(),
                        created_at_ms: *at_ms,
                        base_url: base_url.clone(),
                        links,
                        generation: 0,
                        wake: None,
                    },
                );
            }
            Event::Delete { id } => {
                self.subs.remove(id);
            }
            Event::Link {
                id,
                link_type,
                streams,
            } => {
                let Some(sub) = self.subs.get_mut(id) else {
                    return;
                };
                for (name, acked) in streams {
                    let link = sub.links.entry(name.clone()).or_insert(Link {
                        explicit: false,
                        glob: false,
                        acked: *acked,
                    });
                    match link_type {
                        LinkType::Explicit => link.explicit = true,
                        LinkType::Glob => link.glob = true,
                    }
                }
            }
            Event::Unlink { id, stream } => {
                let Some(sub) = self.subs.get_mut(id) else {
                    return;
                };
                if let Some(link) = sub.links.get_mut(stream) {
                    link.explicit = false;
                    if !link.glob {
                        sub.links.remove(stream);
                    }
                }
            }
            Event::Wake {
                id,
                generation,
                wake_id,
                snapshot,
                expires_at_ms,
            } => {
                let Some(sub) = self.subs.get_mut(id) else {
                    return;
                };
                if *generation <= sub.generation {
                    return;
                }
                sub.generation = *generation;
                sub.wake = Some(Wake {
                    wake_id: wake_id.clone(),
                    snapshot: snapshot.clone(),
                    holder: None,
                    expires_at_ms: *expires_at_ms,
                });
            }
            Event::Claim {
                id,
                generation,
                holder,
                expires_at_ms,
            } => {
                if let Some(wake) = self.current_wake(id, *generation) {
                    wake.holder = Some(holder.clone());
                    wake.expires_at_ms = Some(*expires_at_ms);
                }
            }
            Event::Ack {
                id,
                generation,
                acks,
                done,
                expires_at_ms,
            } => {
                let Some(sub) = self.subs.get_mut(id) else {
                    return;
                };
                if sub.generation != *generation || sub.wake.is_none() {
                    return;
                }
                for (name, offset) in acks {
                    if let Some(link) = sub.links.get_mut(name) {
                        link.acked = Some(link.acked.map_or(*offset, |a| a.max(*offset)));
                    }
                }
                if *done {
                    sub.wake = None;
                } else if let Some(wake) = sub.wake.as_mut() {
                    wake.expires_at_ms = expires_at_ms.or(wake.expires_at_ms);
                }
            }
            Event::End { id, generation } => {
                if self.current_wake(id, *generation).is_some()
                    && let Some(sub) = self.subs.get_mut(id)
                {
                    sub.wake = None;
                }
            }
        }
    }

    fn current_wake(&mut self, id: &str, generation: u64) -> Option<&mut Wake> {
        let sub = self.subs.get_mut(id)?;
        if sub.generation != generation {
            return None;
        }
        sub.wake.as_mut()
    }
}

/// 32 bytes from 64 hex digits.
pub fn parse_seed(hex: &str) -> Option<[u8; 32]> {
    let bytes = hex.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks(2).enumerate() {
        let text = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

/// 64 hex digits of 32 bytes.
pub fn seed_hex(seed: &[u8; 32]) -> String {
    seed.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether a stream name matches a glob: `*` is one path segment, `**`
/// any number of them (none included), anything else matches itself.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let pattern: Vec<&str> = pattern.split('/').filter(|s| !s.is_empty()).collect();
    let name: Vec<&str> = name.split('/').filter(|s| !s.is_empty()).collect();
    matches_from(&pattern, &name)
}

/// The name prefix every name a glob matches starts with: its segments
/// before the first wildcard, joined by `/` (no trailing `/`: `**` also
/// matches no segment at all).
pub fn glob_prefix(pattern: &str) -> String {
    pattern
        .split('/')
        .filter(|s| !s.is_empty())
        .take_while(|s| *s != "*" && *s != "**")
        .collect::<Vec<_>>()
        .join("/")
}

fn matches_from(pattern: &[&str], name: &[&str]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((&"**", rest)) => (0..=name.len()).any(|skip| matches_from(rest, &name[skip..])),
        Some((segment, rest)) => match name.split_first() {
            Some((first, tail)) => {
                (*segment == "*" || segment == first) && matches_from(rest, tail)
            }
            None => false,
        },
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn spec() -> Spec {
        Spec {
            kind: Kind::Webhook,
            pattern: Some("events/*".into()),
            streams: vec![],
            webhook: Some(Webhook {
                url: "http://127.0.0.1:9/h".into(),
            }),
            wake_stream: None,
            lease_ttl_ms: 1_000,
            description: None,
        }
    }

    #[test]
    fn glob_prefixes() {
        for (pattern, prefix) in [
            ("events/*", "events"),
            ("a/b/**", "a/b"),
            ("**/x", ""),
            ("a/*/c", "a"),
            ("exact/name", "exact/name"),
        ] {
            assert_eq!(glob_prefix(pattern), prefix, "{pattern}");
        }
        for name in ["events/a", "events"] {
            assert!(name.starts_with(&glob_prefix("events/**")));
        }
    }

    #[test]
    fn globs() {
        assert!(glob_match("events/*", "events/a"));
        assert!(!glob_match("events/*", "events/a/b"));
        assert!(!glob_match("events/*", "events"));
        assert!(glob_match("events/**", "events/a/b"));
        assert!(glob_match("events/**", "events"));
        assert!(glob_match("**/x", "a/b/x"));
        assert!(glob_match("a/*/c", "a/b/c"));
        assert!(!glob_match("a/*/c", "a/b/d"));
    }

    #[test]
    fn wakes_acks_and_fencing_fold() {
        let mut r = Registry::default();
        r.apply(&Event::Put {
            id: "s".into(),
            spec: spec(),
            at_ms: 1,
            base_url: "http://127.0.0.1:1".into(),
            explicit: vec![],
        });
        r.apply(&Event::Link {
            id: "s".into(),
            link_type: LinkType::Glob,
            streams: vec![("events/a".into(), None)],
        });
        assert!(r.subs["s"].links["events/a"].pending(0));
        r.apply(&Event::Wake {
            id: "s".into(),
            generation: 1,
            wake_id: "w1".into(),
            snapshot: vec![("events/a".into(), 10)],
            expires_at_ms: Some(100),
        });
        // A stale generation changes nothing.
        r.apply(&Event::Ack {
            id: "s".into(),
            generation: 0,
            acks: vec![("events/a".into(), 10)],
            done: true,
            expires_at_ms: None,
        });
        assert!(r.subs["s"].wake.is_some());
        r.apply(&Event::Ack {
            id: "s".into(),
            generation: 1,
            acks: vec![("events/a".into(), 10)],
            done: true,
            expires_at_ms: None,
        });
        let sub = &r.subs["s"];
        assert!(sub.wake.is_none());
        assert_eq!(sub.links["events/a"].acked, Some(10));
        assert!(!sub.links["events/a"].pending(10));
        assert!(sub.links["events/a"].pending(11));
        // Events round-trip through JSON.
        let e = Event::Claim {
            id: "s".into(),
            generation: 2,
            holder: "w".into(),
            expires_at_ms: 5,
        };
        let text = serde_json::to_string(&e).unwrap();
        assert_eq!(serde_json::from_str::<Event>(&text).unwrap(), e);
        assert!(text.starts_with(r#"{"op":"claim""#), "{text}");
    }

    #[test]
    fn seeds() {
        let seed = [7u8; 32];
        assert_eq!(parse_seed(&seed_hex(&seed)), Some(seed));
        assert_eq!(parse_seed("zz"), None);
    }
}
