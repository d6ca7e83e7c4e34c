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
    receipts: Vec<ProducerReceipt>,
    /// True while `receipts[i].producer_seq == receipts[0].producer_seq + i`,
    /// which lets a retry find its receipt by index instead of scanning.
    consecutive: bool,
}

/// The replayed outcome of a duplicate request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Duplicate {
    pub(crate) offset: u64,
    pub(crate) next_offset: u64,
    pub(crate) closed: bool,
    pub(crate) items: Vec<ProducerAppendRecord>,
    pub(crate) echo: ProducerRequest,
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
    map: BTreeMap<String, ProducerState>,
}

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

impl ProducerState {
    fn find_receipt(&self, seq: u64) -> Option<&ProducerReceipt> {
        if self.consecutive {
            let first = self.receipts.first()?.producer_seq;
            let i = usize::try_from(seq.checked_sub(first)?).ok()?;
            return self.receipts.get(i).filter(|r| r.producer_seq == seq);
        }
        self.receipts.iter().find(|r| r.producer_seq == seq)
    }

    fn is_consecutive(receipts: &[ProducerReceipt]) -> bool {
        receipts
            .windows(2)
            .all(|w| w[0].producer_seq.checked_add(1) == Some(w[1].producer_seq))
    }
}

impl Producers {
    /// Evaluates a request (spec 04 §2.5). `None` always accepts.
    pub(crate) fn evaluate(
        &self,
        producer: Option<&ProducerRequest>,
    ) -> Result<Evaluation, StreamResponse> {
        let Some(p) = producer else {
            return Ok(Evaluation::Accept);
        };
        let Some(state) = self.map.get(&p.producer_id) else {
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
            let Some(receipt) = state.find_receipt(p.producer_seq) else {
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
                offset: receipt.start_offset,
                next_offset: receipt.next_offset,
                closed: receipt.closed,
                items: receipt.items.clone(),
                echo: ProducerRequest {
                    producer_id: p.producer_id.clone(),
                    producer_epoch: state.epoch,
                    producer_seq: receipt.producer_seq,
                },
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
    pub(crate) fn record(
        &mut self,
        p: &ProducerRequest,
        last: &ProducerAppendRecord,
        items: Vec<ProducerAppendRecord>,
    ) {
        let receipt = ProducerReceipt {
            producer_seq: p.producer_seq,
            start_offset: last.start_offset,
            next_offset: last.next_offset,
            closed: last.closed,
            items: items.clone(),
        };
        match self.map.get_mut(&p.producer_id) {
            Some(state) if state.epoch == p.producer_epoch => {
                state.seq = p.producer_seq;
                state.last_start_offset = last.start_offset;
                state.last_next_offset = last.next_offset;
                state.last_closed = last.closed;
                state.last_items = items;
                if state.consecutive {
                    state.consecutive = state
                        .receipts
                        .last()
                        .is_none_or(|r| r.producer_seq.checked_add(1) == Some(p.producer_seq));
                }
                state.receipts.push(receipt);
            }
            _ => {
                self.map.insert(
                    p.producer_id.clone(),
                    ProducerState {
                        epoch: p.producer_epoch,
                        seq: p.producer_seq,
                        last_start_offset: last.start_offset,
                        last_next_offset: last.next_offset,
                        last_closed: last.closed,
                        last_items: items,
                        receipts: vec![receipt],
                        consecutive: true,
                    },
                );
            }
        }
    }

    /// One producer's state (for transaction undo).
    pub(crate) fn get(&self, producer_id: &str) -> Option<&ProducerState> {
        self.map.get(producer_id)
    }

    /// Puts a producer's state back (`None` removes it).
    pub(crate) fn put(&mut self, producer_id: String, state: Option<ProducerState>) {
        match state {
            Some(state) => {
                self.map.insert(producer_id, state);
            }
            None => {
                self.map.remove(&producer_id);
            }
        }
    }

    /// The latest items of a producer (for `record_range_for_append`).
    pub(crate) fn last_items(&self, producer_id: &str) -> Option<&[ProducerAppendRecord]> {
        self.map.get(producer_id).map(|s| s.last_items.as_slice())
    }

    /// Snapshot form, sorted by producer id.
    pub(crate) fn snapshot(&self) -> Vec<ProducerSnapshot> {
        self.map
            .iter()
            .map(|(id, s)| ProducerSnapshot {
                producer_id: id.clone(),
                producer_epoch: s.epoch,
                producer_seq: s.seq,
                last_start_offset: s.last_start_offset,
                last_next_offset: s.last_next_offset,
                last_closed: s.last_closed,
                last_items: s.last_items.clone(),
                receipts: s.receipts.clone(),
            })
            .collect()
    }

    /// Inserts a restored producer; returns false if the id was present.
    /// An empty receipt list (legacy) becomes one receipt for the last write.
    pub(crate) fn insert_restored(&mut self, snapshot: ProducerSnapshot) -> bool {
        if self.map.contains_key(&snapshot.producer_id) {
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
        let consecutive = ProducerState::is_consecutive(&receipts);
        self.map.insert(
            snapshot.producer_id,
            ProducerState {
                epoch: snapshot.producer_epoch,
                seq: snapshot.producer_seq,
                last_start_offset: snapshot.last_start_offset,
                last_next_offset: snapshot.last_next_offset,
                last_closed: snapshot.last_closed,
                last_items: snapshot.last_items,
                receipts,
                consecutive,
            },
        );
        true
    }
}
