//! `systemd-sysupdate [--component=NAME|-C NAME|--definitions=DIR] [update|list]`:
//! the tool that stages a new Kubernetes sysext on a node. It reads the
//! transfer definitions (the component's, or DIR's: `*.transfer`, else
//! `*.conf`; DIR does not combine with `--component`), fetches
//! `<Path>SHA256SUMS` from the hub, picks the newest version matching a
//! MatchPattern, makes room, downloads and verifies it and moves the
//! CurrentSymlink — and nothing else: the new image is only merged at the
//! next boot.
//!
//! Where the real tool's semantics matter to fleetctl they are kept: the
//! version is what `@v` matched (so a pinned pattern never sees the next
//! minor), an update only happens if the candidate is newer than the newest
//! installed image of that definition, and the symlink only moves when an
//! image was installed and the definition has a CurrentSymlink= (without
//! one the image is only downloaded).
//!
//! The clean-up follows systemd v255–v257 (src/sysupdate/sysupdate.c
//! `context_apply` → `context_vacuum(c, 1, us->version)`, then
//! src/sysupdate/sysupdate-transfer.c `transfer_vacuum`): it runs *before*
//! the download, for every definition, and removes the oldest instances
//! until at most `InstancesMax - 1` remain ("Making room for 1 updates…",
//! "♻️ Removing old '…' (regular-file).", "Removed N instances."). It
//! spares only `ProtectVersion=` and the version being installed, not the
//! image `CurrentSymlink=` points at: on a node that holds InstancesMax
//! images of its series, an update removes the image the node booted, and
//! what it removed stays removed when the download then fails.
//! `InstancesMax=18446744073709551615` (`UINT64_MAX`) keeps every instance.
//!
//! Simplifications, on purpose: each definition is judged on its own and
//! the newest candidate across them wins (the real tool builds update
//! sets; the effect of a leftover floating config is the same: it drags
//! the node to another series), and the link is written relative, as the
//! real tool writes it.

use std::collections::HashMap;
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use sha2::{Digest, Sha256};

use super::http::{self, HttpError};
use super::util::vercmp;
use super::{Env, complain};

mod config;
mod pattern;
mod vacuum;

pub(super) use config::Source;
use config::{ConfigError, Transfer};
use vacuum::vacuum;

const NAME: &str = "systemd-sysupdate";
/// Connect and per-read timeout towards the hub.
const HUB_TIMEOUT: Duration = Duration::from_secs(10);

/// What one `update` run did: its log lines (stderr, or the journal under
/// systemctl), the version installed if any, and the error if it failed.
#[derive(Debug, Default)]
pub(super) struct Report {
    pub lines: Vec<String>,
    pub installed: Option<String>,
    pub error: Option<String>,
    /// The failure is a limit of the emulation, not something the real tool does.
    pub unsupported: bool,
}

impl Report {
    fn log(&mut self, line: impl Into<String>) {
        self.lines.push(line.into());
    }

    fn fail(&mut self, line: impl Into<String>) {
        let line = line.into();
        self.lines.push(line.clone());
        self.error = Some(line);
    }

    /// Logs every line and fails with the last one (the error itself).
    fn fail_lines(&mut self, lines: Vec<String>) {
        match lines.split_last() {
            Some((last, context)) => {
                self.lines.extend_from_slice(context);
                self.fail(last.clone());
            }
            None => self.fail("fleetsim: systemd-sysupdate failed without a message"),
        }
    }

    fn config_error(&mut self, e: ConfigError) {
        match e {
            ConfigError::Invalid(m) => self.fail(m),
            ConfigError::Unsupported(m) => {
                self.unsupported = true;
                self.fail(format!("fleetsim: unsupported: {m}"));
            }
        }
    }
}

/// The glyphs systemd draws, or their ASCII fallbacks outside a UTF-8 locale.
#[derive(Clone, Copy)]
struct Glyphs {
    ellipsis: &'static str,
    arrow: &'static str,
    download: &'static str,
    recycle: &'static str,
    sparkles: &'static str,
    current: &'static str,
    candidate: &'static str,
    check: &'static str,
}

