//! `ansible_ssh_common_args`: the OpenSSH options an Ansible inventory
//! passes to every `ssh`, read into what fleetctl's own transport does
//! (docs/inventory.md). An option fleetctl would silently not honour is
//! refused by name: a bastion left out is a connection that goes somewhere
//! else, a host key option left out a check that differs from Ansible's.

use super::super::{HostKeyChecking, Jump, validate};

/// What the arguments ask of the SSH transport.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct SshArgs {
    pub jump: Option<Jump>,
    pub host_key_checking: Option<HostKeyChecking>,
    pub known_hosts: Option<String>,
}

/// At most this many words: a line of options, not a script.
const MAX_WORDS: usize = 64;

pub(super) fn parse(args: &str) -> Result<SshArgs, String> {
    let words = split(args)?;
    if words.len() > MAX_WORDS {
        return Err(format!("more than {MAX_WORDS} words"));
    }
    let mut out = SshArgs::default();
    let mut it = words.iter();
    while let Some(w) = it.next() {
        match w.as_str() {
            "-J" => {
                let v = it.next().ok_or("-J needs a bastion after it")?;
                jump(&mut out, v)?;
            }
            "-o" => {
                let v = it.next().ok_or("-o needs an option after it")?;
                option(&mut out, v)?;
            }
            w if w.starts_with("-J") => jump(&mut out, &w[2..])?,
            w if w.starts_with("-o") => option(&mut out, &w[2..])?,
            "-q" | "-4" | "-6" | "-C" => {}
            other => {
                return Err(format!(
                    "`{}` is not an option fleetctl understands: it honours -J, \
                     -o ProxyJump=, -o ProxyCommand='ssh -W %h:%p [-q] [-p PORT] [USER@]HOST', \
                     -o StrictHostKeyChecking= and -o UserKnownHostsFile= (docs/inventory.md)",
                    other.escape_debug()
                ));
            }
        }
    }
    Ok(out)
}

fn jump(out: &mut SshArgs, value: &str) -> Result<(), String> {
    if value.contains(',') {
        return Err(format!(
            "bastion `{value}` is a chain of jump hosts; fleetctl hops through one"
        ));
    }
    let j = validate::jump(value)?;
    if out.jump.is_some() && out.jump != j {
        return Err("two different bastions".into());
    }
    out.jump = j;
    Ok(())
}

fn option(out: &mut SshArgs, text: &str) -> Result<(), String> {
    let (key, value) = text
        .split_once('=')
        .or_else(|| text.split_once(' '))
        .map(|(k, v)| (k.trim(), v.trim()))
        .ok_or_else(|| format!("-o `{text}` has no value"))?;
    match key.to_ascii_lowercase().as_str() {
        "proxyjump" => jump(out, value),
        "proxycommand" => jump(out, &proxy_command(value)?),
        "stricthostkeychecking" => {
            out.host_key_checking = Some(match value.to_ascii_lowercase().as_str() {
                "yes" => HostKeyChecking::Strict,
                "accept-new" => HostKeyChecking::AcceptNew,
                "no" | "off" => HostKeyChecking::Off,
                other => {
                    return Err(format!(
                        "StrictHostKeyChecking={other}: fleetctl knows yes, accept-new and no"
                    ));
                }
            });
            Ok(())
        }
        "userknownhostsfile" => {
            if value.split_whitespace().count() != 1 {
                return Err(format!(
                    "UserKnownHostsFile=`{value}` names more than one file; name one"
                ));
            }
            out.known_hosts = Some(value.to_string());
            Ok(())
        }
        // Ansible's own defaults (ControlMaster/ControlPersist) are about
        // reusing connections, which fleetctl does by itself.
        "controlmaster"
        | "controlpersist"
        | "controlpath"
        | "serveraliveinterval"
        | "serveralivecountmax"
        | "connecttimeout" => Ok(()),
        other => Err(format!(
            "-o {other} is not an option fleetctl honours; put it in ~/.ssh/config \
             if fleetctl supports it there (docs/ssh.md), or remove it"
        )),
    }
}

