//! Per-stream idempotent producer state: evaluation of a request against it
//! and recording of accepted writes (spec 04 §2.5, §2.11, §8).

use std::collections::BTreeMap;

use strand_model::{ProducerAppendRecord, ProducerReceipt, ProducerRequest, ProducerSnapshot};

use crate::response::{StreamErrorCode, StreamErrorContext, StreamResponse};

/// One producer's state on one stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProducerState {
    epoch: u64,
    seq: u64,
    last_start_offset: u64,
    last_next_offset: u64,
    last_closed: bool,
    last_items: Vec<ProducerAppendRecord>,
    receipts: ReceiptLog,
}

/// The replayed outcome of a duplicate request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Duplicate {
    pub(crate) offset: u64,
    pub(crate) next_offset: u64,
    pub(crate) closed: bool,
    /// The receipt's items; empty unless [`Producers::evaluate`] was asked
    /// for them (only batches answer with them).
    pub(crate) items: Vec<ProducerAppendRecord>,
    /// Epoch and sequence of the echoed producer.
    echo_epoch: u64,
    echo_seq: u64,
}

impl Duplicate {
    /// The producer echoed in the answer: the request's producer id (moved,
    /// not copied) with the receipt's epoch and sequence.
    pub(crate) fn echo(&self, request: ProducerRequest) -> ProducerRequest {
        ProducerRequest {
            producer_id: request.producer_id,
            producer_epoch: self.echo_epoch,
            producer_seq: self.echo_seq,
        }
    }

    /// The answer to a retry of an accepted sequence whose receipt the
    /// corrected profile no longer keeps: a duplicate whose offsets are both
    /// the start of the oldest kept receipt (the original write ended at or
    /// before it), not closed, with one empty item at that offset.
    fn trimmed(state: &ProducerState, p: &ProducerRequest, with_items: bool) -> Self {
        let at = state
            .receipts
            .entries
            .first()
            .map_or(state.last_start_offset, |e| e.start);
        Self {
            offset: at,
            next_offset: at,
            closed: false,
            items: if with_items {
                vec![ProducerAppendRecord {
                    start_offset: at,
                    next_offset: at,
                    closed: false,
                    record_start: None,
                    record_next: None,
                }]
            } else {
                Vec::new()
            },
            echo_epoch: state.epoch,
            echo_seq: p.producer_seq,
        }
    }
}

/// What producer evaluation decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Evaluation {
    /// Proceed with the write.
    Accept,
    /// A retry of an accepted request: answer from its receipt.
    Duplicate(Duplicate),
}

/// All producers of one stream, by producer id (sorted, as snapshots need).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Producers {
    /// Boxed: most streams have no producer, and a pointer is 16 bytes
    /// smaller than an empty map in every stream slot.
    #[allow(clippy::box_collection)]
    map: Option<Box<BTreeMap<String, ProducerState>>>,
}

#[cold]
fn seq_conflict(expected: u64, received: u64, message: String) -> StreamResponse {
    StreamResponse::error_with(
        StreamErrorCode::ProducerSeqConflict,
        None,
        vec![StreamErrorContext::ProducerSeqConflict {
            expected_seq: expected,
            received_seq: received,
        }],
        message,
    )
}

impl Producers {
    /// No producer.
    pub(crate) const EMPTY: Self = Self { map: None };