impl Glyphs {
    fn new(utf8: bool) -> Glyphs {
        if utf8 {
            Glyphs {
                ellipsis: "…",
                arrow: "→",
                download: "⤵️ ",
                recycle: "♻️ ",
                sparkles: "✨ ",
                current: "●",
                candidate: "↻",
                check: "✓",
            }
        } else {
            Glyphs {
                ellipsis: "...",
                arrow: "->",
                download: "",
                recycle: "",
                sparkles: "",
                current: "*",
                candidate: "+",
                check: "+",
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Verb {
    List,
    Update,
}

struct Cli {
    source: Source,
    verb: Verb,
    legend: bool,
}

/// What the command line asks for, or the error the real tool refuses it with.
enum Parsed {
    Cli(Cli),
    Refused(&'static str),
}

fn parse_args(args: &[String]) -> Option<Parsed> {
    let mut component = None;
    let mut definitions = None;
    let mut verb = None;
    let mut legend = true;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--component" | "-C" => component = Some(it.next()?.clone()),
            "--definitions" => definitions = Some(it.next()?.clone()),
            s if s.starts_with("--definitions=") => {
                definitions = Some(s["--definitions=".len()..].to_string());
            }
            "--no-pager" => {}
            "--no-legend" => legend = false,
            "list" | "update" if verb.is_none() => {
                verb = Some(if a == "list" {
                    Verb::List
                } else {
                    Verb::Update
                });
            }
            s if s.starts_with("--component=") => {
                component = Some(s["--component=".len()..].to_string());
            }
            s if s.starts_with("-C") && s.len() > 2 => component = Some(s[2..].to_string()),
            _ => return None,
        }
    }
    if component.as_deref().is_some_and(|c| {
        c.is_empty()
            || !c
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || "-_".contains(ch))
    }) {
        return None;
    }
    let source = match (component, definitions) {
        (Some(_), Some(_)) => {
            return Some(Parsed::Refused(
                "The --definitions= and --component= switches may not be combined.",
            ));
        }
        // A relative directory would depend on where the caller stands.
        (None, Some(d)) if !d.starts_with('/') => return None,
        (None, Some(d)) => Source::Dir(d),
        (c, None) => Source::Component(c),
    };
    Some(Parsed::Cli(Cli {
        source,
        verb: verb.unwrap_or(Verb::List),
        legend,
    }))
}

pub fn run(env: &mut Env, args: &[String]) -> Result<i32> {
    let cli = match parse_args(args) {
        None => return Ok(env.unsupported(NAME, args)),
        Some(Parsed::Refused(msg)) => {
            complain!(env, "{msg}");
            env.record(NAME, args, msg);
            return Ok(1);
        }
        Some(Parsed::Cli(cli)) => cli,
    };
    match cli.verb {
        Verb::List => Ok(list(env, &cli)),
        Verb::Update => {
            let report = update(env, &cli.source);
            for line in &report.lines {
                complain!(env, "{line}");
            }
            let result = report.error.as_deref().unwrap_or("ok").to_string();
            env.record(NAME, args, &result);
            Ok(if report.error.is_some() { 1 } else { 0 })
        }
    }
}

/// One image: installed in the target directory or offered by the hub.
#[derive(Debug, Clone)]
struct Instance {
    version: String,
    file: String,
    /// Hub URL (available instances only).
    url: String,
    /// Expected sha256, hex (available instances only).
    sha256: String,
}

/// Runs `update` for the definitions of `source` against the node at `env`'s root.
pub(super) fn update(env: &Env, source: &Source) -> Report {
    let g = Glyphs::new(env.utf8);
    let mut rep = Report::default();
    let root = |p: &str| env.path(p);
    let transfers = match config::read_definitions(&root, source, &mut rep.lines) {
        Ok(t) => t,
        Err(e) => {
            rep.config_error(e);
            return rep;
        }
    };
    if let Some(t) = transfers.iter().find(|t| t.verify == Some(true)) {
        rep.unsupported = true;
        rep.fail(format!(
            "fleetsim: unsupported: Verify=yes in {} (signatures are not emulated)",
            t.file
        ));
        return rep;
    }
    rep.log(format!("Discovering installed instances{}", g.ellipsis));
    let installed: Vec<Vec<Instance>> = transfers
        .iter()
        .map(|t| installed_instances(env, t))
        .collect();
    rep.log(format!("Discovering available instances{}", g.ellipsis));
    let mut manifests = HashMap::new();
    let mut available = Vec::new();
    for t in &transfers {
        match available_instances(t, &mut manifests) {
            Ok(a) => available.push(a),
            Err(lines) => {
                rep.fail_lines(lines);
                return rep;
            }
        }
    }
    rep.log(format!("Determining installed update sets{}", g.ellipsis));
    rep.log(format!("Determining available update sets{}", g.ellipsis));
    let Some((i, candidate)) = choose(&installed, &available) else {
        rep.log("No update needed.");
        return rep;
    };
    rep.log(format!(
        "Selected update '{}' for install.",
        candidate.version
    ));
    // context_apply(): room first, for every definition, protecting only
    // the version about to be installed; then the download.
    rep.log(format!("Making room for 1 updates{}", g.ellipsis));
    let mut removed = 0;
    for (t, inst) in transfers.iter().zip(&installed) {
        match vacuum(env, t, inst, &candidate.version, g, &mut rep) {
            Ok(n) => removed = removed.max(n),
            Err(line) => {
                rep.fail(line);
                return rep;
            }
        }
    }
    rep.log(if removed == 0 {
        "Removed no instances.".to_string()
    } else {
        format!("Removed {removed} instances.")
    });
    install(env, &transfers[i], &candidate, g, &mut rep);
    rep
}

/// Images of this definition in its target directory (none if it does not exist yet).
fn installed_instances(env: &Env, t: &Transfer) -> Vec<Instance> {
    let Ok(entries) = fs::read_dir(env.path(&t.target_path)) else {
        return Vec::new();
    };
    let mut found: Vec<Instance> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|ft| ft.is_file()))
        .filter_map(|e| {
            let file = e.file_name().to_string_lossy().into_owned();
            if file.starts_with('.') {
                return None;
            }
            let version = t
                .target_patterns
                .iter()
                .find_map(|p| pattern::match_version(p, &file))?;
            Some(Instance {
                version,
                file,
                url: String::new(),
                sha256: String::new(),
            })
        })
        .collect();
    found.sort_by(|a, b| vercmp(&a.version, &b.version));
    found
}

