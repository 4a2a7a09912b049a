//! The crate's layering, enforced: every `src/**/*.rs` is read (plain std, no
//! parser crate), each `crate::…`, `super::…` and `self::…` path is resolved
//! to the module it names, and the test fails naming the file and the edge
//! when a module imports one on its own layer or above, when sibling modules
//! import each other in a circle, or when two modules or two types
//! share a name. docs/architecture.md draws the same table.
//!
//! A comment, a string or a char literal never counts: the scanner skips
//! them, so a script embedded as a raw string cannot fake an edge.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Bottom to top. A module may import only modules on a lower line. The
/// order is the one the code has: `remote` (the command text) sits under
/// `node`, whose parsers read its section markers, and beside `ssh` (the
/// transport): neither needs the other, both quote with `shell`; `status` and `planning` (planning from the live fleet)
/// sit over `gather`, whose facts they read; `cli` (the clap types) sits
/// under `commands`, which take them.
const LAYERS: &[&[&str]] = &[
    // Test-only strategies and timing, under everything they test.
    &["fuzzkit"],
    &[
        "version",
        "limits",
        "error",
        "redact",
        "local_fs",
        "untrusted_yaml",
        "shell",
    ],
    &["ui", "pacing"],
    &["inventory", "hub"],
    &["ssh", "remote"],
    &["node"],
    &["checks"],
    &["plan"],
    &["gather"],
    &["status", "planning"],
    &["steps"],
    &["cli"],
    &["commands"],
];

// No exception is tolerated: there is no list of known upward edges or
// circles to shrink, and none is to be added. An edge that breaks the
// layering is fixed by moving the shared piece below both (issue 39).

/// Test-only helper modules: tests of a module may use a kit that is built
/// from that module, which is no circle in the code that ships.
const TEST_KITS: &[&str] = &["testkit", "lock_testkit"];

/// Every file under `commands/` is named after its subcommand, as uv's are
/// (`fleetctl plan` is `commands::plan`), so those names may repeat the
/// module the subcommand is about.
const SUBCOMMAND_FILES: &str = "commands";

/// A module path inside the crate: `["plan", "planner", "node_work"]`.
type ModPath = Vec<String>;

struct SourceFile {
    rel: String,
    module: ModPath,
    text: String,
}

fn layer_of(top: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&top))
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn load_sources() -> Vec<SourceFile> {
    let root = src_dir();
    let mut paths = Vec::new();
    rust_files(&root, &mut paths);
    paths
        .into_iter()
        .filter_map(|path| {
            let rel = path
                .strip_prefix(&root)
                .expect("found under src")
                .to_string_lossy()
                .replace('\\', "/");
            // The binary reaches the library as `fleetctl::`, never `crate::`.
            if rel == "main.rs" {
                return None;
            }
            let mut module: ModPath = rel
                .trim_end_matches(".rs")
                .split('/')
                .map(str::to_owned)
                .collect();
            if module.last().is_some_and(|m| m == "mod" || m == "lib") {
                module.pop();
            }
            let text = fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            Some(SourceFile { rel, module, text })
        })
        .collect()
}

