//! The webhook signing key (PROTOCOL §6): Ed25519, published as a JWKS at
//! `/v1/stream/__ds/jwks.json`, and the `webhook-signature` header every
//! delivery carries.
//!
//! The header is `t=<unix seconds>,kid=<kid>,ed25519=<signature>`, the
//! signature (base64url, no padding) covering the bytes `<unix seconds>.`
//! followed by the raw request body; a receiver finds the key by `kid` in
//! the JWKS and checks the timestamp is recent.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::Signer as _;

/// An Ed25519 key that signs webhook deliveries.
///
/// Its `Debug` shows the key id only, never the secret seed.
#[derive(Clone)]
pub struct SigningKey {
    key: ed25519_dalek::SigningKey,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.kid())
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// The key of a 32-byte secret seed (RFC 8032's private key).
    pub fn from_seed(seed: [u8; 32]) -> Self {
        Self {
            key: ed25519_dalek::SigningKey::from_bytes(&seed),
        }
    }

    /// A fresh key from the operating system's random source.
    ///
    /// # Panics
    ///
    /// When the operating system has no randomness to give, which leaves
    /// nothing safe to sign with.
    pub fn generate() -> Self {
        let mut seed = [0u8; 32];
        if let Err(e) = getrandom::fill(&mut seed) {
            panic!("no randomness for a webhook signing key: {e}");
        }
        let key = Self::from_seed(seed);
        seed.fill(0);
        key
    }

    /// The secret seed, to store the key and restore it with
    /// [`SigningKey::from_seed`].
    pub fn seed(&self) -> [u8; 32] {
        self.key.to_bytes()
    }

    /// The 32-byte public key.
    fn public(&self) -> [u8; 32] {
        self.key.verifying_key().to_bytes()
    }

    /// The key id: `ds_` and the first 16 lowercase hex digits of the
    /// BLAKE3 hash of the public key, the same for the same seed.
    pub fn kid(&self) -> String {
        let hash = blake3::hash(&self.public());
        let hex = hash.to_hex();
        format!("ds_{}", &hex.as_str()[..16])
    }

    /// The JSON Web Key Set that publishes the public key (RFC 8037: an
    /// `OKP` key on curve `Ed25519`, `x` the public key in base64url
    /// without padding).
    pub fn jwks(&self) -> serde_json::Value {
        serde_json::json!({
            "keys": [{
                "kty": "OKP",
                "crv": "Ed25519",
                "x": URL_SAFE_NO_PAD.encode(self.public()),
                "kid": self.kid(),
                "alg": "EdDSA",
                "use": "sig",
            }]
        })
    }

    /// The `webhook-signature` header value for `body` sent at
    /// `unix_seconds`: `t=<unix>,kid=<kid>,ed25519=<signature>`, the
    /// signature (base64url, no padding) over `<unix>.<body>`.
    pub fn signature_header(&self, unix_seconds: u64, body: &[u8]) -> String {
        let signature = self.key.sign(&signed_bytes(unix_seconds, body));
        format!(
            "t={unix_seconds},kid={},ed25519={}",
            self.kid(),
            URL_SAFE_NO_PAD.encode(signature.to_bytes())
        )
    }
}

