//! Reading sysupdate transfer definitions (`/etc/sysupdate[.COMPONENT].d/*.conf`)
//! the way systemd-sysupdate 255 does: unknown keys and sections are warned
//! about and ignored, a missing `=` or an invalid MatchPattern is fatal, and
//! the definition is then validated with the real tool's messages, prefixed
//! `FILE:LINE:` as `log_syntax()` prints them.

use std::fs;

use super::pattern;

/// Default `InstancesMax=` for file targets (`DEFAULT_FILE_INSTANCES_MAX`).
const DEFAULT_INSTANCES_MAX: u64 = 3;

/// One validated transfer definition. Paths are as seen inside the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    /// The config file, for messages.
    pub file: String,
    pub verify: Option<bool>,
    pub source_url: String,
    pub source_patterns: Vec<String>,
    pub target_path: String,
    pub target_patterns: Vec<String>,
    /// `u64::MAX` keeps every instance, as `transfer_vacuum` reads it.
    pub instances_max: u64,
    pub current_symlink: Option<String>,
    /// `ProtectVersion=`: versions the clean-up never removes.
    pub protected_versions: Vec<String>,
}

/// Why definitions could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The real tool would refuse with this message.
    Invalid(String),
    /// Valid upstream, not emulated by fleetsim.
    Unsupported(String),
}

#[derive(Default)]
struct Raw {
    verify: Option<bool>,
    source_type: Option<String>,
    source_path: Option<String>,
    source_patterns: Vec<String>,
    target_type: Option<String>,
    target_path: Option<String>,
    target_patterns: Vec<String>,
    instances_max: u64,
    current_symlink: Option<String>,
    protected_versions: Vec<String>,
}

const RESOURCE_TYPES: &[&str] = &[
    "url-file",
    "url-tar",
    "tar",
    "regular-file",
    "directory",
    "subvolume",
    "partition",
];

/// Where the transfer definitions come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `/etc/sysupdate.d`, or `/etc/sysupdate.COMPONENT.d` with `--component`.
    Component(Option<String>),
    /// `--definitions=DIR`: that directory instead (a node path).
    Dir(String),
}

/// Reads and validates every definition from `source`; `root` maps node
/// paths to where the tool runs. Definitions are `*.transfer` files, or
/// `*.conf` when a directory has none (the older name). Warnings go to `log`.
pub fn read_definitions(
    root: &dyn Fn(&str) -> std::path::PathBuf,
    source: &Source,
    log: &mut Vec<String>,
) -> Result<Vec<Transfer>, ConfigError> {
    let dir = match source {
        Source::Component(Some(c)) => format!("/etc/sysupdate.{c}.d"),
        Source::Component(None) => "/etc/sysupdate.d".to_string(),
        Source::Dir(d) => d.trim_end_matches('/').to_string(),
    };
    let mut files = super::super::files_with_suffix(&root(&dir), "transfer");
    if files.is_empty() {
        files = super::super::files_with_suffix(&root(&dir), "conf");
    }
    let mut transfers = Vec::new();
    for file in files {
        let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
        let shown = format!("{dir}/{}", name.unwrap_or_default());
        let text = fs::read_to_string(&file)
            .map_err(|e| ConfigError::Invalid(format!("Failed to open \"{shown}\": {e}")))?;
        transfers.push(parse(&shown, &text, log)?);
    }
    if transfers.is_empty() {
        return Err(ConfigError::Invalid(match source {
            Source::Component(Some(c)) => {
                format!("No transfer definitions for component '{c}' found.")
            }
            _ => "No transfer definitions found.".to_string(),
        }));
    }
    Ok(transfers)
}

/// Parses and validates one definition; `file` is its path for messages.
pub fn parse(file: &str, text: &str, log: &mut Vec<String>) -> Result<Transfer, ConfigError> {
    let mut raw = Raw::default();
    let mut section: Option<String> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let name = name.trim();
            if ["Transfer", "Source", "Target"].contains(&name) {
                section = Some(name.to_string());
            } else {
                log.push(format!("{file}:{n}: Unknown section '{name}'. Ignoring."));
                section = Some(String::new());
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(ConfigError::Invalid(format!(
                "{file}:{n}: Missing '=', ignoring line."
            )));
        };
        match section.as_deref() {
            None => log.push(format!(
                "{file}:{n}: Assignment outside of section. Ignoring."
            )),
            Some("") => {}
            Some(s) => assign(&mut raw, file, n, s, key.trim(), value.trim(), log)?,
        }
    }
    finalize(file, raw, log)
}

