//! The node's account files. A node starts from the host's `/etc/passwd`,
//! `group`, `shadow` and `gshadow` (root, system users) but must define
//! Flatcar's `core` as uid/gid 500 whatever the host has: a host whose own
//! `core` is uid 1000, or whose uid 500 is someone else, would otherwise
//! give the node a `core` that cannot use its own `~/.ssh` (chowned to 500)
//! or an `id -un` that names another user.

use std::collections::BTreeSet;

/// Flatcar's admin user and group id.
pub const CORE_ID: u32 = 500;

/// The four account files, each with the line Flatcar has for `core`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccountFile {
    Passwd,
    Group,
    Shadow,
    Gshadow,
}

impl AccountFile {
    pub const ALL: [AccountFile; 4] = [
        AccountFile::Passwd,
        AccountFile::Group,
        AccountFile::Shadow,
        AccountFile::Gshadow,
    ];

    pub fn path(self) -> &'static str {
        match self {
            AccountFile::Passwd => "/etc/passwd",
            AccountFile::Group => "/etc/group",
            AccountFile::Shadow => "/etc/shadow",
            AccountFile::Gshadow => "/etc/gshadow",
        }
    }

    fn core_line(self) -> &'static str {
        match self {
            AccountFile::Passwd => "core:x:500:500:Flatcar Admin:/home/core:/bin/bash",
            AccountFile::Group => "core:x:500:",
            AccountFile::Shadow => "core:*:20000:0:99999:7:::",
            AccountFile::Gshadow => "core:!::",
        }
    }
}

/// Which host entries make way for `core`: the host's own `core`, and
/// whoever holds id 500 (users from passwd, groups from group). shadow and
/// gshadow lose the same names as passwd and group.
#[derive(Debug, Default)]
pub struct Displaced {
    users: BTreeSet<String>,
    groups: BTreeSet<String>,
}

impl Displaced {
    /// Reads the host's passwd and group text.
    pub fn from_host(passwd: &str, group: &str) -> Displaced {
        let holders = |text: &str| -> BTreeSet<String> {
            text.lines()
                .filter_map(|l| {
                    let fields: Vec<&str> = l.split(':').collect();
                    let id = fields.get(2)?.parse::<u32>().ok();
                    let name = fields.first()?;
                    (*name == "core" || id == Some(CORE_ID)).then(|| name.to_string())
                })
                .chain(std::iter::once("core".to_string()))
                .collect()
        };
        Displaced {
            users: holders(passwd),
            groups: holders(group),
        }
    }

    fn names(&self, file: AccountFile) -> &BTreeSet<String> {
        match file {
            AccountFile::Passwd | AccountFile::Shadow => &self.users,
            AccountFile::Group | AccountFile::Gshadow => &self.groups,
        }
    }
}

/// The node's version of one account file: the host's lines minus the
/// displaced entries, then Flatcar's `core` line.
pub fn node_file(file: AccountFile, host_text: &str, displaced: &Displaced) -> String {
    let names = displaced.names(file);
    let mut out = String::new();
    for line in host_text.lines() {
        let name = line.split(':').next().unwrap_or("");
        if names.contains(name) {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(file.core_line());
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n\
                          core:x:1000:1000:Someone Else:/home/core:/bin/zsh\n\
                          alice:x:500:500::/home/alice:/bin/sh\n\
                          bob:x:1001:1001::/home/bob:/bin/sh";
    const GROUP: &str = "root:x:0:\ncore:x:1000:\nalice:x:500:\nsudo:x:27:bob\n";

    #[test]
    fn a_host_core_with_another_uid_is_replaced() {
        let d = Displaced::from_host(PASSWD, GROUP);
        assert_eq!(
            node_file(AccountFile::Passwd, PASSWD, &d),
            "root:x:0:0:root:/root:/bin/bash\n\
             bob:x:1001:1001::/home/bob:/bin/sh\n\
             core:x:500:500:Flatcar Admin:/home/core:/bin/bash\n"
        );
        assert_eq!(
            node_file(AccountFile::Group, GROUP, &d),
            "root:x:0:\nsudo:x:27:bob\ncore:x:500:\n"
        );
    }

    #[test]
    fn shadow_files_lose_the_same_names() {
        let d = Displaced::from_host(PASSWD, GROUP);
        let shadow = "root:*:19000:0:99999:7:::\ncore:$6$x:19000:0:99999:7:::\nalice:!:19000::::::\nbob:!:19000::::::\n";
        assert_eq!(
            node_file(AccountFile::Shadow, shadow, &d),
            "root:*:19000:0:99999:7:::\nbob:!:19000::::::\ncore:*:20000:0:99999:7:::\n"
        );
        let gshadow = "root:*::\ncore:!::\nalice:!::\n";
        assert_eq!(
            node_file(AccountFile::Gshadow, gshadow, &d),
            "root:*::\ncore:!::\n"
        );
    }

    #[test]
    fn a_host_without_core_gets_one_line_added() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n";
        let d = Displaced::from_host(passwd, "root:x:0:\n");
        let out = node_file(AccountFile::Passwd, passwd, &d);
        assert_eq!(
            out.lines().filter(|l| l.starts_with("core:")).count(),
            1,
            "{out}"
        );
        assert!(out.ends_with("core:x:500:500:Flatcar Admin:/home/core:/bin/bash\n"));
    }
}
