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

/// The closest candidate, if it is close enough to be a plausible typo.
pub fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(2);
    candidates.iter().map(|c| (edit_distance(&word.to_lowercase(), &c.to_lowercase()), *c)).filter(|(d, _)| *d <= limit).min_by_key(|(d, _)| *d).map(|(_, c)| c)
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
}