    /// Evaluates a request (spec 04 §2.5). `None` always accepts.
    ///
    /// With `corrected`, a retry of an accepted sequence whose receipt was
    /// trimmed (bounded receipts) is still a duplicate, answered by
    /// [`Duplicate::trimmed`]. A duplicate carries its receipt's items only
    /// `with_items`.
    pub(crate) fn evaluate(
        &self,
        producer: Option<&ProducerRequest>,
        corrected: bool,
        with_items: bool,
    ) -> Result<Evaluation, StreamResponse> {
        let Some(p) = producer else {
            return Ok(Evaluation::Accept);
        };
        let Some(state) = self.get(&p.producer_id) else {
            if p.producer_seq == 0 {
                return Ok(Evaluation::Accept);
            }
            return Err(seq_conflict(
                0,
                p.producer_seq,
                format!("expected sequence 0, received {}", p.producer_seq),
            ));
        };
        if p.producer_epoch < state.epoch {
            return Err(StreamResponse::error_with(
                StreamErrorCode::ProducerEpochStale,
                None,
                vec![StreamErrorContext::ProducerEpochStale {
                    current_epoch: state.epoch,
                }],
                format!(
                    "producer epoch {} is older than current epoch {}",
                    p.producer_epoch, state.epoch
                ),
            ));
        }
        if p.producer_epoch > state.epoch {
            if p.producer_seq == 0 {
                return Ok(Evaluation::Accept);
            }
            return Err(StreamResponse::error(
                StreamErrorCode::InvalidProducer,
                format!("new epoch {} must start at sequence 0", p.producer_epoch),
            ));
        }
        if p.producer_seq <= state.seq {
            let Some((index, entry)) = state.receipts.find(p.producer_seq) else {
                if corrected && state.receipts.trimmed_before(p.producer_seq) {
                    return Ok(Evaluation::Duplicate(Duplicate::trimmed(
                        state, p, with_items,
                    )));
                }
                return Err(seq_conflict(
                    state.seq.saturating_add(1),
                    p.producer_seq,
                    format!(
                        "sequence {} is older than the retained receipt window ending at {}",
                        p.producer_seq, state.seq
                    ),
                ));
            };
            return Ok(Evaluation::Duplicate(Duplicate {
                offset: entry.start,
                next_offset: entry.next,
                closed: entry.flags & CLOSED != 0,
                items: if with_items {
                    state.receipts.expand(index, &entry).items
                } else {
                    Vec::new()
                },
                echo_epoch: state.epoch,
                echo_seq: entry.seq,
            }));
        }
        if Some(p.producer_seq) == state.seq.checked_add(1) {
            return Ok(Evaluation::Accept);
        }
        Err(seq_conflict(
            state.seq.saturating_add(1),
            p.producer_seq,
            format!(
                "expected sequence {}, received {}",
                state.seq.saturating_add(1),
                p.producer_seq
            ),
        ))
    }

    /// Records an accepted write (spec 04 §2.11): `last` gives the receipt's
    /// span, `items` its records.
    /// `limit` (corrected profile) bounds the receipts kept per producer.
    pub(crate) fn record(
        &mut self,
        p: &ProducerRequest,
        last: &ProducerAppendRecord,
        items: &[ProducerAppendRecord],
        limit: Option<usize>,
    ) {
        let map = self.map.get_or_insert_default();
        match map.get_mut(&p.producer_id) {
            Some(state) if state.epoch == p.producer_epoch => {
                state.seq = p.producer_seq;
                state.last_start_offset = last.start_offset;
                state.last_next_offset = last.next_offset;
                state.last_closed = last.closed;
                state.receipts.push(p.producer_seq, last, items);
                if let Some(limit) = limit {
                    state.receipts.trim_to(limit);
                }
                // Reuses the list's allocation (an accepted append then
                // allocates nothing here), unless a big batch left it large.
                if state.last_items.capacity() > 4 * items.len().max(1) {
                    state.last_items = items.to_vec();
                } else {
                    state.last_items.clear();
                    state.last_items.extend_from_slice(items);
                }
            }
            _ => {
                let mut receipts = ReceiptLog::default();
                receipts.push(p.producer_seq, last, items);
                map.insert(
                    p.producer_id.clone(),
                    ProducerState {
                        epoch: p.producer_epoch,
                        seq: p.producer_seq,
                        last_start_offset: last.start_offset,
                        last_next_offset: last.next_offset,
                        last_closed: last.closed,
                        last_items: items.to_vec(),
                        receipts,
                    },
                );
            }
        }
    }

    /// One producer's state (for transaction undo).
    pub(crate) fn get(&self, producer_id: &str) -> Option<&ProducerState> {
        self.map.as_ref()?.get(producer_id)
    }

    /// Puts a producer's state back (`None` removes it).
    pub(crate) fn put(&mut self, producer_id: String, state: Option<ProducerState>) {
        match state {
            Some(state) => {
                self.map.get_or_insert_default().insert(producer_id, state);
            }
            None => {
                if let Some(map) = self.map.as_mut() {
                    map.remove(&producer_id);
                }
            }
        }
    }

    /// A producer's `(epoch, last accepted seq)`, if it has state.
    pub(crate) fn position(&self, producer_id: &str) -> Option<(u64, u64)> {
        self.get(producer_id).map(|s| (s.epoch, s.seq))
    }

    /// The latest items of a producer (for `record_range_for_append`).
    pub(crate) fn last_items(&self, producer_id: &str) -> Option<&[ProducerAppendRecord]> {
        self.get(producer_id).map(|s| s.last_items.as_slice())
    }

