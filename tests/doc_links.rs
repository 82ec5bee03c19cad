//! Every relative link in the repository's Markdown points at a file that exists and, when it
//! names a section (`file.md#section` or `#section`), at a heading that exists in that file.
//!
//! Why: the docs quote measurements by section across pages ("see fs against fio, session 33"),
//! and code comments send readers to them. A page split or a renamed heading must not leave a
//! reader at a dead link.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Markdown files of the repository, outside build output, VCS data and vendored sources.
fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if path.is_dir() {
            if !matches!(name, "target" | ".git" | "node_modules" | "vendor") && !name.starts_with('.') {
                markdown_files(&path, out);
            }
        } else if name.ends_with(".md") {
            out.push(path);
        }
    }
}

/// `(line number, line)` of each line of `text` outside fenced code blocks (the fences too are
/// left out): examples of Markdown or shell inside code are neither headings nor links.
fn outside_fences(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut in_fence = false;
    text.lines().enumerate().filter_map(move |(n, line)| {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            return None;
        }
        (!in_fence).then_some((n + 1, line))
    })
}

/// The lines of `text` outside fenced code blocks, with inline code spans blanked out, so that
/// code inside prose is not read as a link either.
fn prose_lines(text: &str) -> Vec<(usize, String)> {
    outside_fences(text)
        .map(|(n, line)| {
            let mut in_code = false;
            let prose = line
                .chars()
                .map(|c| {
                    if c == '`' {
                        in_code = !in_code;
                        ' '
                    } else if in_code {
                        ' '
                    } else {
                        c
                    }
                })
                .collect();
            (n, prose)
        })
        .collect()
}

/// The anchor GitHub gives a heading: lower case, punctuation other than `-` and `_` dropped,
/// spaces turned into hyphens; a repeated heading gets `-1`, `-2`, … in order.
fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    for (_, line) in outside_fences(text) {
        let Some(title) = line.strip_prefix('#') else { continue };
        let title = title.trim_start_matches('#');
        if !title.starts_with(' ') {
            continue;
        }
        let base: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        let mut anchor = base.clone();
        let mut n = 0;
        while !seen.insert(anchor.clone()) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
    }
    seen
}

/// `(line, target)` of every inline link `[text](target)` in the prose of `text`.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (line_no, line) in prose_lines(text) {
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].trim();
            // A title after the target ("file.md \"title\"") is not part of it.
            let target = target.split_whitespace().next().unwrap_or_default();
            found.push((line_no, target.trim_matches(|c| c == '<' || c == '>').to_string()));
            rest = &after[end..];
        }
    }
    found
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let mut files = Vec::new();
    markdown_files(repo_root(), &mut files);
    files.sort();
    assert!(files.len() >= 10, "found only {} Markdown files under {}", files.len(), repo_root().display());
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
        for (line, target) in links(&text) {
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path_part, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let dest = if path_part.is_empty() { file.clone() } else { file.parent().expect("a parent").join(path_part) };
            let shown = file.strip_prefix(repo_root()).unwrap_or(file).display().to_string();
            if !dest.exists() {
                broken.push(format!("{shown}:{line}: {target}: no such file"));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if dest.extension().and_then(|e| e.to_str()) != Some("md") {
                continue;
            }
            let dest_text = std::fs::read_to_string(&dest).unwrap_or_else(|e| panic!("read {}: {e}", dest.display()));
            if !anchors(&dest_text).contains(anchor) {
                broken.push(format!("{shown}:{line}: {target}: no heading with that anchor"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links (fix the link or the heading):\n{}", broken.join("\n"));
}

#[test]
fn anchors_follow_githubs_rules() {
    let text = "# Four threads' large gets: the span (session 40)\n## `null` ÷ fio\n## Twice\n## Twice\n```\n# not a heading\n```\n#hashtag\n";
    let found = anchors(text);
    for expected in ["four-threads-large-gets-the-span-session-40", "null--fio", "twice", "twice-1"] {
        assert!(found.contains(expected), "{expected} missing from {found:?}");
    }
    assert!(!found.contains("not-a-heading") && !found.contains("hashtag"), "{found:?}");
}

#[test]
fn links_inside_code_are_not_links() {
    let text = "See [a](a.md) and `[b](b.md)`.\n```\n[c](c.md)\n```\n[d](d.md#x \"title\")\n";
    let targets: Vec<String> = links(text).into_iter().map(|(_, t)| t).collect();
    assert_eq!(targets, ["a.md", "d.md#x"]);
}