/// The code with comments and the contents of string and char literals
/// blanked out (newlines kept, so line numbers still hold).
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |out: &mut String, s: &[u8]| {
        for &c in s {
            out.push(if c == b'\n' { '\n' } else { ' ' });
        }
    };
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            let end = text[i..].find('\n').map_or(b.len(), |n| i + n);
            blank(&mut out, &b[i..end]);
            i = end;
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            let start = i;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            blank(&mut out, &b[start..i]);
        } else if (c == b'r' || (c == b'b' && b.get(i + 1) == Some(&b'r')))
            && !is_ident_byte(i.checked_sub(1).map(|p| b[p]))
            && raw_string_hashes(b, if c == b'b' { i + 2 } else { i + 1 }).is_some()
        {
            let open = if c == b'b' { i + 2 } else { i + 1 };
            let hashes = raw_string_hashes(b, open).expect("checked");
            let body = open + hashes + 1;
            let mut close = String::from("\"");
            close.push_str(&"#".repeat(hashes));
            let end = text[body..]
                .find(&close)
                .map_or(b.len(), |n| body + n + close.len());
            out.push('"');
            blank(&mut out, &b[i + 1..end]);
            i = end;
        } else if c == b'"' {
            let start = i;
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(b.len());
            out.push('"');
            blank(&mut out, &b[start + 1..i]);
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{7f}', '{') or a lifetime ('a).
            let end = if b.get(i + 1) == Some(&b'\\') {
                text[i + 2..].find('\'').map(|n| i + 2 + n + 1)
            } else {
                let ch_len = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch_len) == Some(&b'\'')).then_some(i + 2 + ch_len)
            };
            match end {
                Some(end) => {
                    out.push('\'');
                    blank(&mut out, &b[i + 1..end]);
                    i = end;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let ch = text[i..].chars().next().expect("in bounds");
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn raw_string_hashes(b: &[u8], at: usize) -> Option<usize> {
    let mut n = 0;
    while b.get(at + n) == Some(&b'#') {
        n += 1;
    }
    (b.get(at + n) == Some(&b'"')).then_some(n)
}

fn is_ident_byte(c: Option<u8>) -> bool {
    c.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Colons,
    Open,
    Close,
    Comma,
    Star,
    Other(char),
}

/// Tokens with their line numbers.
fn tokens(code: &str) -> Vec<(Tok, usize)> {
    let mut out = Vec::new();
    let mut line = 1;
    let mut chars = code.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\n' => line += 1,
            c if c.is_whitespace() => {}
            c if c.is_alphanumeric() || c == '_' => {
                let mut end = i + c.len_utf8();
                while let Some(&(j, d)) = chars.peek() {
                    if d.is_alphanumeric() || d == '_' {
                        end = j + d.len_utf8();
                        chars.next();
                    } else {
                        break;
                    }
                }
                let word = &code[i..end];
                // r#ident
                out.push((Tok::Ident(word.to_owned()), line));
            }
            ':' if chars.peek().is_some_and(|&(_, d)| d == ':') => {
                chars.next();
                out.push((Tok::Colons, line));
            }
            '{' => out.push((Tok::Open, line)),
            '}' => out.push((Tok::Close, line)),
            ',' => out.push((Tok::Comma, line)),
            '*' => out.push((Tok::Star, line)),
            c => out.push((Tok::Other(c), line)),
        }
    }
    out
}

/// One path a file names: where it starts resolving and its segments.
#[derive(Debug)]
struct Mention {
    line: usize,
    /// The module `self` means at that point (the file's module plus any
    /// inline `mod x {` it sits in).
    here: ModPath,
    segments: Vec<String>,
}

