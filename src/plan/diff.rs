//! A small line diff for showing how a node's sysupdate config changes.
//! The files are a dozen lines, so a plain longest-common-subsequence table
//! is simple and fast enough; the output is unified-diff shaped because
//! that is what operators already read.

/// One line of the edit script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Line<'a> {
    Same(&'a str),
    Removed(&'a str),
    Added(&'a str),
}

/// The edit script turning `old` into `new`, line by line.
pub(super) fn line_diff<'a>(old: &'a str, new: &'a str) -> Vec<Line<'a>> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    // lcs[i][j]: length of the LCS of a[i..] and b[j..].
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(a.len() + b.len());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push(Line::Same(a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push(Line::Removed(a[i]));
            i += 1;
        } else {
            out.push(Line::Added(b[j]));
            j += 1;
        }
    }
    out
}

/// Hunks with `context` unchanged lines around each change, each line
/// prefixed by ` `, `-` or `+`, headed `@@ -a,b +c,d @@`. Empty when the
/// texts have the same lines.
pub(super) fn hunks(old: &str, new: &str, context: usize) -> Vec<String> {
    let script = line_diff(old, new);
    let changed: Vec<usize> = script
        .iter()
        .enumerate()
        .filter(|(_, l)| !matches!(l, Line::Same(_)))
        .map(|(i, _)| i)
        .collect();
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for &i in &changed {
        let start = i.saturating_sub(context);
        let end = (i + context + 1).min(script.len());
        match ranges.last_mut() {
            Some(last) if start <= last.1 => last.1 = end,
            _ => ranges.push((start, end)),
        }
    }
    // Line numbers before each script position.
    let mut old_pos = Vec::with_capacity(script.len());
    let mut new_pos = Vec::with_capacity(script.len());
    let (mut o, mut n) = (0usize, 0usize);
    for line in &script {
        old_pos.push(o);
        new_pos.push(n);
        match line {
            Line::Same(_) => {
                o += 1;
                n += 1;
            }
            Line::Removed(_) => o += 1,
            Line::Added(_) => n += 1,
        }
    }
    let mut out = Vec::new();
    for (start, end) in ranges {
        let slice = &script[start..end];
        let old_count = slice
            .iter()
            .filter(|l| !matches!(l, Line::Added(_)))
            .count();
        let new_count = slice
            .iter()
            .filter(|l| !matches!(l, Line::Removed(_)))
            .count();
        let header_start = |pos: usize, count: usize| if count == 0 { pos } else { pos + 1 };
        out.push(format!(
            "@@ -{},{} +{},{} @@",
            header_start(old_pos[start], old_count),
            old_count,
            header_start(new_pos[start], new_count),
            new_count
        ));
        for line in slice {
            out.push(match line {
                Line::Same(t) => format!(" {t}"),
                Line::Removed(t) => format!("-{t}"),
                Line::Added(t) => format!("+{t}"),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_texts_have_no_hunks() {
        assert!(hunks("a\nb\n", "a\nb\n", 3).is_empty());
    }

    #[test]
    fn one_changed_line_with_context() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let new = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
        assert_eq!(
            hunks(old, new, 2),
            vec!["@@ -3,5 +3,5 @@", " 3", " 4", "-5", "+five", " 6", " 7"]
        );
    }

    #[test]
    fn distant_changes_make_separate_hunks() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "A\nb\nc\nd\ne\nf\ng\nH\n";
        assert_eq!(
            hunks(old, new, 1),
            vec![
                "@@ -1,2 +1,2 @@",
                "-a",
                "+A",
                " b",
                "@@ -7,2 +7,2 @@",
                " g",
                "-h",
                "+H"
            ]
        );
    }

    #[test]
    fn a_new_file_is_all_additions() {
        assert_eq!(hunks("", "x\ny\n", 3), vec!["@@ -0,0 +1,2 @@", "+x", "+y"]);
    }

    #[test]
    fn the_script_replays_into_the_new_text() {
        let old = "[Source]\nPath=a\nMatchPattern=kubernetes-@v-%a.raw\n\n[Target]\n";
        let new = "[Transfer]\nVerify=false\n\n[Source]\nPath=a\nMatchPattern=kubernetes-v1.35.@v-%a.raw\n\n[Target]\n";
        let script = line_diff(old, new);
        let rebuilt_new: Vec<&str> = script
            .iter()
            .filter_map(|l| match l {
                Line::Same(t) | Line::Added(t) => Some(*t),
                Line::Removed(_) => None,
            })
            .collect();
        let rebuilt_old: Vec<&str> = script
            .iter()
            .filter_map(|l| match l {
                Line::Same(t) | Line::Removed(t) => Some(*t),
                Line::Added(_) => None,
            })
            .collect();
        assert_eq!(rebuilt_new, new.lines().collect::<Vec<_>>());
        assert_eq!(rebuilt_old, old.lines().collect::<Vec<_>>());
        let same = script.iter().filter(|l| matches!(l, Line::Same(_))).count();
        assert_eq!(same, 4, "every common line is kept, not rewritten");
    }
}
