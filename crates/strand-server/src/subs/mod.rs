//! The reserved subscription API (PROTOCOL §6–7): the webhook signing key.

pub mod signing;
