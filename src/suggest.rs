//! "Did you mean" suggestions for misspelt names in job files and on the command line.

/// Edit distance between two strings (insert, delete, substitute: cost 1 each).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The closest candidate, if it is close enough to be a plausible typo, or the same words with
/// one of them shortened or written out ("fsync_directory" for "fsync_dir").
pub fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(2);
    let word = word.to_lowercase();
    candidates
        .iter()
        .map(|c| (c.to_lowercase(), *c))
        .map(|(lower, c)| (edit_distance(&word, &lower), same_words_shortened(&word, &lower), c))
        .filter(|(d, shortened, _)| *d <= limit || *shortened)
        .min_by_key(|(d, _, _)| *d)
        .map(|(_, _, c)| c)
}

/// Whether `a` and `b` are the same words (between '_' or '-') with some shortened: each word
/// the other's, or the start of it, of at least 3 letters ("dir" for "directory"). An edit
/// distance alone misses these: "fsync_directory" is 6 edits from "fsync_dir".
fn same_words_shortened(a: &str, b: &str) -> bool {
    let words = |s: &'_ str| s.split(['_', '-']).map(str::to_string).collect::<Vec<String>>();
    let (a, b) = (words(a), words(b));
    let shortened = |x: &String, y: &String| x.chars().count() >= 3 && y.starts_with(x.as_str());
    let same = |x: &String, y: &String| x == y || singular(x) == singular(y);
    a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| same(x, y) || shortened(x, y) || shortened(y, x))
}

/// An English plural's singular ("retries" → "retry", "sizes" → "size"), so that a word given in
/// the other number counts as the same word: "retry" is 3 edits from "retries".
fn singular(word: &str) -> String {
    match word.strip_suffix("ies") {
        Some(stem) if stem.len() >= 2 => format!("{stem}y"),
        _ => word.strip_suffix('s').filter(|stem| stem.len() >= 3).unwrap_or(word).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(did_you_mean("thread", &["threads", "sizes"]), Some("threads"));
        assert_eq!(did_you_mean("sqlit", &["fs", "sqlite", "sqlite-file"]), Some("sqlite"));
        assert_eq!(did_you_mean("zzzzzz", &["fs", "sqlite"]), None);
    }

    /// Session 46: "fsync_directory" got no suggestion of the fs option "fsync_dir".
    #[test]
    fn suggests_the_same_words_shortened_or_written_out() {
        let fs_options = ["path", "fsync", "fsync_dir", "fanout_levels", "write_mode", "direct"];
        assert_eq!(did_you_mean("fsync_directory", &fs_options), Some("fsync_dir"));
        assert_eq!(did_you_mean("op_time", &["op_timeout", "give_up_after"]), Some("op_timeout"));
        assert_eq!(did_you_mean("dur", &["duration", "count"]), Some("duration"));
        // Too short a start to say which word was meant, or other words altogether.
        assert_eq!(did_you_mean("fs_x", &["fsync_dir"]), None);
        assert_eq!(did_you_mean("write", &["write_mode"]), None);
    }

    /// Session 47 noticed: a target's `retry` got no "did you mean retries".
    #[test]
    fn suggests_the_other_number_of_a_word() {
        assert_eq!(did_you_mean("retry", &["name", "backend", "retries"]), Some("retries"));
        assert_eq!(did_you_mean("retries", &["retry"]), Some("retry"));
        assert_eq!(did_you_mean("max_object", &["max_objects", "min_objects"]), Some("max_objects"));
        // Too short a stem to be a plural.
        assert_eq!((singular("bus"), singular("ies"), singular("sizes")), ("bus".into(), "ies".into(), "size".into()));
    }
}