/// The bytes a signature covers: the decimal timestamp, `.`, the body.
fn signed_bytes(unix_seconds: u64, body: &[u8]) -> Vec<u8> {
    let stamp = unix_seconds.to_string();
    let mut bytes = Vec::with_capacity(stamp.len() + 1 + body.len());
    bytes.extend_from_slice(stamp.as_bytes());
    bytes.push(b'.');
    bytes.extend_from_slice(body);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::{Signature, VerifyingKey};

    const SEED: [u8; 32] = [7; 32];

    /// Splits a header as the suite's `/^t=(\d+),kid=([^,]+),ed25519=([A-Za-z0-9_-]+)$/` does.
    fn parse_header(header: &str) -> Option<(u64, &str, &str)> {
        let (t, rest) = header.strip_prefix("t=")?.split_once(",kid=")?;
        let (kid, sig) = rest.split_once(",ed25519=")?;
        let t_ok = !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        let kid_ok = !kid.is_empty() && !kid.contains(',');
        let sig_ok = !sig.is_empty()
            && sig
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !(t_ok && kid_ok && sig_ok) {
            return None;
        }
        Some((t.parse().ok()?, kid, sig))
    }

    /// Verifies a header as a receiver does, with the key from the JWKS.
    fn verify(jwks: &serde_json::Value, header: &str, body: &[u8]) -> bool {
        let Some((t, kid, sig)) = parse_header(header) else {
            return false;
        };
        let Some(key) = jwks["keys"]
            .as_array()
            .and_then(|keys| keys.iter().find(|k| k["kid"] == kid))
        else {
            return false;
        };
        let Some(x) = key["x"].as_str() else {
            return false;
        };
        let (Ok(x), Ok(sig)) = (URL_SAFE_NO_PAD.decode(x), URL_SAFE_NO_PAD.decode(sig)) else {
            return false;
        };
        let (Ok(x), Ok(sig)) = (<[u8; 32]>::try_from(x), <[u8; 64]>::try_from(sig)) else {
            return false;
        };
        let Ok(public) = VerifyingKey::from_bytes(&x) else {
            return false;
        };
        public
            .verify_strict(&signed_bytes(t, body), &Signature::from_bytes(&sig))
            .is_ok()
    }

    #[test]
    fn signatures_verify_and_only_for_their_bytes() {
        let key = SigningKey::from_seed(SEED);
        let jwks = key.jwks();
        let body = br#"{"subscription_id":"sub-1","streams":[]}"#;
        let header = key.signature_header(1_700_000_000, body);
        assert!(verify(&jwks, &header, body));
        // Another body, another timestamp, another key: refused.
        assert!(!verify(&jwks, &header, b"{}"));
        let moved = header.replacen("t=1700000000", "t=1700000001", 1);
        assert!(!verify(&jwks, &moved, body));
        let other = SigningKey::from_seed([8; 32]);
        assert!(!verify(&other.jwks(), &header, body));
        // An empty body signs `<t>.` and verifies too.
        assert!(verify(&jwks, &key.signature_header(0, b""), b""));
    }

    #[test]
    fn header_has_the_suites_shape() {
        let key = SigningKey::generate();
        for body in [&b""[..], b"{}", &[0xff; 300]] {
            let header = key.signature_header(1_234_567_890, body);
            let (t, kid, sig) = parse_header(&header).expect("the suite's regex matches");
            assert_eq!(t, 1_234_567_890);
            assert_eq!(kid, key.kid());
            // 64 bytes in base64url without padding.
            assert_eq!(sig.len(), 86);
        }
        assert!(parse_header("t=1,kid=a,ed25519=ab+c").is_none());
        assert!(parse_header("t=x,kid=a,ed25519=abc").is_none());
    }

    #[test]
    fn kid_is_stable_for_a_seed() {
        let key = SigningKey::from_seed(SEED);
        let kid = key.kid();
        assert_eq!(kid, SigningKey::from_seed(SEED).kid());
        assert_eq!(kid.len(), 3 + 16);
        assert!(kid.starts_with("ds_"));
        assert!(
            kid[3..]
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
        let public = key.key.verifying_key().to_bytes();
        assert_eq!(kid[3..], blake3::hash(&public).to_hex()[..16]);
        assert_ne!(kid, SigningKey::from_seed([8; 32]).kid());
        assert_eq!(key.seed(), SEED);
        assert_eq!(SigningKey::from_seed(key.seed()).kid(), kid);
        assert_ne!(SigningKey::generate().seed(), SigningKey::generate().seed());
    }

    #[test]
    fn jwks_shape() {
        let key = SigningKey::from_seed(SEED);
        let jwks = key.jwks();
        let keys = jwks["keys"].as_array().expect("keys is an array");
        assert_eq!(keys.len(), 1);
        let k = &keys[0];
        assert_eq!(k["kty"], "OKP");
        assert_eq!(k["crv"], "Ed25519");
        assert_eq!(k["alg"], "EdDSA");
        assert_eq!(k["use"], "sig");
        assert_eq!(k["kid"], key.kid());
        let x = k["x"].as_str().expect("x is a string");
        assert_eq!(x.len(), 43);
        assert_eq!(
            URL_SAFE_NO_PAD.decode(x).expect("base64url"),
            key.key.verifying_key().to_bytes()
        );
        assert_eq!(k.as_object().map(|o| o.len()), Some(6));
    }

    #[test]
    fn debug_hides_the_seed() {
        let key = SigningKey::from_seed([0xab; 32]);
        let shown = format!("{key:?}");
        assert!(shown.contains(&key.kid()));
        assert!(!shown.contains("171") && !shown.contains("ab, ab") && !shown.contains("abab"));
    }
}
