//! Exact units: byte sizes and durations parsed from the text people write.
//!
//! "kB"/"MB"/"GB" are decimal (1000-based), "KiB"/"MiB"/"GiB" binary (1024-based); both are
//! accepted and never guessed, so "2.6MB" is exactly 2,600,000 bytes. A fractional value must land
//! on a whole byte (or nanosecond): "1.5B" is an error, not a rounding. This module never rounds
//! silently and never panics on input.

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A size in bytes, parsed from text like `4KiB`, `94kB`, `2.6MB` or `1000000`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

/// A duration in nanoseconds, parsed from text like `30s`, `500ms`, `2m` or `1h`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Nanos(pub u64);

/// Why a unit string was refused; the message quotes the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnitError(pub String);

/// Every unit a size is read in, case aside.
const SIZE_UNITS: &[(&str, u64)] = &[
    ("", 1),
    ("b", 1),
    ("kb", 1_000),
    ("mb", 1_000_000),
    ("gb", 1_000_000_000),
    ("tb", 1_000_000_000_000),
    ("pb", 1_000_000_000_000_000),
    ("kib", 1 << 10),
    ("mib", 1 << 20),
    ("gib", 1 << 30),
    ("tib", 1 << 40),
    ("pib", 1 << 50),
];

/// The units `ByteSize::label` writes, largest first: each unit of `SIZE_UNITS`, so a size is
/// labelled in the largest unit a job could write it in exactly (1 TiB reads "1TiB" in a case id,
/// not "1024GiB"; 1 TB "1TB", not "976562500KiB"); a test holds the two tables together.
const BINARY_LABEL_UNITS: [(&str, u128); 5] = [("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
const DECIMAL_LABEL_UNITS: [(&str, u128); 5] =
    [("PB", 1_000_000_000_000_000), ("TB", 1_000_000_000_000), ("GB", 1_000_000_000), ("MB", 1_000_000), ("kB", 1_000)];

const DURATION_UNITS: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("min", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Splits "2.6MB" into ("2.6", "MB"); the number part is digits with at most one dot.
fn split_number(text: &str) -> (&str, &str) {
    let end = text.char_indices().find(|(_, c)| !(c.is_ascii_digit() || *c == '.' || *c == '_')).map(|(i, _)| i).unwrap_or(text.len());
    (&text[..end], text[end..].trim())
}

/// Multiplies a decimal number written as text by an integer factor, exactly.
/// Returns None when the result is not a whole number or overflows u64.
fn exact_product(number: &str, factor: u64) -> Result<u64, &'static str> {
    let number = number.replace('_', "");
    let (whole, frac) = match number.split_once('.') {
        Some((w, f)) => (w, f),
        None => (number.as_str(), ""),
    };
    if whole.is_empty() && frac.is_empty() {
        return Err("no number");
    }
    if frac.contains('.') || frac.len() > 18 {
        return Err("not a number");
    }
    let whole: u128 = if whole.is_empty() { 0 } else { whole.parse().map_err(|_| "too large")? };
    let frac_digits: u128 = if frac.is_empty() { 0 } else { frac.parse().map_err(|_| "not a number")? };
    let scale = 10u128.pow(frac.len() as u32);
    let total =
        whole.checked_mul(factor as u128).and_then(|w| w.checked_mul(scale)).and_then(|w| w.checked_add(frac_digits * factor as u128)).ok_or("too large")?;
    if total % scale != 0 {
        return Err("not a whole number of the base unit");
    }
    u64::try_from(total / scale).map_err(|_| "too large")
}

fn parse_with_units(text: &str, units: &[(&str, u64)], what: &str, example: &str) -> Result<u64, UnitError> {
    let trimmed = text.trim();
    // "-5s" is negative; "--no-progress" (a flag taken as the value) is no number at all.
    if trimmed.strip_prefix('-').is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit() || c == '.')) {
        return Err(UnitError(format!("{what} \"{text}\" is negative; use a value like {example}")));
    }
    let (number, unit) = split_number(trimmed);
    // What is wrong with "NaNKiB", "+4KiB" or "abc" is the number, not the unit.
    if number.is_empty() {
        return Err(UnitError(format!("{what} \"{text}\" does not start with a number; use a value like {example}")));
    }
    if unit.len() > 1 && unit.starts_with(['e', 'E']) && unit[1..].starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+') {
        return Err(UnitError(format!("{what} \"{text}\": exponents are not accepted; write the number out, like {example}")));
    }
    let factor = units.iter().find(|(name, _)| name.eq_ignore_ascii_case(unit) || *name == unit).map(|(_, f)| *f).ok_or_else(|| {
        let known: Vec<&str> = units.iter().map(|(n, _)| *n).filter(|n| !n.is_empty()).collect();
        UnitError(format!("{what} \"{text}\" has an unknown unit \"{unit}\"; use one of {} (e.g. {example})", known.join(", ")))
    })?;
    exact_product(number, factor).map_err(|why| UnitError(format!("{what} \"{text}\" is invalid ({why}); use a value like {example}")))
}

