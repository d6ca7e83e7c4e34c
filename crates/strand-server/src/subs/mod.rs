//! The protocol's subscription API (PROTOCOL §6–7, `docs/subscriptions.md`):
//! webhook and pull-wake subscriptions over streams of the mount, chosen
//! by glob or by name, woken with generation-fenced, leased wakes.
//!
//! Subscriptions are replicated like everything else: they live as events
//! in one JSON stream of the reserved bucket `__strand`
//! ([`REGISTRY_STREAM`]), and every node folds that stream into the same
//! [`model::Registry`]. A change is decided against the folded state and
//! appended only if no other event came first (`record_match` on the
//! stream's next record), else decided again — so decisions made on any
//! node are serialized by the stream's group log, and a subscription
//! survives restarts and leader changes with its streams, acks and
//! generation.
//!
//! Each node runs a dispatcher ([`Subscriptions::run`]) that links the
//! mount's streams written on it to the subscriptions that match, opens a
//! wake when a subscription has unacknowledged data and no open wake (or
//! its lease ran out), and delivers it: a signed `POST` for a webhook, an
//! event appended to the wake stream for a pull-wake.

pub mod api;
pub mod model;
pub mod signing;
pub mod token;
pub mod webhook;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use strand::{BucketStreamId, StreamCommand, StreamErrorCode, StreamResponse};
use strand_engine::{Engine, ReadFrom, WriteRequest};
use tokio::sync::{Mutex, Notify};

use crate::errors::ApiError;
use model::{Event, Kind, LinkType, Registry};

/// The bucket of the server's own streams (`/__strand/…` is no bucket
/// route, so clients cannot address it).
pub const SYSTEM_BUCKET: &str = "__strand";
/// The registry stream, in [`SYSTEM_BUCKET`].
pub const REGISTRY_STREAM: &str = "subscriptions";
/// How many times a change is decided again when another node's event
/// came first.
const MAX_ATTEMPTS: usize = 16;
/// The most distinct stream names waiting for the dispatcher; beyond it,
/// writes are not linked until it catches up (their next write is).
const MAX_DIRTY: usize = 100_000;
/// How long one webhook delivery may take.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);
/// The waits before a failed webhook delivery is tried again, while its
/// wake is still the subscription's current one and its lease has not run
/// out; after the last, the lease's end brings the next generation.
const RETRY_BACKOFF: [Duration; 4] = [
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(8),
];
/// The dispatcher's pass when nothing wakes it earlier.
const IDLE_PASS: Duration = Duration::from_secs(5);

/// The registry as this node has folded it.
#[derive(Debug, Default)]
struct Folded {
    registry: Registry,
    /// The registry stream's byte offset folded up to.
    offset: u64,
    /// Records (events) folded: the stream's next record.
    records: u64,
}

/// A node's subscriptions: the folded registry, the dispatcher's inputs
/// and what delivering needs.
pub struct Subscriptions {
    engine: Engine,
    id: BucketStreamId,
    default_bucket: String,
    folded: Mutex<Folded>,
    /// Whether any subscription exists (the write path's fast check).
    any: AtomicBool,
    dirty: std::sync::Mutex<BTreeSet<String>>,
    /// Held while written streams are linked (from reading the written
    /// names to committing their links), so a claim that links first
    /// ([`Subscriptions::link_written`]) never misses a stream the
    /// dispatcher took but had not linked yet.
    linking: Mutex<()>,
    /// Look at every subscription in the next pass, not only those the
    /// written streams concern (a change through the API asked for it).
    full: AtomicBool,
    notify: Notify,
    policy: webhook::WebhookPolicy,
}

