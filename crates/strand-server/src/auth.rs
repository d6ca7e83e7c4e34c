//! Who may do what: bearer tokens (JWT) and the rights they grant.
//!
//! Authentication is off unless a key is configured (`--auth-secret-file`
//! for HS256, `--auth-jwks-file` for EdDSA and RS256 public keys). With it
//! on, every route but `GET /__strand/health` and CORS preflights needs
//! `Authorization: Bearer <token>`. A token's claims:
//!
//! ```json
//! {"sub": "alice", "exp": 1767225600,
//!  "grants": {"acme": ["read", "write"], "logs/app-": ["read"], "*": ["admin"]}}
//! ```
//!
//! A grant key is a bucket (`acme`), a bucket and a stream-name prefix
//! (`logs/app-`: streams of bucket `logs` whose name, affinity path
//! included, starts with `app-`), or `*` for every bucket. Rights: `read`
//! (GET, HEAD), `write` (PUT, POST, DELETE of streams and their extension
//! routes, creating buckets) and `admin` (the `/__strand/` quota, usage and
//! purge routes). `exp` is required. A missing, malformed, badly signed or
//! expired token is 401 with `WWW-Authenticate`; a valid token without the
//! right is 403. Tokens are never logged; the request log names `sub`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use axum::http::{HeaderMap, StatusCode, header};
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::errors::ApiError;

/// A right a token may grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Right {
    /// Read streams.
    Read,
    /// Create, append to, close and delete streams; create buckets.
    Write,
    /// The admin plane: quotas, usage, purge.
    Admin,
}

impl fmt::Display for Right {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Admin => "admin",
        })
    }
}

impl std::str::FromStr for Right {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "read" => Ok(Self::Read),
            "write" => Ok(Self::Write),
            "admin" => Ok(Self::Admin),
            other => Err(format!("unknown right {other:?} (read, write or admin)")),
        }
    }
}

/// The claims strand reads from a token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// Who the token speaks for (logged).
    #[serde(default)]
    pub sub: String,
    /// Expiry, seconds since the Unix epoch.
    pub exp: u64,
    /// Rights by bucket, bucket/prefix or `*`.
    #[serde(default)]
    pub grants: BTreeMap<String, Vec<Right>>,
}

impl Claims {
    /// Whether these claims grant `right` on a stream (or, with `stream`
    /// `None`, on the bucket itself).
    pub fn allows(&self, bucket: &str, stream: Option<&str>, right: Right) -> bool {
        self.grants.iter().any(|(key, rights)| {
            if !rights.contains(&right) {
                return false;
            }
            if key == "*" || key == bucket {
                return true;
            }
            match (key.split_once('/'), stream) {
                (Some((b, prefix)), Some(name)) => b == bucket && name.starts_with(prefix),
                _ => false,
            }
        })
    }
}

/// The keys tokens are checked against.
#[derive(Clone)]
pub struct Verifier {
    keys: Vec<(Algorithm, Option<String>, DecodingKey)>,
}

impl fmt::Debug for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Verifier")
            .field("keys", &self.keys.len())
            .finish_non_exhaustive()
    }
}

/// Reads a shared secret file: its bytes, without a trailing newline.
pub fn read_secret(path: &Path) -> Result<Vec<u8>, String> {
    let mut bytes =
        std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        bytes.pop();
    }
    if bytes.len() < 16 {
        return Err(format!(
            "{}: a shared secret needs at least 16 bytes",
            path.display()
        ));
    }
    Ok(bytes)
}

impl Verifier {
    /// Builds a verifier from an HS256 secret file and/or a JWKS file of
    /// EdDSA (Ed25519) and RS256 public keys. `None` when neither is given:
    /// authentication is off.
    pub fn from_files(secret: Option<&Path>, jwks: Option<&Path>) -> Result<Option<Self>, String> {
        let mut keys = Vec::new();
        if let Some(path) = secret {
            let key = DecodingKey::from_secret(&read_secret(path)?)
                .map_err(|e| format!("{}: unusable secret: {e}", path.display()))?;
            keys.push((Algorithm::HS256, None, key));
        }
        if let Some(path) = jwks {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let set: JwkSet = serde_json::from_str(&text)
                .map_err(|e| format!("{}: not a JWKS document: {e}", path.display()))?;
            for jwk in &set.keys {
                let key = DecodingKey::from_jwk(jwk)
                    .map_err(|e| format!("{}: unusable key: {e}", path.display()))?;
                let alg = match &jwk.algorithm {
                    jsonwebtoken::jwk::AlgorithmParameters::OctetKeyPair(_) => Algorithm::EdDSA,
                    jsonwebtoken::jwk::AlgorithmParameters::RSA(_) => Algorithm::RS256,
                    _ => {
                        return Err(format!(
                            "{}: only Ed25519 (OKP) and RSA keys are supported",
                            path.display()
                        ));
                    }
                };
                keys.push((alg, jwk.common.key_id.clone(), key));
            }
        }
        Ok(if keys.is_empty() {
            None
        } else {
            Some(Self { keys })
        })
    }