impl ByteSize {
    /// Parses a size; decimal and binary units are both exact.
    pub fn parse(text: &str) -> Result<Self, UnitError> {
        // Reject the ambiguous lowercase "m"/"k" suffixes fio uses: they are a classic trap.
        parse_with_units(text, SIZE_UNITS, "size", "94kB, 2.6MB or 16MiB").map(ByteSize)
    }

    /// The value in bytes.
    pub fn bytes(self) -> u64 {
        self.0
    }

    /// A short human label that round-trips exactly: "4KiB", "94kB", "2.6MB", "1000B".
    pub fn label(self) -> String {
        // In u128: ten times a size above u64::MAX / 10 would overflow (and wrap in release builds).
        let b = u128::from(self.0);
        let binary = BINARY_LABEL_UNITS.into_iter().find(|(_, factor)| b >= *factor && b % factor == 0);
        // A decimal label may keep one digit after the point ("2.6MB").
        let decimal = DECIMAL_LABEL_UNITS.into_iter().find(|(_, factor)| b >= *factor && (b * 10) % factor == 0);
        // The larger unit of the two: 64 MB is "64MB", not "62500KiB", though KiB holds it too.
        match (binary, decimal) {
            (Some((unit, factor)), None) => format!("{}{unit}", b / factor),
            (Some((unit, factor)), Some((_, smaller))) if smaller < factor => format!("{}{unit}", b / factor),
            (_, Some((unit, factor))) => {
                let tenths = b * 10 / factor;
                if tenths % 10 == 0 {
                    format!("{}{unit}", tenths / 10)
                } else {
                    format!("{}.{}{unit}", tenths / 10, tenths % 10)
                }
            }
            (None, None) => format!("{b}B"),
        }
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

impl Nanos {
    /// Parses a duration such as "30s", "500ms" or "1.5s".
    pub fn parse(text: &str) -> Result<Self, UnitError> {
        let (_, unit) = split_number(text.trim());
        if unit.is_empty() {
            return Err(UnitError(format!("duration \"{text}\" has no unit; write e.g. 30s or 500ms")));
        }
        parse_with_units(text, DURATION_UNITS, "duration", "30s or 500ms").map(Nanos)
    }

    /// As a std Duration.
    pub fn duration(self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.0)
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_nanos(self.0))
    }
}

/// Formats nanoseconds with three significant digits and a fitting unit ("1.23 ms").
pub fn format_nanos(ns: u64) -> String {
    let v = ns as f64;
    let (value, unit) = if v >= 1e9 {
        (v / 1e9, "s")
    } else if v >= 1e6 {
        (v / 1e6, "ms")
    } else if v >= 1e3 {
        (v / 1e3, "µs")
    } else {
        (v, "ns")
    };
    format!("{} {unit}", three_digits(value))
}

/// Formats a byte rate with decimal units ("123 MB/s"), as fio's `bw_bytes` and warp do.
pub fn format_rate_bytes(bytes_per_s: f64) -> String {
    let (value, unit) = if bytes_per_s >= 1e12 {
        (bytes_per_s / 1e12, "TB/s")
    } else if bytes_per_s >= 1e9 {
        (bytes_per_s / 1e9, "GB/s")
    } else if bytes_per_s >= 1e6 {
        (bytes_per_s / 1e6, "MB/s")
    } else if bytes_per_s >= 1e3 {
        (bytes_per_s / 1e3, "kB/s")
    } else {
        (bytes_per_s, "B/s")
    };
    format!("{} {unit}", three_digits(value))
}

/// Formats a byte count with binary units ("1.50 GiB"): disk space is usually read that way.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    // The largest unit the value reaches: KiB is 2^10, each next one 2^10 more.
    let Some(step) = (0..UNITS.len()).rev().find(|&i| bytes >= 1u64 << (10 * (i + 1))) else {
        return format!("{bytes} B");
    };
    format!("{} {}", three_digits(bytes as f64 / (1u64 << (10 * (step + 1))) as f64), UNITS[step])
}

