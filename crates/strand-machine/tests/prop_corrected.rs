//! Properties of the corrected profile (issue 16, `docs/profiles.md`).
//!
//! 1. **Exact restore, no exceptions.** For a random op sequence split at a
//!    random point, a corrected machine A and B = `restore(A.snapshot())`
//!    (and C, restored through JSON text, and D, through the binary codec)
//!    answer every later op identically and write identical snapshots. Unlike
//!    `prop_restore_equivalence.rs` (reference profile), nothing is
//!    excluded: affinity ties, retention over hot data only (spec 07 P2),
//!    huge external payloads and the P3 flush are all generated.
//! 2. **Differential.** A reference machine R and a corrected machine C fed
//!    the same ops give the same responses and query results on every step
//!    that touches none of the corrected paths. A step that does (see
//!    [`diverges`]) may legitimately leave the two states different, so the
//!    comparison stops there; read-side queries of streams that took an
//!    external write (kept as external segments only by C) and reads longer
//!    than the corrected page are skipped.

#![allow(clippy::unwrap_used)]

use crate::prop_common;

use std::collections::BTreeSet;

use proptest::prelude::*;
use strand_machine::{StreamCommand, StreamStateMachine};
use strand_model::{BucketStreamId, CORRECTED_MAX_READ_BYTES, MachineProfile};
use strand_snapshot::SnapshotFormat;

use prop_common::{Action, Materializer, Mode, Op, Query, query, run};

fn restore_via(m: &StreamStateMachine, format: Option<SnapshotFormat>) -> StreamStateMachine {
    match format {
        None => StreamStateMachine::restore(m.snapshot()).unwrap(),
        Some(format) => {
            let mut bytes = Vec::new();
            strand_machine::write_snapshot(m, format, &mut bytes).unwrap();
            strand_machine::restore_from_slice(&bytes).unwrap()
        }
    }
}

fn check_restore(mode: Mode, ops: &[Op], k: usize) {
    let mut mat = Materializer::new(mode);
    let mut a = StreamStateMachine::with_profile(MachineProfile::Corrected);
    for action in mat.setup() {
        run(&mut a, &action);
    }
    for op in &ops[..k] {
        let action = mat.materialize(&a, op);
        run(&mut a, &action);
    }
    let snap = a.snapshot();
    let mut copies: Vec<StreamStateMachine> = [
        None,
        Some(SnapshotFormat::Json),
        Some(SnapshotFormat::Binary),
    ]
    .into_iter()
    .map(|f| restore_via(&a, f))
    .collect();
    for b in &copies {
        assert_eq!(b.profile(), MachineProfile::Corrected);
        assert_eq!(b.snapshot(), snap, "P1: restore(S).snapshot() == S");
    }
    for (i, op) in ops[k..].iter().enumerate() {
        let action = mat.materialize(&a, op);
        let ra = run(&mut a, &action);
        let sa = a.snapshot();
        for b in &mut copies {
            assert_eq!(ra, run(b, &action), "suffix op {i}: {action:?}");
            assert_eq!(sa, b.snapshot(), "snapshot after suffix op {i}: {action:?}");
        }
    }
    let qa = query::sweep(&mut a, &mat.pools, mat.now);
    for b in &mut copies {
        assert_eq!(qa, query::sweep(b, &mat.pools, mat.now));
    }
}

/// The stream a command writes to with a time, and that time.
fn timed_target(c: &StreamCommand) -> Option<(&BucketStreamId, u64)> {
    match c {
        StreamCommand::Append {
            stream_id, now_ms, ..
        }
        | StreamCommand::AppendExternal {
            stream_id, now_ms, ..
        }
        | StreamCommand::AppendBatch {
            stream_id, now_ms, ..
        }
        | StreamCommand::TouchStreamAccess {
            stream_id, now_ms, ..
        }
        | StreamCommand::Close {
            stream_id, now_ms, ..
        } => Some((stream_id, *now_ms)),
        _ => None,
    }
}

/// Whether a command of R's state may take a corrected path.
fn command_diverges(r: &StreamStateMachine, c: &StreamCommand) -> bool {
    if let Some((id, now)) = timed_target(c)
        && r.head(id).is_some_and(|h| now < h.last_ttl_touch_at_ms)
    {
        return true; // fix 7: a renewal backwards
    }
    match c {
        // fix 6
        StreamCommand::PurgeBucket { bucket_id } => {
            !r.bucket_exists(bucket_id)
                && !r
                    .snapshot_without_streams()
                    .erased_buckets
                    .contains(bucket_id)
        }
        // fix 5 (only shared inputs are matched against state)
        StreamCommand::CompactCold { old_chunks, .. } => old_chunks.iter().any(|c| c.shared_object),
        // fix 1: a flush below an external append lowers R's frontier
        StreamCommand::FlushCold { stream_id, chunk } => r
            .snapshot_entries()
            .find(|e| &e.metadata.stream_id == stream_id)
            .is_some_and(|e| e.cold_frontier_offset > chunk.end_offset),
        // fix 9: offsets or gauges near u64::MAX
        StreamCommand::AppendExternal { payload, .. } => payload.payload_len > u64::MAX / 4,
        StreamCommand::CreateExternal {
            initial_payload, ..
        } => initial_payload.payload_len > u64::MAX / 4,
        _ => false,
    }
}

