//! Callback tokens: what a wake's receiver (webhook) or claimer
//! (pull-wake) presents to acknowledge it. A token names the subscription
//! and the wake's generation and expires; it is a keyed BLAKE3 MAC under a
//! key derived from the registry's shared secret, so every node accepts
//! the tokens any node issued, and nothing about it is stored.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

/// How long a token is accepted after it is issued.
pub const TOKEN_LIFETIME_MS: u64 = 3_600_000;

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    sub: String,
    generation: u64,
    exp_ms: u64,
}

/// Why a token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Malformed, forged, or for another subscription.
    Invalid,
    /// Past its lifetime.
    Expired,
}

/// The MAC key for tokens, derived from the shared secret.
pub fn key(seed: &[u8; 32]) -> [u8; 32] {
    blake3::derive_key("strand 2026 subscription callback tokens", seed)
}

/// A token for subscription `id`'s wake of `generation`.
pub fn issue(key: &[u8; 32], id: &str, generation: u64, now_ms: u64) -> String {
    let claims = Claims {
        sub: id.to_owned(),
        generation,
        exp_ms: now_ms.saturating_add(TOKEN_LIFETIME_MS),
    };
    let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).unwrap_or_default());
    let mac = blake3::keyed_hash(key, payload.as_bytes());
    format!("{payload}.{}", URL_SAFE_NO_PAD.encode(mac.as_bytes()))
}

/// The generation a token of subscription `id` was issued for.
///
/// # Errors
///
/// [`Refused`] for a malformed, forged, foreign or expired token.
pub fn check(key: &[u8; 32], token: &str, id: &str, now_ms: u64) -> Result<u64, Refused> {
    let (payload, mac) = token.split_once('.').ok_or(Refused::Invalid)?;
    let mac = URL_SAFE_NO_PAD.decode(mac).map_err(|_| Refused::Invalid)?;
    let expected = blake3::keyed_hash(key, payload.as_bytes());
    // `blake3::Hash` compares in constant time.
    let given = <[u8; 32]>::try_from(mac.as_slice()).map_err(|_| Refused::Invalid)?;
    if expected != blake3::Hash::from(given) {
        return Err(Refused::Invalid);
    }
    let claims: Claims = URL_SAFE_NO_PAD
        .decode(payload)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or(Refused::Invalid)?;
    if claims.sub != id {
        return Err(Refused::Invalid);
    }
    if now_ms > claims.exp_ms {
        return Err(Refused::Expired);
    }
    Ok(claims.generation)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_refuse() {
        let k = key(&[1; 32]);
        let t = issue(&k, "sub-1", 7, 1_000);
        assert_eq!(check(&k, &t, "sub-1", 2_000), Ok(7));
        assert_eq!(check(&k, &t, "sub-2", 2_000), Err(Refused::Invalid));
        assert_eq!(
            check(&k, &t, "sub-1", 1_000 + TOKEN_LIFETIME_MS + 1),
            Err(Refused::Expired)
        );
        assert_eq!(
            check(&key(&[2; 32]), &t, "sub-1", 2_000),
            Err(Refused::Invalid)
        );
        let mut forged = t.clone();
        forged.insert(1, 'x');
        assert_eq!(check(&k, &forged, "sub-1", 2_000), Err(Refused::Invalid));
        assert_eq!(check(&k, "nonsense", "sub-1", 2_000), Err(Refused::Invalid));
    }
}