fn join_url(base: &str, file: &str) -> String {
    if base.ends_with('/') {
        format!("{base}{file}")
    } else {
        format!("{base}/{file}")
    }
}

/// The failure lines systemd-pull and sysupdate print for a failed fetch.
fn fetch_error(url: &str, e: &HttpError, helper: &str) -> Vec<String> {
    let first = match e {
        HttpError::Status(code) => format!("HTTP request to {url} failed with code {code}."),
        HttpError::Transfer(m) => format!("Transfer failed: {m}"),
        HttpError::BadUrl(_) => {
            return vec![format!(
                "fleetsim: unsupported: {url} (the simulated hub client speaks plain http:// only)"
            )];
        }
    };
    vec![first, format!("{helper} failed with exit status 1.")]
}

/// Images the hub offers for this definition, from its SHA256SUMS manifest.
fn available_instances(
    t: &Transfer,
    manifests: &mut HashMap<String, String>,
) -> Result<Vec<Instance>, Vec<String>> {
    let url = join_url(&t.source_url, "SHA256SUMS");
    let text = match manifests.get(&url) {
        Some(text) => text.clone(),
        None => {
            let body =
                http::get(&url, HUB_TIMEOUT).map_err(|e| fetch_error(&url, &e, "(sd-pull)"))?;
            let text = String::from_utf8(body)
                .map_err(|_| vec!["Manifest file is not valid UTF-8, refusing.".to_string()])?;
            manifests.insert(url.clone(), text.clone());
            text
        }
    };
    let mut found = Vec::new();
    for (sha256, file) in parse_manifest(&text).map_err(|e| vec![e])? {
        if let Some(version) = t
            .source_patterns
            .iter()
            .find_map(|p| pattern::match_version(p, &file))
        {
            found.push(Instance {
                version,
                url: join_url(&t.source_url, &file),
                file,
                sha256,
            });
        }
    }
    found.sort_by(|a, b| vercmp(&a.version, &b.version));
    Ok(found)
}

