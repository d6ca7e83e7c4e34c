//! A first look at strand's model: build stream ids, validate good and bad
//! ids, and print the JSON shapes strand writes.
//!
//! Run with `cargo run --example model_tour -p strand-model`.

use strand_model::{
    BucketStreamId, ColdChunkRef, StreamAttrs, normalize_stream_attrs, validate_bucket_id,
    validate_stream_id,
};

fn main() -> Result<(), serde_json::Error> {
    let plain = BucketStreamId::new("orders", "eu-west");
    // The affinity key is the second argument.
    let routed = BucketStreamId::with_affinity("orders", "tenant-7", "queue");
    println!("ids: {plain} and {routed}");

    for bucket in ["orders", "abc", "Orders"] {
        report(&format!("bucket {bucket:?}"), validate_bucket_id(bucket));
    }
    let candidates = [
        plain.clone(),
        routed.clone(),
        BucketStreamId::new("orders", "streams"),
        BucketStreamId::with_affinity("orders", "tenant-7", "snapshot"),
        BucketStreamId::new("orders", "a..b"),
    ];
    for id in &candidates {
        report(&format!("stream {id}"), validate_stream_id(id));
    }

    println!("plain id JSON:  {}", serde_json::to_string(&plain)?);
    println!("routed id JSON: {}", serde_json::to_string(&routed)?);

    let chunk = ColdChunkRef {
        end_offset: 4,
        s3_path: "cold/orders/0".to_owned(),
        object_size: 4,
        ..Default::default()
    };
    println!("cold chunk JSON: {}", serde_json::to_string(&chunk)?);

    let attrs: StreamAttrs = serde_json::from_str(r#"{"metadata":{"z":1,"a":1.0},"title":"T"}"#)?;
    println!(
        "attrs JSON ({} bytes, keys sorted): {}",
        attrs.encoded_len(),
        serde_json::to_string(&attrs)?
    );
    println!(
        "empty attrs normalize to: {:?}",
        normalize_stream_attrs(Some(StreamAttrs::default()))
    );
    Ok(())
}

fn report(what: &str, result: Result<(), String>) {
    match result {
        Ok(()) => println!("  ok    {what}"),
        Err(reason) => println!("  error {what}: {reason}"),
    }
}
