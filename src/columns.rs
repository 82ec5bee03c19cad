//! Text columns for the terminal: the one aligner behind the run table and fio's tables.

/// `rows` (the first is the header, when there is one) as columns two spaces apart, each line
/// starting with `indent` and without trailing spaces. Text is left-aligned; with
/// `numbers_right`, a column whose every row after the first starts with a digit, '-' or '—' (a
/// figure left out) is right-aligned, as numbers read best. Rows shorter than the first are padded with empty cells.
pub fn aligned(rows: &[Vec<String>], indent: &str, numbers_right: bool) -> String {
    let Some(first) = rows.first() else { return String::new() };
    let columns = first.len();
    let widths: Vec<usize> = (0..columns).map(|i| rows.iter().map(|r| cell(r, i).chars().count()).max().unwrap_or(0)).collect();
    let body = &rows[1..];
    let right: Vec<bool> = (0..columns)
        .map(|i| numbers_right && !body.is_empty() && body.iter().all(|r| cell(r, i).starts_with(|ch: char| ch.is_ascii_digit() || ch == '-' || ch == '—')))
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = (0..columns)
            .map(|i| {
                let (text, width) = (cell(row, i), widths[i]);
                if right[i] {
                    format!("{text:>width$}")
                } else {
                    format!("{text:<width$}")
                }
            })
            .collect();
        out.push_str(indent);
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// Cell `i` of `row`, empty past its end.
fn cell(row: &[String], i: usize) -> &str {
    row.get(i).map_or("", String::as_str)
}

#[cfg(test)]
mod tests {
    use super::aligned;

    fn rows(cells: &[&[&str]]) -> Vec<Vec<String>> {
        cells.iter().map(|r| r.iter().map(|c| c.to_string()).collect()).collect()
    }

    #[test]
    fn text_goes_left_and_numbers_right_when_asked() {
        let table = rows(&[&["name", "ops"], &["fs", "12"], &["sqlite", "3"]]);
        assert_eq!(aligned(&table, "  ", false), "  name    ops\n  fs      12\n  sqlite  3\n");
        assert_eq!(aligned(&table, "", true), "name    ops\nfs       12\nsqlite    3\n");
        assert_eq!(aligned(&[], "", true), "");
        // A percentile left out for too few samples stands among the figures it replaces.
        let table = rows(&[&["p99"], &["302 ns"], &["—"]]);
        assert_eq!(aligned(&table, "", true), "   p99\n302 ns\n     —\n");
    }
}