    /// The snapshot form, sorted by producer id, written into `out`,
    /// reusing its producers' strings and vectors.
    pub(crate) fn snapshot_into(&self, out: &mut Vec<ProducerSnapshot>) {
        let mut n = 0;
        for (id, s) in self.map.iter().flat_map(|m| m.iter()) {
            if n == out.len() {
                out.push(ProducerSnapshot {
                    producer_id: String::new(),
                    producer_epoch: 0,
                    producer_seq: 0,
                    last_start_offset: 0,
                    last_next_offset: 0,
                    last_closed: false,
                    last_items: Vec::new(),
                    receipts: Vec::new(),
                });
            }
            let ProducerSnapshot {
                producer_id,
                producer_epoch,
                producer_seq,
                last_start_offset,
                last_next_offset,
                last_closed,
                last_items,
                receipts,
            } = &mut out[n];
            producer_id.clone_from(id);
            *producer_epoch = s.epoch;
            *producer_seq = s.seq;
            *last_start_offset = s.last_start_offset;
            *last_next_offset = s.last_next_offset;
            *last_closed = s.last_closed;
            last_items.clone_from(&s.last_items);
            s.receipts.write_into(receipts);
            n += 1;
        }
        out.truncate(n);
    }

    /// Inserts a restored producer; returns false if the id was present.
    /// An empty receipt list (legacy) becomes one receipt for the last write.
    pub(crate) fn insert_restored(&mut self, snapshot: ProducerSnapshot) -> bool {
        let map = self.map.get_or_insert_default();
        if map.contains_key(&snapshot.producer_id) {
            return false;
        }
        let receipts = if snapshot.receipts.is_empty() {
            vec![ProducerReceipt {
                producer_seq: snapshot.producer_seq,
                start_offset: snapshot.last_start_offset,
                next_offset: snapshot.last_next_offset,
                closed: snapshot.last_closed,
                items: snapshot.last_items.clone(),
            }]
        } else {
            snapshot.receipts
        };
        let mut log = ReceiptLog::default();
        for receipt in &receipts {
            log.push_receipt(receipt);
        }
        map.insert(
            snapshot.producer_id,
            ProducerState {
                epoch: snapshot.producer_epoch,
                seq: snapshot.producer_seq,
                last_start_offset: snapshot.last_start_offset,
                last_next_offset: snapshot.last_next_offset,
                last_closed: snapshot.last_closed,
                last_items: snapshot.last_items,
                receipts: log,
            },
        );
        true
    }
}

/// One receipt in compact form (32 bytes): a single-item receipt whose
/// item spans the receipt (the common case) needs no allocation of its
/// own. Its record bounds, if any, are in [`ReceiptLog::bounds`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ReceiptEntry {
    seq: u64,
    start: u64,
    next: u64,
    flags: u8,
}

const CLOSED: u8 = 1;
const HAS_RECORD_START: u8 = 2;
const HAS_RECORD_NEXT: u8 = 4;
/// Either record bound is present.
const HAS_RECORD_BOUNDS: u8 = HAS_RECORD_START | HAS_RECORD_NEXT;
/// The items are not the one standard item; they live in `ReceiptLog::items`.
const CUSTOM_ITEMS: u8 = 8;

/// A producer's receipts in one epoch. The reference profile never trims
/// them (spec 04 Q-RECEIPTS; the corrected one keeps the latest N), so they
/// are stored compactly, and a retry finds its receipt by index while
/// sequence numbers are consecutive.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct ReceiptLog {
    entries: Vec<ReceiptEntry>,
    /// `[record_start, record_next]` of every entry (0 for an absent
    /// bound), kept only while some entry has a bound and empty otherwise:
    /// receipts on a stream without record index (no bounds) then cost 32
    /// bytes each rather than 48. Either empty or as long as `entries`.
    bounds: Vec<[u64; 2]>,
    /// Items of receipts flagged `CUSTOM_ITEMS`, by entry index.
    items: BTreeMap<usize, Vec<ProducerAppendRecord>>,
    /// Set once some `entries[i].seq != entries[0].seq + i`; until then a
    /// retry finds its receipt by index.
    irregular: bool,
}