impl std::fmt::Debug for Subscriptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscriptions")
            .field("any", &self.any.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Subscriptions {
    /// A node's subscriptions over `engine`; webhook targets checked by
    /// `policy`.
    pub fn new(engine: Engine, default_bucket: &str, policy: webhook::WebhookPolicy) -> Arc<Self> {
        Arc::new(Self {
            engine,
            id: BucketStreamId::new(SYSTEM_BUCKET, REGISTRY_STREAM),
            default_bucket: default_bucket.to_owned(),
            folded: Mutex::new(Folded::default()),
            any: AtomicBool::new(true),
            dirty: std::sync::Mutex::new(BTreeSet::new()),
            linking: Mutex::new(()),
            full: AtomicBool::new(true),
            notify: Notify::new(),
            policy,
        })
    }

    /// The default bucket, where the mount's streams live.
    pub fn default_bucket(&self) -> &str {
        &self.default_bucket
    }

    /// The webhook policy.
    pub fn policy(&self) -> &webhook::WebhookPolicy {
        &self.policy
    }

    /// Whether any subscription may exist (until the registry is first
    /// read, assumed so): writes need not be reported otherwise.
    pub fn active(&self) -> bool {
        self.any.load(Ordering::Relaxed)
    }

    /// Notes a write to a stream of the mount (its canonical name): the
    /// dispatcher links it to matching subscriptions and wakes them.
    pub fn written(&self, name: &str) {
        if !self.active() {
            return;
        }
        if let Ok(mut dirty) = self.dirty.lock()
            && (dirty.len() < MAX_DIRTY || dirty.contains(name))
        {
            dirty.insert(name.to_owned());
        }
        self.notify.notify_one();
    }

    /// Asks the dispatcher for a pass over every subscription now.
    pub fn poke(&self) {
        self.full.store(true, Ordering::Relaxed);
        self.notify.notify_one();
    }

    /// Reads `f` up to the registry stream's tail.
    async fn catch_up(&self, f: &mut Folded) -> Result<(), ApiError> {
        loop {
            let outcome = self
                .engine
                .read(self.id.clone(), ReadFrom::Offset(f.offset), 1 << 20)
                .await?;
            let read = match outcome {
                Ok(read) => read,
                Err(response)
                    if matches!(
                        response.error_code(),
                        Some(StreamErrorCode::StreamNotFound | StreamErrorCode::BucketNotFound)
                    ) =>
                {
                    break;
                }
                Err(response) => {
                    return Err(ApiError::from_machine(
                        &response,
                        crate::errors::Layout::Bucketed,
                    ));
                }
            };
            let mut bytes = Vec::with_capacity(usize::try_from(read.len()).unwrap_or(0));
            for slice in &read.slices {
                bytes.extend_from_slice(slice);
            }
            // Whole events only: a page may end inside one.
            let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            for line in bytes[..whole]
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
            {
                match serde_json::from_slice::<Event>(line) {
                    Ok(event) => f.registry.apply(&event),
                    Err(e) => {
                        tracing::warn!(error = %e, "subscriptions: an event the registry cannot read is skipped")
                    }
                }
                f.records += 1;
            }
            f.offset += whole as u64;
            if read.up_to_date && whole == bytes.len() {
                break;
            }
            if whole == 0 {
                break;
            }
        }
        self.any
            .store(!f.registry.subs.is_empty(), Ordering::Relaxed);
        Ok(())
    }

    /// Appends `events` if no event came since `f` was folded; `false`
    /// when one did (decide again).
    async fn commit(&self, f: &mut Folded, events: &[Event]) -> Result<bool, ApiError> {
        let mut payload = BytesMut::new();
        for event in events {
            let json = serde_json::to_vec(event).map_err(|e| {
                ApiError::new(axum::http::StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
            })?;
            payload.put_slice(&json);
            payload.put_u8(b'\n');
        }
        let payload = payload.freeze();
        if f.records == 0 && f.offset == 0 {
            let created = self
                .engine
                .create_stream(
                    StreamCommand::CreateStream {
                        stream_id: self.id.clone(),
                        content_type: "application/json".to_owned(),
                        initial_payload: Bytes::new(),
                        close_after: false,
                        stream_seq: None,
                        producer: None,
                        stream_ttl_seconds: None,
                        stream_expires_at_ms: None,
                        attrs: None,
                        now_ms: self.engine.now_ms(),
                    },
                    false,
                )
                .await?;
            match created {
                StreamResponse::Created { .. } | StreamResponse::AlreadyExists { .. } => {}
                other => {
                    return Err(ApiError::from_machine(
                        &other,
                        crate::errors::Layout::Bucketed,
                    ));
                }
            }
        }
        let outcome = self
            .engine
            .write(WriteRequest {
                stream_id: self.id.clone(),
                content_type: Some("application/json".to_owned()),
                media_type_match: false,
                payload,
                close: false,
                stream_seq: None,
                producer: None,
                record_match: Some(f.records),
            })
            .await?;
        match outcome.response {
            StreamResponse::Appended { next_offset, .. } => {
                for event in events {
                    f.registry.apply(event);
                }
                f.records += events.len() as u64;
                f.offset = next_offset;
                self.any
                    .store(!f.registry.subs.is_empty(), Ordering::Relaxed);
                Ok(true)
            }
            other if other.error_code() == Some(StreamErrorCode::RecordPreconditionFailed) => {
                Ok(false)
            }
            other => Err(ApiError::from_machine(
                &other,
                crate::errors::Layout::Bucketed,
            )),
        }
    }

    /// Decides a change against the current registry and commits it:
    /// `decide` returns the events to append and the answer; it runs again
    /// when another node's event came first.
    pub async fn transact<T>(
        &self,
        mut decide: impl FnMut(&Registry, u64) -> Result<(Vec<Event>, T), ApiError>,
    ) -> Result<T, ApiError> {
        let mut f = self.folded.lock().await;
        for _ in 0..MAX_ATTEMPTS {
            self.catch_up(&mut f).await?;
            let (events, answer) = decide(&f.registry, self.engine.now_ms())?;
            if events.is_empty() || self.commit(&mut f, &events).await? {
                return Ok(answer);
            }
        }
        Err(ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "the subscription registry kept changing; try again",
        )
        .with_header(axum::http::header::RETRY_AFTER, "1"))
    }

    /// Reads the registry, caught up.
    pub async fn view<T>(&self, look: impl FnOnce(&Registry) -> T) -> Result<T, ApiError> {
        let mut f = self.folded.lock().await;
        self.catch_up(&mut f).await?;
        Ok(look(&f.registry))
    }

    /// The shared secret, written by the first node that needs it.
    pub async fn seed(&self) -> Result<[u8; 32], ApiError> {
        self.transact(|registry, _| match registry.seed {
            Some(seed) => Ok((vec![], seed)),
            None => {
                let key = signing::SigningKey::generate();
                let seed = key.seed();
                Ok((
                    vec![Event::Key {
                        seed: model::seed_hex(&seed),
                    }],
                    seed,
                ))
            }
        })
        .await
    }

    /// Links every stream that exists now and matches `pattern` to
    /// subscription `id`, acknowledged at its tail (as the protocol's
    /// reference server does: a new subscription wakes for what is written
    /// from then on), a listing page at a time (`crate::listing`), so it
    /// never scans every stream of the node. Streams already linked keep
    /// their acknowledgement. Returns how many streams it linked.
    ///
    /// # Errors
    ///
    /// A group or the registry that does not answer; what was linked
    /// before stays linked.
    pub async fn backfill(&self, id: &str, pattern: &str) -> Result<usize, ApiError> {
        let mut query = crate::listing::ListQuery {
            prefix: model::glob_prefix(pattern),
            after: None,
            limit: crate::listing::MAX_LIMIT,
        };
        let mut linked = 0;
        loop {
            let page = crate::listing::page(
                &self.engine,
                &self.default_bucket,
                &self.default_bucket,
                &query,
            )
            .await?;
            let found: Vec<(String, Option<u64>)> = page
                .streams
                .iter()
                .filter(|l| model::glob_match(pattern, &l.name))
                .map(|l| (l.name.clone(), Some(l.tail)))
                .collect();
            if !found.is_empty() {
                linked += self
                    .transact(|registry, _| {
                        let Some(sub) = registry.subs.get(id) else {
                            return Ok((vec![], 0));
                        };
                        let streams: Vec<(String, Option<u64>)> = found
                            .iter()
                            .filter(|(name, _)| !sub.links.get(name).is_some_and(|l| l.glob))
                            .map(|(name, tail)| {
                                let acked = sub.links.get(name).map_or(*tail, |l| l.acked);
                                (name.clone(), acked)
                            })
                            .collect();
                        let n = streams.len();
                        let events = if streams.is_empty() {
                            vec![]
                        } else {
                            vec![Event::Link {
                                id: id.to_owned(),
                                link_type: LinkType::Glob,
                                streams,
                            }]
                        };
                        Ok((events, n))
                    })
                    .await?;
            }
            match page.next {
                Some(next) => query.after = Some(next),
                None => return Ok(linked),
            }
        }
    }

    /// A stream's tail, 0 when it does not exist.
    pub async fn tail(&self, name: &str) -> u64 {
        let Ok(named) = crate::names::mount_stream(&self.default_bucket, name) else {
            return 0;
        };
        match self.engine.head(named.id).await {
            Ok(Some(meta)) => meta.tail_offset,
            _ => 0,
        }
    }

    /// Links the written streams `names` to the subscriptions whose
    /// pattern they match and that do not have them yet.
    async fn link(&self, names: &[String]) -> Result<(), ApiError> {
        if names.is_empty() {
            return Ok(());
        }
        self.transact(|registry, _| {
            let mut events = Vec::new();
            for (id, sub) in &registry.subs {
                let Some(pattern) = &sub.spec.pattern else {
                    continue;
                };
                let streams: Vec<(String, Option<u64>)> = names
                    .iter()
                    .filter(|name| {
                        model::glob_match(pattern, name)
                            && !sub.links.get(*name).is_some_and(|l| l.glob)
                    })
                    .map(|name| (name.clone(), sub.links.get(name).and_then(|l| l.acked)))
                    .collect();
                if !streams.is_empty() {
                    events.push(Event::Link {
                        id: id.clone(),
                        link_type: LinkType::Glob,
                        streams,
                    });
                }
            }
            Ok((events, ()))
        })
        .await
    }

    /// The streams written since the dispatcher last took them; `take`
    /// empties the set (the dispatcher's pass).
    fn written_names(&self, take: bool) -> Vec<String> {
        match self.dirty.lock() {
            Ok(mut dirty) if take => std::mem::take(&mut *dirty).into_iter().collect(),
            Ok(dirty) => dirty.iter().cloned().collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Links every stream written so far on this node that the
    /// dispatcher has not linked yet, leaving the written names to it (it
    /// still wakes their subscriptions): a claim right after an append
    /// finds the appended stream's work.
    pub async fn link_written(&self) -> Result<(), ApiError> {
        let _linking = self.linking.lock().await;
        self.link(&self.written_names(false)).await
    }

    /// The dispatcher: runs until `shutdown` turns true.
    pub async fn run(self: Arc<Self>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        loop {
            let next = match self.pass().await {
                Ok(next) => next,
                Err(e) => {
                    tracing::warn!(error = %e.message, "subscriptions: a dispatcher pass failed");
                    Some(Duration::from_secs(1))
                }
            };
            let sleep = next.unwrap_or(IDLE_PASS).min(IDLE_PASS);
            tokio::select! {
                () = self.notify.notified() => {}
                () = tokio::time::sleep(sleep) => {}
                _ = shutdown.changed() => {}
            }
            if *shutdown.borrow() {
                return;
            }
        }
    }

    /// One pass: link written streams, end expired wakes, open and deliver
    /// wakes. Returns how soon the next lease ends.
    async fn pass(self: &Arc<Self>) -> Result<Option<Duration>, ApiError> {
        let linking = self.linking.lock().await;
        let dirty = self.written_names(true);
        // Link: new matches of written streams.
        self.link(&dirty).await?;
        drop(linking);
        // Which subscriptions may need a wake, with their streams: those a
        // written stream belongs to and those whose wake's lease ran out
        // (every one after a change through the API).
        let full = self.full.swap(false, Ordering::Relaxed);
        let candidates: Vec<(String, Vec<String>)> = self
            .view(|registry| {
                let now = self.engine.now_ms();
                registry
                    .subs
                    .iter()
                    .filter(|(_, sub)| sub.wake.as_ref().is_none_or(|w| w.expired(now)))
                    .filter(|(_, sub)| {
                        full || sub.wake.is_some()
                            || dirty.iter().any(|name| sub.links.contains_key(name))
                    })
                    .filter(|(_, sub)| !sub.links.is_empty())
                    .map(|(id, sub)| (id.clone(), sub.links.keys().cloned().collect()))
                    .collect()
            })
            .await?;
        for (id, names) in candidates {
            let mut tails = Vec::with_capacity(names.len());
            for name in names {
                let tail = self.tail(&name).await;
                tails.push((name, tail));
            }
            self.open_wake(&id, &tails).await?;
        }
        // The soonest lease end, to look again then.
        let now = self.engine.now_ms();
        let soonest = self
            .view(|registry| {
                registry
                    .subs
                    .values()
                    .filter_map(|sub| sub.wake.as_ref()?.expires_at_ms)
                    .min()
            })
            .await?;
        Ok(soonest.map(|at| Duration::from_millis(at.saturating_sub(now).saturating_add(5))))
    }

    /// Opens a wake for subscription `id` if it has unacknowledged data
    /// and no open wake (an expired one is fenced by the new generation),
    /// then delivers it.
    async fn open_wake(
        self: &Arc<Self>,
        id: &str,
        tails: &[(String, u64)],
    ) -> Result<(), ApiError> {
        let seed = self.seed().await?;
        let opened = self
            .transact(|registry, now| {
                let Some(sub) = registry.subs.get(id) else {
                    return Ok((vec![], None));
                };
                if sub.wake.as_ref().is_some_and(|w| !w.expired(now)) {
                    return Ok((vec![], None));
                }
                let pending = tails.iter().any(|(name, tail)| {
                    sub.links.get(name).is_some_and(|link| link.pending(*tail))
                });
                if !pending {
                    // An expired wake with nothing left: end it.
                    let events = match &sub.wake {
                        Some(_) => vec![Event::End {
                            id: id.to_owned(),
                            generation: sub.generation,
                        }],
                        None => vec![],
                    };
                    return Ok((events, None));
                }
                let generation = sub.generation + 1;
                let wake_id = new_wake_id();
                let expires_at_ms = match sub.spec.kind {
                    Kind::Webhook => Some(now.saturating_add(sub.spec.lease_ttl_ms)),
                    Kind::PullWake => None,
                };
                let event = Event::Wake {
                    id: id.to_owned(),
                    generation,
                    wake_id: wake_id.clone(),
                    snapshot: tails.to_vec(),
                    expires_at_ms,
                };
                Ok((vec![event], Some((sub.clone(), generation, wake_id))))
            })
            .await?;
        let Some((sub, generation, wake_id)) = opened else {
            return Ok(());
        };
        match sub.spec.kind {
            Kind::Webhook => {
                let this = Arc::clone(self);
                let wake = WebhookWake {
                    id: id.to_owned(),
                    sub,
                    generation,
                    wake_id,
                    tails: tails.to_vec(),
                    seed,
                };
                tokio::spawn(async move { this.deliver(&wake).await });
            }
            Kind::PullWake => {
                self.announce(id, &sub, generation, tails).await?;
            }
        }
        Ok(())
    }

    /// Appends a pull-wake's event to its wake stream.
    async fn announce(
        &self,
        id: &str,
        sub: &model::Subscription,
        generation: u64,
        tails: &[(String, u64)],
    ) -> Result<(), ApiError> {
        let Some(wake_stream) = &sub.spec.wake_stream else {
            return Ok(());
        };
        let named = crate::names::mount_stream(&self.default_bucket, wake_stream)?;
        let stream = tails
            .iter()
            .find(|(name, tail)| sub.links.get(name).is_some_and(|l| l.pending(*tail)))
            .map_or("", |(name, _)| name.as_str());
        let event = serde_json::json!({
            "type": "wake",
            "subscription_id": id,
            "stream": stream,
            "generation": generation,
            "ts": self.engine.now_ms(),
        });
        let mut payload = serde_json::to_vec(&event).unwrap_or_default();
        payload.push(b'\n');
        let outcome = self
            .engine
            .write(WriteRequest {
                stream_id: named.id,
                content_type: Some("application/json".to_owned()),
                media_type_match: true,
                payload: Bytes::from(payload),
                close: false,
                stream_seq: None,
                producer: None,
                record_match: None,
            })
            .await?;
        if outcome.response.is_error() {
            tracing::warn!(
                subscription = id,
                "subscriptions: the wake stream refused a wake"
            );
        }
        Ok(())
    }

    /// Delivers a webhook wake; a `{"done": true}` answer acknowledges
    /// every stream at its tail in the wake. A failed delivery is tried
    /// again after each wait of [`RETRY_BACKOFF`] while the wake is still
    /// current (not acknowledged, fenced or past its lease), then when the
    /// wake's lease runs out (a new generation).
    async fn deliver(self: &Arc<Self>, wake: &WebhookWake) {
        for attempt in 0..=RETRY_BACKOFF.len() {
            if attempt > 0 {
                tokio::time::sleep(RETRY_BACKOFF[attempt - 1]).await;
                if !self.wake_current(&wake.id, wake.generation).await {
                    return;
                }
            }
            match self.deliver_once(wake).await {
                Ok(()) => return,
                Err(reason) => {
                    let retry = RETRY_BACKOFF.get(attempt).map(Duration::as_secs);
                    tracing::warn!(
                        subscription = wake.id,
                        %reason,
                        attempt = attempt + 1,
                        retry_in_s = ?retry,
                        "subscriptions: webhook delivery failed"
                    );
                }
            }
        }
    }

    /// Whether `generation`'s wake is still the open, unexpired wake of
    /// subscription `id`.
    async fn wake_current(&self, id: &str, generation: u64) -> bool {
        let now = self.engine.now_ms();
        self.view(|registry| {
            registry.subs.get(id).is_some_and(|s| {
                s.generation == generation && s.wake.as_ref().is_some_and(|w| !w.expired(now))
            })
        })
        .await
        .unwrap_or(false)
    }

    /// One delivery of a webhook wake; an error says why it failed (the
    /// target refused by the policy, or no 2xx answer).
    async fn deliver_once(self: &Arc<Self>, wake: &WebhookWake) -> Result<(), String> {
        let WebhookWake {
            id,
            sub,
            generation,
            wake_id,
            tails,
            seed,
        } = wake;
        let (id, generation, seed) = (id.as_str(), *generation, *seed);
        let Some(hook) = &sub.spec.webhook else {
            return Ok(());
        };
        let checked = self
            .policy
            .check(&hook.url)
            .await
            .map_err(|reason| format!("webhook target refused: {reason}"))?;
        let now = self.engine.now_ms();
        let token = token::issue(&token::key(&seed), id, generation, now);
        let streams: Vec<serde_json::Value> = tails
            .iter()
            .filter_map(|(name, tail)| {
                let link = sub.links.get(name)?;
                Some(api::stream_info(name, link, Some(*tail)))
            })
            .collect();
        let base = sub.base_url.trim_end_matches('/');
        let body = serde_json::json!({
            "subscription_id": id,
            "wake_id": wake_id,
            "generation": generation,
            "streams": streams,
            "callback_url": format!("{base}/v1/stream/__ds/subscriptions/{}/callback", api::encode_component(id)),
            "callback_token": token,
        });
        let body = serde_json::to_vec(&body).unwrap_or_default();
        let key = signing::SigningKey::from_seed(seed);
        let signature = key.signature_header(now / 1000, &body);
        let answer = webhook::deliver(&checked, body, &signature, DELIVERY_TIMEOUT).await?;
        if answer.get("done").and_then(serde_json::Value::as_bool) == Some(true) {
            let acks = tails.to_vec();
            let result = self
                .transact(|registry, _| {
                    let current = registry
                        .subs
                        .get(id)
                        .is_some_and(|s| s.generation == generation && s.wake.is_some());
                    let events = if current {
                        vec![Event::Ack {
                            id: id.to_owned(),
                            generation,
                            acks: acks.clone(),
                            done: true,
                            expires_at_ms: None,
                        }]
                    } else {
                        vec![]
                    };
                    Ok((events, ()))
                })
                .await;
            if let Err(e) = result {
                tracing::warn!(subscription = id, error = %e.message, "subscriptions: auto-ack failed");
            }
            self.poke();
        }
        Ok(())
    }
}

/// A webhook wake being delivered: whose, which, and what it reports.
struct WebhookWake {
    /// The subscription's id.
    id: String,
    /// The subscription as the wake was opened.
    sub: model::Subscription,
    /// The wake's generation.
    generation: u64,
    /// The wake's id.
    wake_id: String,
    /// Its streams with their tails.
    tails: Vec<(String, u64)>,
    /// The registry's secret (signing key and callback tokens).
    seed: [u8; 32],
}

/// A fresh wake id: `w_` and 24 hex digits.
fn new_wake_id() -> String {
    // Unique, not secret (the token guards the wake): without randomness,
    // a process-wide counter under the clock still never repeats.
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut bytes = [0u8; 12];
    if getrandom::fill(&mut bytes).is_err() {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        bytes.copy_from_slice(
            &blake3::hash(&[now.to_le_bytes(), u128::from(n).to_le_bytes()].concat()).as_bytes()
                [..12],
        );
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("w_{hex}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_claim_links_streams_written_before_it_and_leaves_their_wakes() {
        let engine = Engine::start(strand_engine::EngineConfig::default());
        // No dispatcher runs: only the claim's own linking can link.
        let subs = Subscriptions::new(engine, "default", webhook::WebhookPolicy::new(Vec::new()));
        let spec: model::Spec = serde_json::from_value(serde_json::json!({
            "type": "pull-wake", "pattern": "jobs/*", "wake_stream": "wake/jobs",
            "lease_ttl_ms": 60_000
        }))
        .unwrap();
        subs.transact(|_, now| {
            let put = Event::Put {
                id: "s".to_owned(),
                spec: spec.clone(),
                at_ms: now,
                base_url: "http://127.0.0.1".to_owned(),
                explicit: Vec::new(),
            };
            Ok((vec![put], ()))
        })
        .await
        .unwrap();
        subs.written("jobs/one");
        subs.written("other/two");
        subs.link_written().await.unwrap();
        let linked = subs
            .view(|r| r.subs["s"].links.keys().cloned().collect::<Vec<_>>())
            .await
            .unwrap();
        assert_eq!(linked, ["jobs/one"]);
        // The written names stay for the dispatcher, which wakes their
        // subscriptions; linking again adds nothing.
        assert_eq!(subs.dirty.lock().unwrap().len(), 2);
        subs.link_written().await.unwrap();
        let records = subs.folded.lock().await.records;
        subs.link_written().await.unwrap();
        assert_eq!(subs.folded.lock().await.records, records);
    }
}