/// Parses `<sha256><space><space|*><file>` lines as sysupdate does, with its refusals.
fn parse_manifest(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut entries = Vec::new();
    let mut rest = text;
    let mut n = 1;
    while !rest.is_empty() {
        let Some(eol) = rest.find('\n') else {
            return Err(format!("Truncated manifest file at line {n}, refusing."));
        };
        let line = &rest[..eol];
        rest = &rest[eol + 1..];
        if line.len() < 66 {
            return Err(format!("Corrupt manifest at line {n}, refusing."));
        }
        // All-hex first, so that byte 64 is known to be a char boundary.
        if !line.as_bytes()[..64].iter().all(u8::is_ascii_hexdigit) {
            return Err(format!(
                "Failed to parse digest at manifest line {n}, refusing."
            ));
        }
        let (hash, tail) = line.split_at(64);
        let Some(tail) = tail.strip_prefix(' ') else {
            return Err(format!(
                "Missing space separator at manifest line {n}, refusing."
            ));
        };
        let Some(file) = tail.strip_prefix([' ', '*']) else {
            return Err(format!(
                "Missing binary/text input marker at manifest line {n}, refusing."
            ));
        };
        if file.is_empty() {
            return Err(format!(
                "Empty filename specified at manifest line {n}, refusing."
            ));
        }
        entries.push((hash.to_ascii_lowercase(), file.to_string()));
        n += 1;
    }
    Ok(entries)
}

/// Per definition, the newest offered image newer than its newest installed
/// one; across definitions, the newest image name wins.
fn choose(installed: &[Vec<Instance>], available: &[Vec<Instance>]) -> Option<(usize, Instance)> {
    let mut best: Option<(usize, Instance)> = None;
    for (i, (inst, avail)) in installed.iter().zip(available).enumerate() {
        let newest_installed = inst.last().map(|x| x.version.as_str());
        let Some(candidate) = avail.last() else {
            continue;
        };
        if newest_installed.is_some_and(|v| vercmp(v, &candidate.version).is_ge()) {
            continue;
        }
        if best
            .as_ref()
            .is_none_or(|(_, b)| vercmp(&candidate.file, &b.file).is_gt())
        {
            best = Some((i, candidate.clone()));
        }
    }
    best
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn install(env: &Env, t: &Transfer, c: &Instance, g: Glyphs, rep: &mut Report) {
    let Some(target_pattern) = t.target_patterns.first() else {
        rep.fail(format!(
            "{}:1: Target specification lacks MatchPattern=.",
            t.file
        ));
        return;
    };
    let final_name = pattern::format(target_pattern, &c.version);
    let final_path = format!("{}/{final_name}", t.target_path);
    rep.log(format!(
        "{}Acquiring {} {} {}{}",
        g.download, c.url, g.arrow, final_path, g.ellipsis
    ));
    let body = match http::get(&c.url, HUB_TIMEOUT) {
        Ok(b) => b,
        Err(e) => {
            rep.fail_lines(fetch_error(&c.url, &e, "(sd-pull-raw)"));
            return;
        }
    };
    if sha256_hex(&body) != c.sha256 {
        // systemd 257's words (src/import/pull-common.c, pull_verify() with
        // the literal checksum sysupdate passes), as the real-OS nodes print
        // them; releases after 257 say "Checksum of downloaded resource does
        // not match expected checksum, yikes." (src/import/pull-job.c).
        rep.log(format!(
            "DOWNLOAD INVALID: Checksum of {} file did not check out, file has been tampered with.",
            c.url
        ));
        rep.fail("(sd-pull-raw) failed with exit status 1: Bad message");
        return;
    }
    let dir = env.path(&t.target_path);
    // tempfn_random(): `.#sysupdate<name><16 hex>`, which the next
    // clean-up removes if this run dies before the rename.
    let partial = dir.join(format!(".#sysupdate{final_name}{:016x}", random_suffix()));
    let written = fs::create_dir_all(&dir).and_then(|()| fs::write(&partial, &body));
    if let Err(e) = written {
        let _ = fs::remove_file(&partial);
        rep.fail(format!("Failed to write '{}': {e}", t.target_path));
        return;
    }
    rep.log(format!("Successfully acquired '{}'.", c.url));
    if let Err(e) = fs::rename(&partial, dir.join(&final_name)) {
        let _ = fs::remove_file(&partial);
        rep.fail(format!("Failed to move '{final_path}' into place: {e}"));
        return;
    }
    rep.log(format!(
        "Successfully installed '{}' (url-file) as '{final_path}' (regular-file).",
        c.url
    ));
    if let Some(link) = &t.current_symlink {
        let link_path = if link.starts_with('/') {
            link.clone()
        } else {
            format!("{}/{link}", t.target_path)
        };
        match move_symlink(env, &link_path, &final_path) {
            Ok(rel) => rep.log(format!(
                "Updated symlink '{link_path}' {} '{rel}'.",
                g.arrow
            )),
            Err(e) => {
                rep.fail(format!(
                    "Failed to update current symlink '{link_path}' {} '{final_path}': {e}",
                    g.arrow
                ));
                return;
            }
        }
    }
    rep.log(format!(
        "{}Successfully installed update '{}'.",
        g.sparkles, c.version
    ));
    rep.installed = Some(c.version.clone());
}

/// Some bits for a temporary name, unique enough within one node.
fn random_suffix() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    (u64::from(std::process::id()) << 32) | u64::from(nanos)
}

