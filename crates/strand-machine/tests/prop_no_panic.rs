//! Property: no command sequence, query or snapshot makes the machine panic.
//!
//! * Random sequences of commands, direct appends, batches, transactions
//!   and queries drawn from the wild pools (invalid and reserved ids,
//!   erased buckets, blank paths, extreme epochs, offsets, TTLs and times,
//!   mismatched content types, malformed JSON payloads), mixed with mostly
//!   valid ones so deep states are reached. Every action must return.
//! * A failed `append_transaction` leaves `snapshot()` unchanged (checked
//!   inside `prop_common::run`).
//! * `restore` of a randomly mutated snapshot (JSON numbers replaced by
//!   extremes, arrays truncated or duplicated, strings and keys changed)
//!   returns `Ok` or `Err`; when it is `Ok`, further commands and every
//!   query on the restored machine must not panic either.

#![allow(clippy::unwrap_used)]

use crate::prop_common;

use proptest::prelude::*;
use serde_json::Value;
use strand_machine::StreamStateMachine;
use strand_snapshot::StreamSnapshot;

use prop_common::{Materializer, Mode, Op, Outcome, query, run};

/// Runs `ops` on `m`, returning the outcomes.
fn drive(m: &mut StreamStateMachine, mat: &mut Materializer, ops: &[Op]) -> Vec<Outcome> {
    for action in mat.setup() {
        run(m, &action);
    }
    ops.iter()
        .map(|op| {
            let action = mat.materialize(m, op);
            run(m, &action)
        })
        .collect()
}

/// Snapshot, restore and query everything; none of it may panic.
fn exercise(m: &mut StreamStateMachine, mat: &Materializer) {
    let _ = query::sweep(m, &mat.pools, mat.now);
    let snap = m.snapshot();
    let _ = StreamStateMachine::restore(snap);
}

/// Every node of `v` as a JSON pointer, in document order.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                pointers(item, format!("{at}/{i}"), out);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                let k = k.replace('~', "~0").replace('/', "~1");
                pointers(item, format!("{at}/{k}"), out);
            }
        }
        _ => {}
    }
    out.push(at);
}

const EXTREME_NUMBERS: [u64; 9] = [
    0,
    1,
    2,
    8,
    64,
    9_007_199_254_740_992,
    u64::MAX / 2,
    u64::MAX - 1,
    u64::MAX,
];

/// Whether `pointer` names one byte of a payload array (mutating those
/// only changes bytes, which restore never checks).
fn is_payload_byte(pointer: &str) -> bool {
    pointer
        .rsplit_once('/')
        .is_some_and(|(parent, last)| parent.ends_with("/payload") && last.parse::<u64>().is_ok())
}

/// Applies mutation `kind` with entropy `a`, `b` to one node of `v`,
/// keeping the node's JSON type so that the result usually still decodes.
fn mutate(v: &mut Value, a: u64, b: u64, kind: u8) {
    let mut all = Vec::new();
    pointers(v, String::new(), &mut all);
    all.retain(|p| !is_payload_byte(p));
    let at = &all[(a % all.len() as u64) as usize];
    let Some(node) = v.pointer_mut(at) else {
        return;
    };
    let pick = EXTREME_NUMBERS[(b % EXTREME_NUMBERS.len() as u64) as usize];
    match node {
        Value::Number(n) => {
            let n = n.as_u64().unwrap_or(0);
            *node = Value::from(match kind % 4 {
                0 => pick,
                1 => b % 48,
                2 => n.saturating_add(1),
                _ => n.saturating_sub(1),
            });
        }
        Value::Array(items) => match kind % 3 {
            0 => items.truncate((b % (items.len() as u64 + 1)) as usize),
            1 if !items.is_empty() => {
                let i = (b % items.len() as u64) as usize;
                let copy = items[i].clone();
                items.insert(i, copy);
            }
            _ if items.len() > 1 => {
                let i = (b % items.len() as u64) as usize;
                items.swap(0, i);
                items.reverse();
            }
            _ => {}
        },
        Value::String(s) => {
            *s = ["", "X", "bkt1", "zz", &"0".repeat(64), &"f".repeat(64)][(b % 6) as usize]
                .to_string();
        }
        Value::Bool(x) => *x = !*x,
        Value::Object(map) if kind == 5 && !map.is_empty() => {
            let key = map.keys().nth((b % map.len() as u64) as usize).cloned();
            if let Some(key) = key {
                map.remove(&key);
            }
        }
        Value::Object(_) | Value::Null => {}
    }
}

proptest! {
    #![proptest_config(prop_common::config(512))]

    #[test]
    fn wild_sequences_never_panic(ops in prop_common::ops(Mode::Wild, 40)) {
        let mut m = StreamStateMachine::new();
        let mut mat = Materializer::new(Mode::Wild);
        drive(&mut m, &mut mat, &ops);
        prop_assert_eq!(m.check_invariants(), Ok(()));
        exercise(&mut m, &mat);
        prop_assert_eq!(m.check_invariants(), Ok(()));
    }

    #[test]
    fn mostly_valid_sequences_never_panic(ops in prop_common::ops(Mode::Valid, 40)) {
        let mut m = StreamStateMachine::new();
        let mut mat = Materializer::new(Mode::Valid);
        drive(&mut m, &mut mat, &ops);
        prop_assert_eq!(m.check_invariants(), Ok(()));
        exercise(&mut m, &mat);
        prop_assert_eq!(m.check_invariants(), Ok(()));
    }
}

proptest! {
    #![proptest_config(prop_common::config(512))]

    #[test]
    fn mutated_snapshots_never_panic(
        setup in prop_common::ops(Mode::Valid, 30),
        mutations in prop::collection::vec((any::<u64>(), any::<u64>(), 0u8..6), 1..5),
        follow in prop_common::ops(Mode::Wild, 12),
    ) {
        let mut m = StreamStateMachine::new();
        let mut mat = Materializer::new(Mode::Valid);
        drive(&mut m, &mut mat, &setup);
        let mut v = serde_json::to_value(m.snapshot()).unwrap();
        for (a, b, kind) in mutations {
            mutate(&mut v, a, b, kind);
        }
        let Ok(snap) = serde_json::from_value::<StreamSnapshot>(v) else {
            return Ok(());
        };
        if let Ok(mut restored) = StreamStateMachine::restore(snap) {
            // Restore normalizes (spec 07 P4); a normalized snapshot is a
            // fixed point.
            let normalized = restored.snapshot();
            let again = StreamStateMachine::restore(normalized.clone());
            prop_assert!(again.is_ok(), "normalized snapshot failed to restore: {:?}", again.err());
            prop_assert_eq!(again.unwrap().snapshot(), normalized);
            let mut wild = Materializer::new(Mode::Wild);
            wild.now = mat.now;
            exercise(&mut restored, &wild);
            drive(&mut restored, &mut wild, &follow);
            exercise(&mut restored, &wild);
        }
    }
}
