//! The machine profile: reproduce the reference's quirks, or fix the harmful
//! ones (see `docs/profiles.md`).

use serde::{Deserialize, Serialize};

/// Default number of receipts a producer keeps under
/// [`MachineProfile::Corrected`].
pub const DEFAULT_PRODUCER_RECEIPT_LIMIT: u64 = 64;

/// Largest number of bytes one read or read plan covers under
/// [`MachineProfile::Corrected`]; a larger request gets a page of this size
/// whose `next_offset` is where to continue.
pub const CORRECTED_MAX_READ_BYTES: u64 = 16 * 1024 * 1024;

/// Which behaviour a group's state machine follows. Part of the group's
/// state: every replica of a group uses the same profile, and snapshots
/// carry it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MachineProfile {
    /// `ursula-stream` 0.5.0-patch1, quirk for quirk (the default).
    #[default]
    Reference,
    /// The reference with the quirks that lose data or grow without bound
    /// fixed; everything else identical.
    Corrected,
}

impl MachineProfile {
    /// The profile's name as the CLI and snapshots spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reference => "reference",
            Self::Corrected => "corrected",
        }
    }
}

impl std::fmt::Display for MachineProfile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for MachineProfile {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "reference" => Ok(Self::Reference),
            "corrected" => Ok(Self::Corrected),
            other => Err(format!(
                "unknown profile '{other}' (expected reference or corrected)"
            )),
        }
    }
}

/// The options a group's machine is created with. Snapshots of a
/// [`MachineProfile::Corrected`] group record them (field
/// `machine_options`); reference snapshots omit the field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MachineOptions {
    /// The profile.
    pub profile: MachineProfile,
    /// Under [`MachineProfile::Corrected`], how many of its latest receipts
    /// a producer keeps (at least 1). Ignored by the reference profile,
    /// whose receipts are never trimmed.
    #[serde(default = "default_receipt_limit")]
    pub producer_receipt_limit: u64,
}

fn default_receipt_limit() -> u64 {
    DEFAULT_PRODUCER_RECEIPT_LIMIT
}

impl Default for MachineOptions {
    fn default() -> Self {
        Self::reference()
    }
}

impl MachineOptions {
    /// The reference profile.
    pub const fn reference() -> Self {
        Self {
            profile: MachineProfile::Reference,
            producer_receipt_limit: DEFAULT_PRODUCER_RECEIPT_LIMIT,
        }
    }

    /// The corrected profile with the default receipt limit.
    pub const fn corrected() -> Self {
        Self {
            profile: MachineProfile::Corrected,
            producer_receipt_limit: DEFAULT_PRODUCER_RECEIPT_LIMIT,
        }
    }

    /// These options with the given profile.
    pub const fn with_profile(profile: MachineProfile) -> Self {
        Self {
            profile,
            producer_receipt_limit: DEFAULT_PRODUCER_RECEIPT_LIMIT,
        }
    }

    /// Whether the profile is [`MachineProfile::Corrected`].
    pub fn is_corrected(&self) -> bool {
        self.profile == MachineProfile::Corrected
    }

    /// What a snapshot records: `None` for the reference profile, so that
    /// reference snapshots stay byte-identical to the reference's.
    pub fn to_snapshot(self) -> Option<Self> {
        self.is_corrected().then_some(self)
    }

    /// The options a snapshot's `machine_options` field describes (`None`
    /// is the reference profile).
    pub fn from_snapshot(recorded: Option<Self>) -> Self {
        recorded.unwrap_or_else(Self::reference)
    }
}