    /// Checks a token: signature, algorithm, expiry. The error is the
    /// reason, for the 401 (never the token itself).
    pub fn verify(&self, token: &str) -> Result<Claims, String> {
        let header =
            jsonwebtoken::decode_header(token).map_err(|_| "malformed token".to_owned())?;
        let mut last = "no key matches the token's algorithm".to_owned();
        for (alg, kid, key) in &self.keys {
            if *alg != header.alg {
                continue;
            }
            if let (Some(want), Some(have)) = (kid, &header.kid)
                && want != have
            {
                continue;
            }
            let mut validation = Validation::new(*alg);
            validation.leeway = 0;
            validation.set_required_spec_claims(&["exp"]);
            match jsonwebtoken::decode::<Claims>(token, key, &validation) {
                Ok(data) => return Ok(data.claims),
                Err(e) => {
                    last = match e.kind() {
                        jsonwebtoken::errors::ErrorKind::ExpiredSignature => "token expired".into(),
                        jsonwebtoken::errors::ErrorKind::InvalidSignature => "bad signature".into(),
                        _ => "invalid token".into(),
                    }
                }
            }
        }
        Err(last)
    }
}

/// Signs an HS256 token (the `token` subcommand and tests).
pub fn sign_hs256(secret: &[u8], claims: &Claims) -> Result<String, String> {
    let key = EncodingKey::from_secret(secret).map_err(|e| format!("unusable secret: {e}"))?;
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &key)
        .map_err(|e| format!("cannot sign: {e}"))
}

/// The 401 answer.
fn unauthorized(reason: &str) -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        format!("authentication required: {reason}"),
    )
    .with_header(
        header::WWW_AUTHENTICATE,
        format!("Bearer realm=\"strand\", error=\"invalid_token\", error_description=\"{reason}\""),
    )
}

/// Decides a request: `Ok(None)` when authentication is off, the token's
/// subject when it grants `right`, else 401 or 403.
pub fn authorize(
    verifier: Option<&Verifier>,
    headers: &HeaderMap,
    bucket: &str,
    stream: Option<&str>,
    right: Right,
) -> Result<Option<String>, ApiError> {
    let Some(verifier) = verifier else {
        return Ok(None);
    };
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Err(unauthorized("no bearer token")
            .with_header(header::WWW_AUTHENTICATE, "Bearer realm=\"strand\""));
    };
    let token = value
        .to_str()
        .ok()
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .ok_or_else(|| unauthorized("the Authorization header is not a bearer token"))?;
    let claims = verifier
        .verify(token)
        .map_err(|reason| unauthorized(&reason))?;
    if claims.allows(bucket, stream, right) {
        Ok(Some(claims.sub))
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "the token of {:?} does not grant {right} on {bucket}{}",
                claims.sub,
                stream.map(|s| format!("/{s}")).unwrap_or_default()
            ),
        ))
    }
}

/// The subject of an authorized request, carried to the request log in
/// the response's extensions.
#[derive(Debug, Clone)]
pub struct Subject(pub String);

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn claims(grants: &[(&str, &[Right])]) -> Claims {
        Claims {
            sub: "t".into(),
            exp: 4_102_444_800,
            grants: grants
                .iter()
                .map(|(k, r)| ((*k).to_owned(), r.to_vec()))
                .collect(),
        }
    }

    #[test]
    fn grants_match_buckets_prefixes_and_star() {
        let c = claims(&[
            ("acme", &[Right::Read]),
            ("logs/app-", &[Right::Write]),
            ("*", &[Right::Admin]),
        ]);
        assert!(c.allows("acme", Some("x"), Right::Read));
        assert!(!c.allows("acme", Some("x"), Right::Write));
        assert!(c.allows("logs", Some("app-1"), Right::Write));
        assert!(!c.allows("logs", Some("db-1"), Right::Write));
        assert!(!c.allows("logs", None, Right::Write));
        assert!(c.allows("anything", None, Right::Admin));
        assert!(!c.allows("other", Some("x"), Right::Read));
    }

    #[test]
    fn tokens_verify_and_expire() {
        let dir = std::env::temp_dir().join(format!("strand-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let secret = dir.join("secret");
        std::fs::write(&secret, "0123456789abcdef0123\n").unwrap();
        let v = Verifier::from_files(Some(&secret), None).unwrap().unwrap();
        let good = claims(&[("acme", &[Right::Read])]);
        let token = sign_hs256(b"0123456789abcdef0123", &good).unwrap();
        assert_eq!(v.verify(&token).unwrap(), good);
        let mut old = good.clone();
        old.exp = 1;
        let expired = sign_hs256(b"0123456789abcdef0123", &old).unwrap();
        assert_eq!(v.verify(&expired).unwrap_err(), "token expired");
        let forged = sign_hs256(b"another-secret-of-16+", &good).unwrap();
        assert_eq!(v.verify(&forged).unwrap_err(), "bad signature");
        assert!(v.verify("not.a.token").is_err());
        std::fs::write(&secret, "short").unwrap();
        assert!(Verifier::from_files(Some(&secret), None).is_err());
        assert!(Verifier::from_files(None, None).unwrap().is_none());
    }
}