/// The one ProxyCommand fleetctl can do itself: `ssh -W %h:%p` through a
/// bastion, which is what a ProxyJump is. Any other command would have to
/// run on the laptop, from a file fleetctl does not own.
fn proxy_command(value: &str) -> Result<String, String> {
    let words = split(value)?;
    let refuse = || {
        format!(
            "ProxyCommand `{value}` is a command fleetctl would have to run on this machine; \
             it runs only `ssh -W %h:%p [-q] [-p PORT] [-l USER] [USER@]HOST`: \
             write ProxyJump=USER@HOST:PORT instead"
        )
    };
    let mut it = words.iter().map(String::as_str);
    if it.next() != Some("ssh") {
        return Err(refuse());
    }
    let (mut forward, mut port, mut user, mut host) = (false, None, None, None);
    while let Some(w) = it.next() {
        match w {
            "-W" => forward = it.next() == Some("%h:%p"),
            "-q" => {}
            "-p" => port = it.next(),
            "-l" => user = it.next(),
            w if !w.starts_with('-') && host.is_none() => host = Some(w),
            _ => return Err(refuse()),
        }
    }
    let host = match (forward, host) {
        (true, Some(h)) => h,
        _ => return Err(refuse()),
    };
    let mut jump = String::new();
    if let Some(u) = user {
        jump.push_str(u);
        jump.push('@');
    }
    jump.push_str(host);
    if let Some(p) = port {
        jump.push(':');
        jump.push_str(p);
    }
    Ok(jump)
}

/// Words as Ansible splits them (Python's `shlex.split`): whitespace
/// separates, single quotes keep everything, double quotes keep all but
/// `\"` and `\\`, a backslash outside quotes escapes the next character.
fn split(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if let Some(w) = word.take() {
                    words.push(w);
                }
            }
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err("an unclosed single quote".into()),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\')) => w.push(c),
                            Some(c) => {
                                w.push('\\');
                                w.push(c);
                            }
                            None => return Err("an unclosed double quote".into()),
                        },
                        Some(c) => w.push(c),
                        None => return Err("an unclosed double quote".into()),
                    }
                }
            }
            '\\' => {
                let w = word.get_or_insert_with(String::new);
                match chars.next() {
                    Some(c) => w.push(c),
                    None => return Err("a backslash at the end".into()),
                }
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    if let Some(w) = word {
        words.push(w);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dash_j_and_proxyjump_are_the_bastion() {
        let a = parse("-J ops@bastion.example:2222").unwrap();
        let j = a.jump.unwrap();
        assert_eq!(j.user.as_deref(), Some("ops"));
        assert_eq!(j.host, "bastion.example");
        assert_eq!(j.port, Some(2222));
        let b = parse("-o ProxyJump=ops@bastion.example:2222").unwrap();
        assert_eq!(b.jump.unwrap().host, "bastion.example");
    }

    #[test]
    fn the_usual_proxycommand_is_read_as_a_jump() {
        let a = parse(r#"-o ProxyCommand="ssh -W %h:%p -q -p 2200 core@bastion""#).unwrap();
        let j = a.jump.unwrap();
        assert_eq!(
            (j.user.as_deref(), j.host.as_str(), j.port),
            (Some("core"), "bastion", Some(2200))
        );
    }

    #[test]
    fn any_other_proxycommand_is_refused_naming_the_fix() {
        let e = parse("-o ProxyCommand='nc -x proxy:1080 %h %p'").unwrap_err();
        assert!(e.contains("ProxyJump="), "{e}");
        let e = parse("-o ProxyCommand='ssh -W %h:%p bastion; touch /tmp/x'").unwrap_err();
        assert!(e.contains("would have to run on this machine"), "{e}");
    }

    #[test]
    fn host_key_options_map_to_fleetctls() {
        let a = parse("-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null").unwrap();
        assert_eq!(a.host_key_checking, Some(HostKeyChecking::Off));
        assert_eq!(a.known_hosts.as_deref(), Some("/dev/null"));
    }

    #[test]
    fn unknown_options_and_words_are_named() {
        let e = parse("-o ForwardAgent=yes").unwrap_err();
        assert!(
            e.contains("ForwardAgent") || e.contains("forwardagent"),
            "{e}"
        );
        let e = parse("-A").unwrap_err();
        assert!(e.contains("`-A`"), "{e}");
        assert!(parse("-J a,b").unwrap_err().contains("chain"));
        assert!(parse("-o 'unclosed").is_err());
    }

    #[test]
    fn ansibles_connection_reuse_defaults_are_accepted() {
        let a = parse("-o ControlMaster=auto -o ControlPersist=60s").unwrap();
        assert_eq!(a, SshArgs::default());
    }
}
