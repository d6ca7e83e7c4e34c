//! Concrete actions and how they are run on a machine.

use strand_machine::{StreamCommand, StreamResponse, StreamStateMachine};
use strand_model::{AppendStreamInput, BucketStreamId, ProducerRequest};
use strand_snapshot::StreamSnapshot;

use super::query::{Query, eval};

/// One concrete thing to do to a machine.
#[derive(Debug, Clone)]
pub(crate) enum Action {
    /// `apply(command)`.
    Cmd(StreamCommand),
    /// `append_borrowed`.
    Append {
        id: BucketStreamId,
        content_type: Option<String>,
        payload: Vec<u8>,
        close_after: bool,
        stream_seq: Option<String>,
        producer: Option<ProducerRequest>,
        now_ms: u64,
        record_match: Option<u64>,
    },
    /// `append_batch_borrowed`.
    Batch {
        id: BucketStreamId,
        content_type: Option<String>,
        payloads: Vec<Vec<u8>>,
        producer: Option<ProducerRequest>,
        now_ms: u64,
    },
    /// `append_transaction`.
    Transaction(Vec<StreamCommand>),
    /// Replace the machine by a fresh one that imported this snapshot (kept
    /// unchanged when the import fails).
    ReplaceByImport(Box<StreamSnapshot>),
    /// A query.
    Query(Query),
}

/// What running an action gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// `Debug` text of the result.
    pub(crate) text: String,
    /// Whether this was a state-changing action that succeeded (`None` for
    /// queries).
    pub(crate) success: Option<bool>,
}

fn response(r: &StreamResponse) -> Outcome {
    Outcome {
        text: format!("{r:?}"),
        success: Some(!r.is_error()),
    }
}

/// Runs `action` on `m`.
///
/// Also checks one property of `append_transaction` (spec 04 §7.3): after a
/// rollback, `snapshot()` equals the snapshot before the transaction.
pub(crate) fn run(m: &mut StreamStateMachine, action: &Action) -> Outcome {
    match action {
        Action::Cmd(c) => response(&m.apply(c.clone())),
        Action::Append {
            id,
            content_type,
            payload,
            close_after,
            stream_seq,
            producer,
            now_ms,
            record_match,
        } => response(&m.append_borrowed(AppendStreamInput {
            stream_id: id.clone(),
            content_type: content_type.as_deref(),
            payload,
            close_after: *close_after,
            stream_seq: stream_seq.clone(),
            producer: producer.clone(),
            now_ms: *now_ms,
            record_match: *record_match,
        })),
        Action::Batch {
            id,
            content_type,
            payloads,
            producer,
            now_ms,
        } => {
            let slices: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
            let r = m.append_batch_borrowed(
                id.clone(),
                content_type.as_deref(),
                &slices,
                producer.clone(),
                *now_ms,
            );
            Outcome {
                success: Some(r.is_ok()),
                text: format!("{r:?}"),
            }
        }
        Action::Transaction(commands) => {
            let before = m.snapshot();
            let r = m.append_transaction(commands.clone());
            if r.is_err() {
                assert_eq!(
                    m.snapshot(),
                    before,
                    "a failed transaction must leave the snapshot unchanged: {r:?}"
                );
            }
            Outcome {
                success: Some(r.is_ok()),
                text: format!("{r:?}"),
            }
        }
        Action::ReplaceByImport(snapshot) => {
            let mut fresh = StreamStateMachine::with_options(m.options());
            let r = fresh.apply(StreamCommand::ImportSnapshot {
                snapshot: snapshot.clone(),
            });
            if !r.is_error() {
                *m = fresh;
            }
            response(&r)
        }
        Action::Query(q) => Outcome {
            text: eval(m, q),
            success: None,
        },
    }
}