fn assign(
    raw: &mut Raw,
    file: &str,
    n: usize,
    section: &str,
    key: &str,
    value: &str,
    log: &mut Vec<String>,
) -> Result<(), ConfigError> {
    match (section, key) {
        ("Transfer", "Verify") => match parse_bool(value) {
            Some(b) => raw.verify = Some(b),
            None => log.push(format!(
                "{file}:{n}: Failed to parse boolean value, ignoring: {value}"
            )),
        },
        ("Source", "Type") | ("Target", "Type") => {
            if RESOURCE_TYPES.contains(&value) {
                let slot = if section == "Source" {
                    &mut raw.source_type
                } else {
                    &mut raw.target_type
                };
                *slot = Some(value.to_string());
            } else {
                log.push(format!(
                    "{file}:{n}: Failed to parse resource type, ignoring: {value}"
                ));
            }
        }
        ("Source", "Path") => raw.source_path = Some(value.to_string()),
        ("Target", "Path") => raw.target_path = Some(value.to_string()),
        ("Source", "MatchPattern") => add_patterns(&mut raw.source_patterns, file, n, value)?,
        ("Target", "MatchPattern") => add_patterns(&mut raw.target_patterns, file, n, value)?,
        ("Target", "InstancesMax") => set_instances_max(raw, file, n, value, log),
        ("Transfer", "ProtectVersion") => protect_version(raw, file, n, value, log)?,
        ("Target", "CurrentSymlink") => {
            raw.current_symlink = (!value.is_empty()).then(|| value.to_string());
        }
        ("Transfer", k) if TRANSFER_KEYS_NOT_EMULATED.contains(&k) => {
            return Err(not_emulated(file, n, section, key));
        }
        ("Source", "PathRelativeTo") => return Err(not_emulated(file, n, section, key)),
        ("Target", k) if TARGET_KEYS_NOT_EMULATED.contains(&k) => {
            return Err(not_emulated(file, n, section, key));
        }
        _ => log.push(format!(
            "{file}:{n}: Unknown key name '{key}' in section '{section}', ignoring."
        )),
    }
    Ok(())
}

const TRANSFER_KEYS_NOT_EMULATED: &[&str] = &[
    "MinVersion",
    "MaxVersion",
    "ChangeLog",
    "AppStream",
    "Features",
    "RequisiteFeatures",
];

const TARGET_KEYS_NOT_EMULATED: &[&str] = &[
    "PathRelativeTo",
    "MatchPartitionType",
    "PartitionUUID",
    "PartitionFlags",
    "PartitionNoAuto",
    "PartitionGrowFileSystem",
    "ReadOnly",
    "Mode",
    "TriesLeft",
    "TriesDone",
    "RemoveTemporary",
];

/// `config_parse_protect_version`: one version a line, added to the list;
/// an invalid one is warned about and ignored. Specifiers (`%A`, the
/// booted IMAGE_VERSION) are not emulated.
fn protect_version(
    raw: &mut Raw,
    file: &str,
    n: usize,
    value: &str,
    log: &mut Vec<String>,
) -> Result<(), ConfigError> {
    if value.contains('%') {
        return Err(ConfigError::Unsupported(format!(
            "specifiers in ProtectVersion= ({file}:{n})"
        )));
    }
    // version_is_valid(): non-empty, printable, no whitespace or slash.
    let valid = !value.is_empty()
        && value.len() <= 255
        && value
            .chars()
            .all(|c| c.is_ascii_graphic() && c != '/' && c != '\\');
    if valid {
        if !raw.protected_versions.iter().any(|v| v == value) {
            raw.protected_versions.push(value.to_string());
        }
    } else {
        log.push(format!(
            "{file}:{n}: ProtectVersion= string is not valid, ignoring: {value}"
        ));
    }
    Ok(())
}

fn not_emulated(file: &str, n: usize, section: &str, key: &str) -> ConfigError {
    ConfigError::Unsupported(format!("{key}= in [{section}] ({file}:{n})"))
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "yes" | "y" | "true" | "t" | "on" => Some(true),
        "0" | "no" | "n" | "false" | "f" | "off" => Some(false),
        _ => None,
    }
}