/// `to` relative to the directory `from_dir`; both normalized absolute paths.
fn relative_path(from_dir: &Path, to: &Path) -> PathBuf {
    let parts = |p: &Path| -> Vec<String> {
        p.components()
            .filter_map(|c| match c {
                Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect()
    };
    let (from, to) = (parts(from_dir), parts(to));
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut rel = PathBuf::new();
    for _ in common..from.len() {
        rel.push("..");
    }
    for part in &to[common..] {
        rel.push(part);
    }
    rel
}

/// Points `link` (a node path) at `target` with a relative link, atomically.
fn move_symlink(env: &Env, link: &str, target: &str) -> std::io::Result<String> {
    let link_path = Path::new(link);
    let parent = link_path.parent().unwrap_or(Path::new("/"));
    let rel = relative_path(parent, Path::new(target));
    let real_link = env.path(link);
    let real_parent = env.path(&parent.to_string_lossy());
    fs::create_dir_all(&real_parent)?;
    let name = link_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = real_parent.join(format!(".#{name}.fleetsim-{}", std::process::id()));
    let _ = fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&rel, &tmp)?;
    fs::rename(&tmp, &real_link).inspect_err(|_| {
        let _ = fs::remove_file(&tmp);
    })?;
    Ok(rel.to_string_lossy().into_owned())
}

/// `list`: versions installed and offered, newest first, as a systemd table.
fn list(env: &mut Env, cli: &Cli) -> i32 {
    let g = Glyphs::new(env.utf8);
    let mut log = Vec::new();
    let transfers = match config::read_definitions(&|p: &str| env.path(p), &cli.source, &mut log) {
        Ok(t) => t,
        Err(e) => {
            for l in &log {
                complain!(env, "{l}");
            }
            match e {
                ConfigError::Invalid(m) => complain!(env, "{m}"),
                ConfigError::Unsupported(m) => complain!(env, "fleetsim: unsupported: {m}"),
            }
            return 1;
        }
    };
    for l in &log {
        complain!(env, "{l}");
    }
    let mut versions: Vec<(String, bool, bool)> = Vec::new();
    let mut manifests = HashMap::new();
    for t in &transfers {
        let available = match available_instances(t, &mut manifests) {
            Ok(a) => a,
            Err(lines) => {
                for l in lines {
                    complain!(env, "{l}");
                }
                return 1;
            }
        };
        for (inst, is_installed) in installed_instances(env, t)
            .into_iter()
            .map(|i| (i, true))
            .chain(available.into_iter().map(|i| (i, false)))
        {
            match versions.iter_mut().find(|(v, _, _)| *v == inst.version) {
                Some(entry) if is_installed => entry.1 = true,
                Some(entry) => entry.2 = true,
                None => versions.push((inst.version, is_installed, !is_installed)),
            }
        }
    }
    versions.sort_by(|a, b| vercmp(&b.0, &a.0));
    let newest_installed = versions.iter().find(|v| v.1).map(|v| v.0.clone());
    let mut rows = Vec::new();
    if cli.legend {
        rows.push(
            ["", "VERSION", "INSTALLED", "AVAILABLE", "ASSESSMENT"]
                .map(String::from)
                .to_vec(),
        );
    }
    for (i, (version, installed, available)) in versions.iter().enumerate() {
        let (glyph, assessment) = if *installed && Some(version) == newest_installed.as_ref() {
            (g.current, "current")
        } else if *installed {
            (" ", "installed")
        } else if i == 0 {
            (g.candidate, "candidate")
        } else {
            (" ", "available")
        };
        let mark = |b: bool| if b { g.check } else { " " }.to_string();
        rows.push(vec![
            glyph.to_string(),
            version.clone(),
            mark(*installed),
            mark(*available),
            assessment.to_string(),
        ]);
    }
    let _ = write!(env.out, "{}", super::util::table(&rows, 1));
    0
}

#[cfg(test)]
mod tests;