/// Whether an action may take a corrected path (see the module docs).
fn diverges(r: &StreamStateMachine, action: &Action) -> bool {
    match action {
        Action::Cmd(c) => command_diverges(r, c),
        Action::Transaction(commands) => commands.iter().any(|c| command_diverges(r, c)),
        Action::Append { id, now_ms, .. } | Action::Batch { id, now_ms, .. } => {
            r.head(id).is_some_and(|h| *now_ms < h.last_ttl_touch_at_ms)
        }
        // Both machines import the same snapshot (each keeps its profile).
        Action::ReplaceByImport(_) | Action::Query(_) => false,
    }
}

/// Whether a query's answer may differ between the profiles without a
/// divergence of state: reads and plans of streams holding external
/// segments in C, and reads longer than the corrected page.
fn query_differs(r: &StreamStateMachine, q: &Query, external: &BTreeSet<BucketStreamId>) -> bool {
    let long = |id: &BucketStreamId, offset: u64, n: usize| {
        let tail = r.head(id).map_or(0, |h| h.tail_offset);
        n as u64 > CORRECTED_MAX_READ_BYTES
            && tail.saturating_sub(offset) > CORRECTED_MAX_READ_BYTES
    };
    match q {
        Query::ExternalSegments(id) | Query::Bootstrap(id) => external.contains(id),
        Query::Read(id, o, n) | Query::ReadPlan(id, o, n) | Query::ReadPlanAt(id, o, n, _) => {
            external.contains(id) || long(id, *o, *n)
        }
        _ => false,
    }
}

/// The stream an action writes external data to.
fn external_target(action: &Action) -> Vec<BucketStreamId> {
    let of = |c: &StreamCommand| match c {
        StreamCommand::CreateExternal { stream_id, .. }
        | StreamCommand::AppendExternal { stream_id, .. } => Some(stream_id.clone()),
        _ => None,
    };
    match action {
        Action::Cmd(c) => of(c).into_iter().collect(),
        Action::Transaction(cs) => cs.iter().filter_map(of).collect(),
        _ => Vec::new(),
    }
}

fn check_differential(mode: Mode, ops: &[Op]) {
    let mut mat = Materializer::new(mode);
    mat.pools = mat.pools.without_ties();
    let mut r = StreamStateMachine::new();
    let mut c = StreamStateMachine::with_profile(MachineProfile::Corrected);
    for action in mat.setup() {
        assert_eq!(run(&mut r, &action), run(&mut c, &action));
    }
    let mut external = BTreeSet::new();
    for (i, op) in ops.iter().enumerate() {
        let action = mat.materialize(&r, op);
        if diverges(&r, &action) {
            return;
        }
        let (or, oc) = (run(&mut r, &action), run(&mut c, &action));
        if let Action::Query(q) = &action
            && query_differs(&r, q, &external)
        {
            continue;
        }
        assert_eq!(or, oc, "op {i}: {action:?}");
        external.extend(external_target(&action));
    }
}

proptest! {
    #![proptest_config(prop_common::config(384))]

    #[test]
    fn corrected_restore_is_exact(
        ops in prop_common::ops(Mode::Valid, 40),
        split in any::<prop::sample::Index>(),
    ) {
        check_restore(Mode::Valid, &ops, split.index(ops.len() + 1));
    }

    #[test]
    fn corrected_restore_is_exact_after_nonsense(
        ops in prop_common::ops(Mode::Wild, 40),
        split in any::<prop::sample::Index>(),
    ) {
        check_restore(Mode::Wild, &ops, split.index(ops.len() + 1));
    }

    #[test]
    fn corrected_answers_like_the_reference_off_the_corrected_paths(
        ops in prop_common::ops(Mode::Valid, 40),
    ) {
        check_differential(Mode::Valid, &ops);
    }

    #[test]
    fn corrected_answers_like_the_reference_after_nonsense(
        ops in prop_common::ops(Mode::Wild, 40),
    ) {
        check_differential(Mode::Wild, &ops);
    }
}