fn add_patterns(
    patterns: &mut Vec<String>,
    file: &str,
    n: usize,
    value: &str,
) -> Result<(), ConfigError> {
    if value.is_empty() {
        patterns.clear();
        return Ok(());
    }
    for word in value.split_whitespace() {
        let expanded = pattern::expand_specifiers(word).map_err(|spec| {
            ConfigError::Unsupported(format!("specifier {spec} in MatchPattern= ({file}:{n})"))
        })?;
        match pattern::validate(&expanded) {
            Ok(()) => {}
            Err(Some(field)) => {
                return Err(ConfigError::Unsupported(format!(
                    "field {field} in MatchPattern= ({file}:{n})"
                )));
            }
            Err(None) => {
                return Err(ConfigError::Invalid(format!(
                    "{file}:{n}: MatchPattern= string is not valid, refusing: {expanded}"
                )));
            }
        }
        if !patterns.contains(&expanded) {
            patterns.push(expanded);
        }
    }
    Ok(())
}

fn set_instances_max(raw: &mut Raw, file: &str, n: usize, value: &str, log: &mut Vec<String>) {
    if value.is_empty() {
        raw.instances_max = 0;
        return;
    }
    match value.parse::<u64>() {
        Ok(1) => {
            log.push(format!(
                "{file}:{n}: InstancesMax= value must be at least 2, bumping: 1"
            ));
            raw.instances_max = 2;
        }
        Ok(v) => raw.instances_max = v,
        Err(_) => log.push(format!(
            "{file}:{n}: Failed to parse InstancesMax= value, ignoring: {value}"
        )),
    }
}

fn invalid(file: &str, msg: impl std::fmt::Display) -> ConfigError {
    ConfigError::Invalid(format!("{file}:1: {msg}"))
}

fn is_normalized_absolute(p: &str) -> bool {
    p.starts_with('/') && !p.contains("//") && !p.split('/').any(|c| c == "." || c == "..")
}