/// Every `crate::…`, `super::…` and `self::…` path in the file, `use` trees
/// expanded (`crate::{a, b::{c, d}}` is three paths).
fn mentions(file: &SourceFile) -> (Vec<Mention>, Vec<String>) {
    let code = code_only(&file.text);
    let toks = tokens(&code);
    let mut found = Vec::new();
    let mut inline_mods = Vec::new();
    // (name, brace depth at which it closes)
    let mut stack: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i].0 {
            Tok::Open => depth += 1,
            Tok::Close => {
                depth = depth.saturating_sub(1);
                if stack.last().is_some_and(|(_, d)| *d == depth) {
                    stack.pop();
                }
            }
            Tok::Ident(w) if w == "mod" => {
                if let (Some((Tok::Ident(name), _)), Some((Tok::Open, _))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    inline_mods.push(name.clone());
                    stack.push((name.clone(), depth));
                }
            }
            Tok::Ident(w) if w == "crate" || w == "super" || w == "self" => {
                let preceded_by_colons = i > 0 && toks[i - 1].0 == Tok::Colons;
                if !preceded_by_colons && toks.get(i + 1).is_some_and(|t| t.0 == Tok::Colons) {
                    let mut here = file.module.clone();
                    here.extend(stack.iter().map(|(n, _)| n.clone()));
                    let line = toks[i].1;
                    let mut paths = Vec::new();
                    let next = use_tree(&toks, i, Vec::new(), &mut paths);
                    for segments in paths {
                        found.push(Mention {
                            line,
                            here: here.clone(),
                            segments,
                        });
                    }
                    i = next.max(i + 1);
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    (found, inline_mods)
}

/// Reads a path or use tree starting at `i`; pushes every full path (the
/// prefix plus its segments) and returns the index after it.
fn use_tree(
    toks: &[(Tok, usize)],
    mut i: usize,
    prefix: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    let mut path = prefix;
    loop {
        match toks.get(i).map(|t| &t.0) {
            Some(Tok::Ident(w)) => {
                path.push(w.clone());
                i += 1;
                if toks.get(i).is_some_and(|t| t.0 == Tok::Colons) {
                    i += 1;
                    continue;
                }
                out.push(path);
                return i;
            }
            Some(Tok::Open) => {
                i += 1;
                loop {
                    match toks.get(i).map(|t| &t.0) {
                        Some(Tok::Close) => return i + 1,
                        Some(Tok::Comma) => i += 1,
                        None => return i,
                        _ => {
                            let before = i;
                            i = use_tree(toks, i, path.clone(), out);
                            if i == before {
                                i += 1;
                            }
                        }
                    }
                }
            }
            Some(Tok::Star) => {
                out.push(path);
                return i + 1;
            }
            _ => {
                out.push(path);
                return i;
            }
        }
    }
}

struct Crate {
    files: Vec<SourceFile>,
    /// Every module, inline ones included.
    modules: BTreeSet<ModPath>,
    /// Module → name it re-exports → the path it re-exports it from.
    reexports: BTreeMap<ModPath, BTreeMap<String, ModPath>>,
    mentions: Vec<(usize, Mention)>,
}

fn read_crate() -> Crate {
    let files = load_sources();
    let mut modules = BTreeSet::new();
    let mut all_mentions = Vec::new();
    for (f, file) in files.iter().enumerate() {
        for n in 0..=file.module.len() {
            modules.insert(file.module[..n].to_vec());
        }
        let (ms, inl) = mentions(file);
        for name in inl {
            let mut m = file.module.clone();
            m.push(name);
            modules.insert(m);
        }
        all_mentions.extend(ms.into_iter().map(|m| (f, m)));
    }
    let mut reexports: BTreeMap<ModPath, BTreeMap<String, ModPath>> = BTreeMap::new();
    for file in &files {
        let code = code_only(&file.text);
        let toks = tokens(&code);
        for i in 0..toks.len() {
            let is_pub_use = toks[i].0 == Tok::Ident("pub".into())
                && toks
                    .get(i + 1)
                    .is_some_and(|t| t.0 == Tok::Ident("use".into()));
            if !is_pub_use {
                continue;
            }
            let mut paths = Vec::new();
            use_tree(&toks, i + 2, Vec::new(), &mut paths);
            for p in paths {
                let Some(name) = p.last().cloned() else {
                    continue;
                };
                let absolute = match p.first().map(String::as_str) {
                    Some("crate" | "super" | "self") => resolve_prefix(&file.module, &p),
                    // A child module named directly (`pub use model::Plan`).
                    _ => {
                        let mut a = file.module.clone();
                        a.extend(p[..p.len() - 1].iter().cloned());
                        Some(a)
                    }
                };
                if let Some(from) = absolute {
                    reexports
                        .entry(file.module.clone())
                        .or_default()
                        .insert(name, from);
                }
            }
        }
    }
    Crate {
        files,
        modules,
        reexports,
        mentions: all_mentions,
    }
}

/// The absolute segments of `path` (which starts with crate/super/self) as
/// seen from `here`, the last segment dropped when it is the item itself.
fn resolve_prefix(here: &ModPath, path: &[String]) -> Option<ModPath> {
    let mut abs = absolute(here, path)?;
    abs.pop();
    Some(abs)
}

fn absolute(here: &ModPath, path: &[String]) -> Option<ModPath> {
    let mut cur = here.clone();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            cur.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                cur.pop()?;
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    cur.extend(rest.iter().cloned());
    Some(cur)
}

impl Crate {
    /// The module an absolute path lands in: its longest module prefix, then
    /// through that module's re-exports to where the item really lives.
    fn target(&self, abs: &[String]) -> ModPath {
        let mut seen = 0;
        let mut path: ModPath = abs.to_vec();
        loop {
            let mut n = path.len();
            while n > 0 && !self.modules.contains(&path[..n]) {
                n -= 1;
            }
            let module = path[..n].to_vec();
            let Some(next) = path.get(n) else {
                return module;
            };
            match self.reexports.get(&module).and_then(|r| r.get(next)) {
                Some(from) if seen < 8 && from != &module => {
                    let mut p = from.clone();
                    p.extend(path[n..].iter().cloned());
                    path = p;
                    seen += 1;
                }
                _ => return module,
            }
        }
    }

    /// (file, line, from module, to module) for every path naming another module.
    fn edges(&self) -> Vec<(&str, usize, ModPath, ModPath)> {
        let mut out = Vec::new();
        for (f, m) in &self.mentions {
            let Some(abs) = absolute(&m.here, &m.segments) else {
                continue;
            };
            let to = self.target(&abs);
            out.push((
                self.files[*f].rel.as_str(),
                m.line,
                self.files[*f].module.clone(),
                to,
            ));
        }
        out
    }
}

fn show(m: &ModPath) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

#[test]
fn every_top_level_module_is_in_the_layer_table() {
    let krate = read_crate();
    let tops: BTreeSet<_> = krate
        .modules
        .iter()
        .filter(|m| m.len() == 1)
        .map(|m| m[0].clone())
        .collect();
    let missing: Vec<_> = tops.iter().filter(|t| layer_of(t).is_none()).collect();
    assert!(
        missing.is_empty(),
        "modules missing from LAYERS in tests/layers.rs: {missing:?}"
    );
}

#[test]
fn no_module_imports_its_own_layer_or_above() {
    let krate = read_crate();
    let mut bad = BTreeSet::new();
    for (file, line, from, to) in krate.edges() {
        let (Some(f), Some(t)) = (from.first(), to.first()) else {
            continue;
        };
        if f == t {
            continue;
        }
        let (Some(lf), Some(lt)) = (layer_of(f), layer_of(t)) else {
            continue;
        };
        if lt >= lf {
            bad.insert(format!(
                "src/{file}:{line}: {f} (layer {lf}) imports {} (layer {lt})",
                show(&to)
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "forbidden import edges:\n{}",
        bad.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn sibling_modules_import_each_other_in_no_circle() {
    let krate = read_crate();
    // parent → (child → children it imports), with one example site per edge.
    let mut graph: BTreeMap<ModPath, BTreeMap<String, BTreeMap<String, String>>> = BTreeMap::new();
    for (file, line, from, to) in krate.edges() {
        let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
        // Into a child or an ancestor: not a sibling edge.
        if common >= from.len() || common >= to.len() {
            continue;
        }
        if TEST_KITS.contains(&to[common].as_str()) {
            continue;
        }
        graph
            .entry(from[..common].to_vec())
            .or_default()
            .entry(from[common].clone())
            .or_default()
            .entry(to[common].clone())
            .or_insert_with(|| format!("src/{file}:{line}"));
    }
    let mut bad = Vec::new();
    for (parent, g) in &graph {
        for cycle in cycles(g) {
            let steps: Vec<String> = cycle
                .windows(2)
                .map(|w| format!("{} -> {} ({})", w[0], w[1], g[&w[0]][&w[1]]))
                .collect();
            bad.push(format!("in {}: {}", show(parent), steps.join(", ")));
        }
    }
    assert!(bad.is_empty(), "import circles:\n{}", bad.join("\n"));
}

/// One cycle per strongly connected group, as a closed walk (first == last).
fn cycles(g: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<String>> {
    let mut reported: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    for start in g.keys() {
        if reported.contains(start) {
            continue;
        }
        // Depth-first search for a path back to `start`.
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        let mut visited = BTreeSet::new();
        while let Some((node, path)) = stack.pop() {
            let Some(next) = g.get(&node) else { continue };
            if next.contains_key(start) {
                let mut cycle = path.clone();
                cycle.push(start.clone());
                reported.extend(cycle.iter().cloned());
                out.push(cycle);
                break;
            }
            for n in next.keys() {
                if visited.insert(n.clone()) {
                    let mut p = path.clone();
                    p.push(n.clone());
                    stack.push((n.clone(), p));
                }
            }
        }
    }
    out
}

#[test]
fn no_two_modules_share_a_name() {
    let krate = read_crate();
    let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for m in krate.modules.iter().filter(|m| !m.is_empty()) {
        let name = m.last().expect("not empty").clone();
        // Every file keeps its unit tests in a module called `tests`.
        let subcommand = m.len() == 2 && m[0] == SUBCOMMAND_FILES;
        if name != "tests" && !subcommand {
            by_name.entry(name).or_default().push(show(m));
        }
    }
    let dup: Vec<String> = by_name
        .into_iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(n, v)| format!("{n}: {}", v.join(", ")))
        .collect();
    assert!(
        dup.is_empty(),
        "module names used twice:\n{}",
        dup.join("\n")
    );
}

/// Every type the code that ships defines: struct, enum, union, trait and
/// type alias, public or not, at any depth (a struct inside a function
/// counts). Test-only code is left out — an inline `#[cfg(test)]` item
/// and every file under a `#[cfg(test)] mod x;` — since its helpers never
/// meet the product's names in a reader's head the same way; an associated
/// type (`type Err = …;` in an impl or trait) is a member, not a type of
/// its own, and is left out too.
#[test]
fn no_two_types_share_a_name() {
    let krate = read_crate();
    let test_only = test_only_modules(&krate.files);
    let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in &krate.files {
        if (1..=file.module.len()).any(|n| test_only.contains(&file.module[..n])) {
            continue;
        }
        let toks = tokens(&code_only(&file.text));
        for (name, line) in type_definitions(&toks) {
            by_name
                .entry(name)
                .or_default()
                .push(format!("src/{}:{line}", file.rel));
        }
    }
    let dup: Vec<String> = by_name
        .into_iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(n, v)| format!("{n}: {}", v.join(", ")))
        .collect();
    assert!(dup.is_empty(), "types named twice:\n{}", dup.join("\n"));
}

/// No product file is over this many lines: a longer one is split along its
/// concepts (issue 39).
const MAX_PRODUCT_LINES: usize = 500;

/// Every product file under src/ is at most `MAX_PRODUCT_LINES` long. Test
/// code is excepted, by one rule: a file that is compiled only for tests,
/// because it or a module above it is declared `#[cfg(test)] mod x;`. Those
/// are the files named `tests.rs`, `*/tests/*`, `*_tests.rs`, `tests_sshd/*`,
/// `*testkit*`, `*_proptests*`, `*_fuzz*` and `fuzzkit.rs`; a file that only
/// carries such a name but ships in the binary still counts.
#[test]
fn no_product_file_is_over_500_lines() {
    let files = load_sources();
    let test_only = test_only_modules(&files);
    let mut long = Vec::new();
    for file in &files {
        if (1..=file.module.len()).any(|n| test_only.contains(&file.module[..n])) {
            continue;
        }
        let lines = file.text.lines().count();
        if lines > MAX_PRODUCT_LINES {
            long.push(format!("src/{}: {lines} lines", file.rel));
        }
    }
    assert!(
        long.is_empty(),
        "product files over {MAX_PRODUCT_LINES} lines (split them along their concepts):\n{}",
        long.join("\n")
    );
}

/// Whether `#[cfg(test)]` starts at `i`.
fn is_cfg_test(toks: &[(Tok, usize)], i: usize) -> bool {
    let want = [
        Tok::Other('#'),
        Tok::Other('['),
        Tok::Ident("cfg".into()),
        Tok::Other('('),
        Tok::Ident("test".into()),
        Tok::Other(')'),
        Tok::Other(']'),
    ];
    toks.len() >= i + want.len() && toks[i..i + want.len()].iter().map(|t| &t.0).eq(&want)
}

/// The index after the item that starts at `i`: after its `;` or after the
/// `}` that closes its first `{` (whichever comes first at its own level).
fn end_of_item(toks: &[(Tok, usize)], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < toks.len() {
        match toks[i].0 {
            Tok::Open => depth += 1,
            Tok::Close => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            Tok::Other(';') if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    i
}

/// The modules declared as files under `#[cfg(test)]` (`#[cfg(test)] mod
/// tests;`, other attributes and a visibility allowed in between).
fn test_only_modules(files: &[SourceFile]) -> BTreeSet<ModPath> {
    let mut out = BTreeSet::new();
    for file in files {
        let toks = tokens(&code_only(&file.text));
        for i in 0..toks.len() {
            if !is_cfg_test(&toks, i) {
                continue;
            }
            let mut j = i + 7;
            while toks.get(j).is_some_and(|t| t.0 == Tok::Other('#')) {
                while toks.get(j).is_some_and(|t| t.0 != Tok::Other(']')) {
                    j += 1;
                }
                j += 1;
            }
            if toks.get(j).is_some_and(|t| t.0 == Tok::Ident("pub".into())) {
                j += 1;
                if toks.get(j).is_some_and(|t| t.0 == Tok::Other('(')) {
                    while toks.get(j).is_some_and(|t| t.0 != Tok::Other(')')) {
                        j += 1;
                    }
                    j += 1;
                }
            }
            if let (Some(Tok::Ident(m)), Some(Tok::Ident(name)), Some(Tok::Other(';'))) = (
                toks.get(j).map(|t| &t.0),
                toks.get(j + 1).map(|t| &t.0),
                toks.get(j + 2).map(|t| &t.0),
            ) && m == "mod"
            {
                let mut module = file.module.clone();
                module.push(name.clone());
                out.insert(module);
            }
        }
    }
    out
}

/// (name, line) of each type a file defines outside `#[cfg(test)]` items
/// and outside impl and trait bodies (whose `type`s are associated types).
fn type_definitions(toks: &[(Tok, usize)]) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    // For each open brace: whether it is an impl's or a trait's body.
    let mut blocks: Vec<bool> = Vec::new();
    let mut header_is_impl = false;
    let mut i = 0;
    while i < toks.len() {
        if is_cfg_test(toks, i) {
            i = end_of_item(toks, i + 7);
            continue;
        }
        match &toks[i].0 {
            Tok::Open => {
                blocks.push(header_is_impl);
                header_is_impl = false;
            }
            Tok::Close => {
                blocks.pop();
                header_is_impl = false;
            }
            Tok::Other(';') => header_is_impl = false,
            Tok::Ident(w) if w == "impl" => header_is_impl = true,
            Tok::Ident(kind)
                if matches!(
                    kind.as_str(),
                    "struct" | "enum" | "union" | "trait" | "type"
                ) =>
            {
                let in_impl = blocks.last().copied().unwrap_or(false);
                if let Some((Tok::Ident(name), line)) = toks.get(i + 1)
                    && !(kind == "type" && in_impl)
                    && (kind != "union" || starts_union(toks, i))
                {
                    out.push((name.clone(), *line));
                }
                if kind == "trait" {
                    header_is_impl = true;
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// `union` is a keyword only before a name and a `{` or generics.
fn starts_union(toks: &[(Tok, usize)], i: usize) -> bool {
    matches!(
        toks.get(i + 2).map(|t| &t.0),
        Some(Tok::Open | Tok::Other('<'))
    )
}

/// Where clap may be named: the parsing structs (`cli.rs`, `cli/`), the
/// commands that turn them into a run configuration
/// (`commands/run_config.rs`), and the binary. Below `commands`, steps and
/// plan take plain types (issue 39): what the operator typed is resolved
/// once, above them, and no parser's type travels down.
const CLAP_FILES: &[&str] = &["cli.rs", "cli/", "commands/", "main.rs"];

#[test]
fn no_file_below_the_commands_uses_clap() {
    let mut bad = Vec::new();
    for file in load_sources() {
        if CLAP_FILES.iter().any(|allowed| {
            file.rel == *allowed || (allowed.ends_with('/') && file.rel.starts_with(allowed))
        }) {
            continue;
        }
        for (tok, line) in tokens(&code_only(&file.text)) {
            if tok == Tok::Ident("clap".into()) {
                bad.push(format!("src/{}:{line}", file.rel));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "clap named outside src/cli.rs, src/cli/, src/commands/ and src/main.rs (give the type a \
         plain definition and its clap conversion, a `ValueEnum` impl or a `value_parser`, in \
         src/cli.rs):\n  {}",
        bad.join("\n  ")
    );
}

/// The scanner itself: a use tree expands, and literals and comments hide.
#[test]
fn the_scanner_reads_use_trees_and_skips_literals() {
    let file = SourceFile {
        rel: "a/b.rs".into(),
        module: vec!["a".into(), "b".into()],
        text: "use crate::{x::{Y, z::W}, v};\n// crate::no::one\nlet s = \"crate::nor::this\";\nlet r = r#\"super::nope {\"#;\nlet c = '{';\nmod tests { use super::Q; }\nfn f() { super::c::go() }\n".into(),
    };
    let (ms, inline) = mentions(&file);
    let got: Vec<(Vec<String>, Vec<String>)> =
        ms.into_iter().map(|m| (m.here, m.segments)).collect();
    let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        got,
        vec![
            (s(&["a", "b"]), s(&["crate", "x", "Y"])),
            (s(&["a", "b"]), s(&["crate", "x", "z", "W"])),
            (s(&["a", "b"]), s(&["crate", "v"])),
            (s(&["a", "b", "tests"]), s(&["super", "Q"])),
            (s(&["a", "b"]), s(&["super", "c", "go"])),
        ]
    );
    assert_eq!(inline, vec!["tests".to_string()]);
}

/// The type scanner: aliases, unions and nested types count; associated
/// types and `#[cfg(test)]` items do not.
#[test]
fn the_type_scanner_skips_test_code_and_associated_types() {
    let code = "pub struct A;\nenum B { X }\ntype C = u8;\nunion D { a: u8 }\n\
                let union = 1;\ntrait E { type F; }\nimpl Iterator for A { type Item = u8; }\n\
                fn g() { struct H; }\n#[cfg(test)]\nmod tests { struct I; }\n\
                #[cfg(test)]\nstruct J;\nstruct K(u8);\n";
    let names: Vec<String> = type_definitions(&tokens(code))
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, ["A", "B", "C", "D", "E", "H", "K"]);
}

/// `cargo test --test layers -- --ignored --nocapture` prints the module
/// graph as it is, to redraw the table in docs/architecture.md.
#[test]
#[ignore]
fn print_the_top_level_graph() {
    let krate = read_crate();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, _, from, to) in krate.edges() {
        if let (Some(f), Some(t)) = (from.first(), to.first())
            && f != t
        {
            let site = if file.ends_with("tests.rs") || file.contains("/tests/") {
                "(test)"
            } else {
                ""
            };
            g.entry(f.clone()).or_default().insert(format!("{t}{site}"));
        }
    }
    for (f, ts) in g {
        println!("{f} -> {}", ts.into_iter().collect::<Vec<_>>().join(" "));
    }
}