impl ReceiptLog {
    fn push(&mut self, seq: u64, last: &ProducerAppendRecord, items: &[ProducerAppendRecord]) {
        let standard = match items {
            [only] => {
                only.start_offset == last.start_offset
                    && only.next_offset == last.next_offset
                    && only.closed == last.closed
            }
            _ => false,
        };
        let (record_start, record_next) = match items {
            [only] if standard => (only.record_start, only.record_next),
            _ => (None, None),
        };
        let mut flags = 0;
        if last.closed {
            flags |= CLOSED;
        }
        if record_start.is_some() {
            flags |= HAS_RECORD_START;
        }
        if record_next.is_some() {
            flags |= HAS_RECORD_NEXT;
        }
        if !standard {
            flags |= CUSTOM_ITEMS;
            self.items.insert(self.entries.len(), items.to_vec());
        }
        if let Some(prev) = self.entries.last()
            && prev.seq.checked_add(1) != Some(seq)
        {
            self.irregular = true;
        }
        if flags & HAS_RECORD_BOUNDS != 0 || !self.bounds.is_empty() {
            // The first entry with a bound gives every earlier one zeros.
            self.bounds.resize(self.entries.len(), [0, 0]);
            self.bounds
                .push([record_start.unwrap_or(0), record_next.unwrap_or(0)]);
        }
        self.entries.push(ReceiptEntry {
            seq,
            start: last.start_offset,
            next: last.next_offset,
            flags,
        });
    }

    fn push_receipt(&mut self, r: &ProducerReceipt) {
        let last = ProducerAppendRecord {
            start_offset: r.start_offset,
            next_offset: r.next_offset,
            closed: r.closed,
            record_start: None,
            record_next: None,
        };
        self.push(r.producer_seq, &last, &r.items);
    }

    fn expand(&self, index: usize, e: &ReceiptEntry) -> ProducerReceipt {
        let mut receipt = ProducerReceipt {
            producer_seq: 0,
            start_offset: 0,
            next_offset: 0,
            closed: false,
            items: Vec::new(),
        };
        self.expand_into(index, e, &mut receipt);
        receipt
    }

    /// [`ReceiptLog::expand`] written into `out`, keeping its items'
    /// capacity.
    fn expand_into(&self, index: usize, e: &ReceiptEntry, out: &mut ProducerReceipt) {
        let closed = e.flags & CLOSED != 0;
        out.producer_seq = e.seq;
        out.start_offset = e.start;
        out.next_offset = e.next;
        out.closed = closed;
        if e.flags & CUSTOM_ITEMS != 0 {
            match self.items.get(&index) {
                Some(custom) => out.items.clone_from(custom),
                None => out.items.clear(),
            }
        } else {
            let [record_start, record_next] = self.bounds.get(index).copied().unwrap_or_default();
            out.items.clear();
            out.items.push(ProducerAppendRecord {
                start_offset: e.start,
                next_offset: e.next,
                closed,
                record_start: (e.flags & HAS_RECORD_START != 0).then_some(record_start),
                record_next: (e.flags & HAS_RECORD_NEXT != 0).then_some(record_next),
            });
        }
    }

    /// Keeps only the latest `limit` receipts (at least one).
    fn trim_to(&mut self, limit: usize) {
        let limit = limit.max(1);
        if self.entries.len() <= limit {
            return;
        }
        let drop = self.entries.len() - limit;
        self.entries.drain(..drop);
        if !self.bounds.is_empty() {
            self.bounds.drain(..drop);
            // Kept only while some entry has a bound, so equal receipts
            // compare equal however they were reached.
            if self
                .entries
                .iter()
                .all(|e| e.flags & HAS_RECORD_BOUNDS == 0)
            {
                self.bounds = Vec::new();
            }
        }
        if !self.items.is_empty() {
            self.items = std::mem::take(&mut self.items)
                .into_iter()
                .filter_map(|(i, v)| i.checked_sub(drop).map(|i| (i, v)))
                .collect();
        }
    }

    /// Whether `seq` lies before the oldest kept receipt (in one epoch,
    /// every sequence up to the current one was accepted, so such a seq is
    /// a retry whose receipt was trimmed, or never restored).
    fn trimmed_before(&self, seq: u64) -> bool {
        self.entries.first().is_some_and(|e| seq < e.seq)
    }

    /// The first receipt with this sequence number, with its index.
    fn find(&self, seq: u64) -> Option<(usize, ReceiptEntry)> {
        let index = if self.irregular {
            self.entries.iter().position(|e| e.seq == seq)?
        } else {
            let first = self.entries.first()?.seq;
            let i = usize::try_from(seq.checked_sub(first)?).ok()?;
            self.entries.get(i).filter(|e| e.seq == seq).map(|_| i)?
        };
        self.entries.get(index).map(|e| (index, *e))
    }

    /// Every receipt, expanded, written into `out` (reusing its receipts'
    /// item vectors).
    fn write_into(&self, out: &mut Vec<ProducerReceipt>) {
        out.truncate(self.entries.len());
        for (i, e) in self.entries.iter().enumerate() {
            if i == out.len() {
                out.push(self.expand(i, e));
            } else {
                self.expand_into(i, e, &mut out[i]);
            }
        }
    }
}