fn finalize(file: &str, raw: Raw, log: &mut Vec<String>) -> Result<Transfer, ConfigError> {
    let source_type = raw.source_type.as_deref().unwrap_or("");
    if ![
        "url-file",
        "url-tar",
        "tar",
        "regular-file",
        "directory",
        "subvolume",
    ]
    .contains(&source_type)
    {
        return Err(invalid(
            file,
            "Source Type= must be one of url-file, url-tar, tar, regular-file, directory, subvolume.",
        ));
    }
    if source_type != "url-file" {
        return Err(ConfigError::Unsupported(format!(
            "[Source] Type={source_type} ({file}); only url-file is emulated"
        )));
    }
    let target_type = match raw.target_type.as_deref() {
        Some(t) => t,
        None if raw
            .target_path
            .as_deref()
            .is_some_and(|p| p.starts_with("/dev/")) =>
        {
            "partition"
        }
        None => "regular-file",
    };
    if !["partition", "regular-file", "directory", "subvolume"].contains(&target_type) {
        return Err(invalid(
            file,
            "Target Type= must be one of partition, regular-file, directory, subvolume.",
        ));
    }
    if !["partition", "regular-file"].contains(&target_type) {
        return Err(invalid(
            file,
            format!(
                "Target type '{target_type}' is incompatible with source type 'url-file', refusing."
            ),
        ));
    }
    if target_type == "partition" {
        return Err(ConfigError::Unsupported(format!(
            "[Target] Type=partition ({file})"
        )));
    }
    let Some(source_url) = raw.source_path else {
        return Err(invalid(file, "Source specification lacks Path=."));
    };
    if !["http://", "https://", "file://"]
        .iter()
        .any(|s| source_url.starts_with(s))
    {
        return Err(invalid(
            file,
            format!("Source path is not a valid HTTP or HTTPS URL: {source_url}"),
        ));
    }
    if raw.source_patterns.is_empty() {
        return Err(invalid(file, "Source specification lacks MatchPattern=."));
    }
    let Some(target_path) = raw.target_path else {
        return Err(invalid(file, "Target specification lacks Path= field."));
    };
    if !is_normalized_absolute(&target_path) {
        return Err(invalid(
            file,
            format!("Target path is not a normalized, absolute path: {target_path}"),
        ));
    }
    let target_patterns = if raw.target_patterns.is_empty() {
        log.push(format!(
            "{file}:1: Target specification lacks MatchPattern= expression. \
             Assuming same value as in source specification."
        ));
        raw.source_patterns.clone()
    } else {
        raw.target_patterns
    };
    Ok(Transfer {
        file: file.to_string(),
        verify: raw.verify,
        source_url,
        source_patterns: raw.source_patterns,
        target_path: target_path.trim_end_matches('/').to_string(),
        target_patterns,
        instances_max: if raw.instances_max == 0 {
            DEFAULT_INSTANCES_MAX
        } else {
            raw.instances_max
        },
        current_symlink: raw.current_symlink,
        protected_versions: raw.protected_versions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: &str = "/etc/sysupdate.kubernetes.d/kubernetes.conf";

    fn bakery(pattern: &str) -> String {
        format!(
            "[Transfer]\nVerify=false\n\n[Source]\nType=url-file\nPath=http://127.0.0.1:8080/kubernetes/\n\
             MatchPattern={pattern}\n\n[Target]\nInstancesMax=3\nType=regular-file\n\
             Path=/opt/extensions/kubernetes\nCurrentSymlink=/etc/extensions/kubernetes.raw\n"
        )
    }

    #[test]
    fn a_bakery_config_parses() {
        let mut log = Vec::new();
        let t = parse(F, &bakery("kubernetes-v1.37.@v-%a.raw"), &mut log).unwrap();
        assert_eq!(t.source_patterns, ["kubernetes-v1.37.@v-x86-64.raw"]);
        assert_eq!(t.target_patterns, t.source_patterns);
        assert_eq!(t.instances_max, 3);
        assert_eq!(t.verify, Some(false));
        assert_eq!(t.target_path, "/opt/extensions/kubernetes");
        assert_eq!(
            t.current_symlink.as_deref(),
            Some("/etc/extensions/kubernetes.raw")
        );
        assert_eq!(
            log,
            [format!(
                "{F}:1: Target specification lacks MatchPattern= expression. \
                 Assuming same value as in source specification."
            )]
        );
    }

    #[test]
    fn unknown_keys_warn_and_a_typo_then_fails_validation() {
        let text = bakery("x").replace("MatchPattern=x", "MatchPatern=kubernetes-@v-%a.raw");
        let mut log = Vec::new();
        let err = parse(F, &text, &mut log).unwrap_err();
        assert_eq!(
            err,
            ConfigError::Invalid(format!("{F}:1: Source specification lacks MatchPattern=."))
        );
        assert_eq!(
            log[0],
            format!("{F}:7: Unknown key name 'MatchPatern' in section 'Source', ignoring.")
        );
    }

    #[test]
    fn missing_sections_and_bad_lines_are_refused() {
        let mut log = Vec::new();
        let no_source = "[Target]\nPath=/opt/extensions/kubernetes\n";
        assert_eq!(
            parse(F, no_source, &mut log),
            Err(ConfigError::Invalid(format!(
                "{F}:1: Source Type= must be one of url-file, url-tar, tar, regular-file, directory, subvolume."
            )))
        );
        let no_target = "[Source]\nType=url-file\nPath=http://h/\nMatchPattern=k-@v.raw\n";
        assert_eq!(
            parse(F, no_target, &mut log),
            Err(ConfigError::Invalid(format!(
                "{F}:1: Target specification lacks Path= field."
            )))
        );
        assert_eq!(
            parse(F, "[Source]\nType\n", &mut log),
            Err(ConfigError::Invalid(format!(
                "{F}:2: Missing '=', ignoring line."
            )))
        );
        let relative = no_target.to_string() + "[Target]\nPath=opt/x\n";
        assert_eq!(
            parse(F, &relative, &mut log),
            Err(ConfigError::Invalid(format!(
                "{F}:1: Target path is not a normalized, absolute path: opt/x"
            )))
        );
    }

    #[test]
    fn several_patterns_and_small_instances_max() {
        let text = bakery("kubernetes-v1.37.@v-%a.raw kubernetes-v1.37.@v-%a.raw")
            .replace("InstancesMax=3", "InstancesMax=1")
            + "[Source]\nMatchPattern=kubernetes-v1.38.@v-%a.raw\n";
        let mut log = Vec::new();
        let t = parse(F, &text, &mut log).unwrap();
        assert_eq!(
            t.source_patterns,
            [
                "kubernetes-v1.37.@v-x86-64.raw",
                "kubernetes-v1.38.@v-x86-64.raw"
            ]
        );
        assert_eq!(t.instances_max, 2);
        assert!(log[0].ends_with("InstancesMax= value must be at least 2, bumping: 1"));
    }

    #[test]
    fn features_outside_the_emulation_are_unsupported() {
        let text = bakery("k-@v.raw") + "[Transfer]\nProtectVersion=%A\n";
        let mut log = Vec::new();
        assert!(matches!(
            parse(F, &text, &mut log),
            Err(ConfigError::Unsupported(_))
        ));
    }
}
