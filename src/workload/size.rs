//! How object sizes are chosen in one case.

use crate::units::ByteSize;
use serde::Serialize;

/// How object sizes are chosen in one case.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SizeSpec {
    /// Every object has this size.
    Fixed {
        /// Size in bytes.
        bytes: u64,
    },
    /// Uniform between min and max, inclusive.
    Uniform {
        /// Smallest size in bytes.
        min_bytes: u64,
        /// Largest size in bytes.
        max_bytes: u64,
    },
    /// Log-uniform between min and max, inclusive: as many small as large orders of magnitude.
    LogUniform {
        /// Smallest size in bytes.
        min_bytes: u64,
        /// Largest size in bytes.
        max_bytes: u64,
    },
}

impl SizeSpec {
    /// Largest size this spec can produce, in bytes.
    pub fn max_bytes(&self) -> u64 {
        match *self {
            SizeSpec::Fixed { bytes } => bytes,
            SizeSpec::Uniform { max_bytes, .. } | SizeSpec::LogUniform { max_bytes, .. } => max_bytes,
        }
    }

    /// Mean size in bytes (for deriving object counts).
    pub fn mean_bytes(&self) -> u64 {
        match *self {
            SizeSpec::Fixed { bytes } => bytes,
            // Halves first: the sum of two sizes above 8 EiB overflows u64.
            SizeSpec::Uniform { min_bytes, max_bytes } => min_bytes / 2 + max_bytes / 2 + (min_bytes % 2 + max_bytes % 2) / 2,
            SizeSpec::LogUniform { min_bytes, max_bytes } => {
                let (lo, hi) = ((min_bytes.max(1)) as f64, (max_bytes.max(1)) as f64);
                if hi <= lo {
                    lo as u64
                } else {
                    ((hi - lo) / (hi / lo).ln()) as u64
                }
            }
        }
    }

    /// Label for case ids and tables: "94kB" or "uniform-1KiB-1MiB".
    pub fn label(&self) -> String {
        match *self {
            SizeSpec::Fixed { bytes } => ByteSize(bytes).label(),
            SizeSpec::Uniform { min_bytes, max_bytes } => format!("uniform-{}-{}", ByteSize(min_bytes), ByteSize(max_bytes)),
            SizeSpec::LogUniform { min_bytes, max_bytes } => format!("loguniform-{}-{}", ByteSize(min_bytes), ByteSize(max_bytes)),
        }
    }
}
