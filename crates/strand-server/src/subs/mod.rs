//! The reserved subscription API (PROTOCOL §6–7): webhook signing keys and safe webhook delivery.

pub mod signing;
pub mod webhook;