/// Three significant digits without scientific notation.
pub fn three_digits(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Accepts a string with a unit or a plain integer (bytes) in job files. A visitor, not an
/// untagged enum: serde's "data did not match any variant of untagged enum" said nothing of what
/// a size is, for `4096.0`, `true` or `1e30`.
impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ByteSizeVisitor)
    }
}

struct ByteSizeVisitor;

impl de::Visitor<'_> for ByteSizeVisitor {
    type Value = ByteSize;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a size: a whole number of bytes or a string with a unit, e.g. 4096 or \"94kB\"")
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<ByteSize, E> {
        match u64::try_from(n) {
            Ok(bytes) => Ok(ByteSize(bytes)),
            Err(_) => Err(E::custom(format!("size {n} is negative; use a value like 94kB"))),
        }
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<ByteSize, E> {
        Ok(ByteSize(n))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<ByteSize, E> {
        // TOML reads 4096.0 and 1e3 as floats: say so, as "not a whole number" is false of them.
        Err(E::custom(format!(
            "size {v:?} is a decimal number, not a count of bytes; write a whole number (4096) or a string with a unit (\"4KiB\", \"2.6MB\")"
        )))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<ByteSize, E> {
        ByteSize::parse(text).map_err(E::custom)
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

/// Accepts a string with a unit in job files ("30s"); a bare number is refused as ambiguous.
impl<'de> Deserialize<'de> for Nanos {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Nanos::parse(&text).map_err(de::Error::custom)
    }
}

impl Serialize for Nanos {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

#[cfg(test)]
mod tests {
    /// A rate of a thousand GB/s and more reads in TB/s, not "1301 GB/s".
    #[test]
    fn rates_reach_terabytes_per_second() {
        assert_eq!(super::format_rate_bytes(1.301e12), "1.30 TB/s");
        assert_eq!(super::format_rate_bytes(999e9), "999 GB/s");
    }

    /// `sizes = [4096.0]`, `[true]` and `dataset = 1e30` said "data did not match any variant of
    /// untagged enum Raw".
    #[test]
    fn a_size_of_the_wrong_type_says_what_a_size_is() {
        #[derive(serde::Deserialize, Debug)]
        struct Job {
            #[allow(dead_code)]
            size: super::ByteSize,
        }
        for (toml_value, said) in [
            ("4096.0", "size 4096.0 is a decimal number, not a count of bytes; write a whole number (4096)"),
            ("1e30", "is a decimal number"),
            ("true", "a size: a whole number of bytes or a string with a unit"),
            ("-1", "size -1 is negative"),
        ] {
            let e = toml::from_str::<Job>(&format!("size = {toml_value}")).unwrap_err().to_string();
            assert!(e.contains(said) && !e.contains("untagged"), "{toml_value}: {e}");
        }
        let e = serde_json::from_str::<Job>("{\"size\": 4096.5}").unwrap_err().to_string();
        assert!(e.contains("size 4096.5 is a decimal number, not a count of bytes") && !e.contains("untagged"), "{e}");
        assert_eq!(toml::from_str::<Job>("size = \"4KiB\"").unwrap().size.0, 4096);
        assert_eq!(serde_json::from_str::<Job>("{\"size\": 4096}").unwrap().size.0, 4096);
    }

    use super::*;

    #[test]
    fn decimal_and_binary_sizes_are_exact() {
        assert_eq!(ByteSize::parse("2.6MB").unwrap().0, 2_600_000);
        assert_eq!(ByteSize::parse("94kB").unwrap().0, 94_000);
        assert_eq!(ByteSize::parse("54MiB").unwrap().0, 54 * 1024 * 1024);
        assert_eq!(ByteSize::parse("4KiB").unwrap().0, 4096);
        assert_eq!(ByteSize::parse("1000").unwrap().0, 1000);
        assert_eq!(ByteSize::parse("0").unwrap().0, 0);
        assert_eq!(ByteSize::parse("1.5KiB").unwrap().0, 1536);
        assert_eq!(ByteSize::parse(" 16 MiB ").unwrap().0, 16 << 20);
    }

    #[test]
    fn bad_sizes_quote_the_text() {
        for bad in ["", "abc", "-4KiB", "1.5B", "2.6.1MB", "5 parsecs", "99999999999999999999TB", "1.0000001kB"] {
            let err = ByteSize::parse(bad).unwrap_err().0;
            assert!(err.contains(&format!("\"{bad}\"")), "{bad}: {err}");
        }
    }

    #[test]
    fn a_bad_number_is_named_as_the_number() {
        for bad in ["NaNKiB", "+4KiB", "infMiB", "abc"] {
            assert!(ByteSize::parse(bad).unwrap_err().0.contains("does not start with a number"), "{bad}");
        }
        assert!(ByteSize::parse("1e3KiB").unwrap_err().0.contains("exponents are not accepted"));
        assert!(Nanos::parse("abc").unwrap_err().0.contains("does not start with a number"));
        assert!(ByteSize::parse("5 parsecs").unwrap_err().0.contains("unknown unit \"parsecs\""));
    }

    #[test]
    fn labels_round_trip() {
        for text in ["4KiB", "94kB", "2.6MB", "16MiB", "999B", "1kB", "1GiB", "900MB", "480kB"] {
            let size = ByteSize::parse(text).unwrap();
            assert_eq!(size.label(), text);
            assert_eq!(ByteSize::parse(&size.label()).unwrap(), size);
        }
    }

    /// Session 46: a case id read "1024GiB" for 1 TiB (and "62500KiB" for the e1 sweep's 64MB):
    /// a size is labelled in the largest unit, binary or decimal, that writes it exactly.
    #[test]
    fn labels_take_the_largest_unit_a_size_is_written_in() {
        for (text, label) in [
            ("1TiB", "1TiB"),
            ("1024GiB", "1TiB"),
            ("1536GiB", "1536GiB"),
            ("1PiB", "1PiB"),
            ("1TB", "1TB"),
            ("2.5TB", "2.5TB"),
            ("3PB", "3PB"),
            ("64MB", "64MB"),
            ("1000KiB", "1000KiB"),
        ] {
            assert_eq!(ByteSize::parse(text).unwrap().label(), label, "{text}");
        }
        // Each unit the label table writes is one the parser reads, at the same factor.
        for (unit, factor) in BINARY_LABEL_UNITS.into_iter().chain(DECIMAL_LABEL_UNITS) {
            assert_eq!(ByteSize::parse(&format!("1{unit}")).map(|b| u128::from(b.0)), Ok(factor), "{unit}");
        }
        // And each unit the parser reads is one a label may be written in.
        for (unit, factor) in SIZE_UNITS.iter().filter(|(_, factor)| *factor > 1) {
            let labelled = BINARY_LABEL_UNITS.into_iter().chain(DECIMAL_LABEL_UNITS).any(|(_, f)| f == u128::from(*factor));
            assert!(labelled, "no label is written in {unit}");
        }
    }

    /// Issue 14: sizes above u64::MAX / 10 labelled wrongly ("26597808525046.8kB" for
    /// 9249969845379822608 bytes), so case ids named another size than the one measured.
    #[test]
    fn labels_of_the_largest_sizes_round_trip() {
        for bytes in [u64::MAX, u64::MAX / 10 + 1, 9_249_969_845_379_822_608, 18_000_000_000_000_000_000] {
            let label = ByteSize(bytes).label();
            assert_eq!(ByteSize::parse(&label).unwrap().0, bytes, "{label}");
        }
    }

    #[test]
    fn byte_counts_take_the_largest_unit_they_reach() {
        assert_eq!(format_bytes(1023), "1023 B");
        assert_eq!(format_bytes(1024), "1.00 KiB");
        assert_eq!(format_bytes(391 << 20), "391 MiB");
        assert_eq!(format_bytes(3 << 39), "1.50 TiB");
        assert_eq!(format_bytes(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn durations() {
        assert_eq!(Nanos::parse("30s").unwrap().0, 30_000_000_000);
        assert_eq!(Nanos::parse("500ms").unwrap().0, 500_000_000);
        assert_eq!(Nanos::parse("1.5s").unwrap().0, 1_500_000_000);
        assert_eq!(Nanos::parse("2m").unwrap().0, 120_000_000_000);
        assert!(Nanos::parse("30").unwrap_err().0.contains("no unit"));
        assert!(Nanos::parse("-1s").unwrap_err().0.contains("negative"));
        assert!(Nanos::parse("0.5ns").is_err());
    }
}
