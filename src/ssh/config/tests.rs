use super::*;
use crate::inventory::{HostKeyChecking, Jump, Role, SshDefaults};
use crate::version::Minor;

pub(crate) fn env() -> LocalEnv {
    LocalEnv {
        user: Some("op".into()),
        home: Some("/home/op".into()),
        default_identities: vec!["/home/op/.ssh/id_ed25519".into()],
    }
}

pub(crate) fn node(name: &str, address: &str) -> Node {
    Node {
        name: name.into(),
        address: address.into(),
        role: Role::Worker,
        port: None,
        user: None,
        identity_file: None,
        zone: None,
    }
}

pub(crate) fn inventory(nodes: Vec<Node>) -> Inventory {
    Inventory {
        path: "/fleet/inventory.yaml".into(),
        kubernetes_version: "v1.37".parse::<Minor>().unwrap(),
        containerd_version: None,
        hub: crate::inventory::DEFAULT_HUB.into(),
        ssh: SshDefaults {
            user: None,
            port: None,
            identity_file: None,
            known_hosts: "/home/op/.ssh/known_hosts".into(),
            host_key_checking: HostKeyChecking::Strict,
            jump: None,
        },
        health_checks: vec![],
        kured: None,
        window: None,
        provenance: Vec::new(),
        nodes,
    }
}

fn config(text: &str) -> ConfigText {
    ConfigText::new(text.to_string(), Path::new("/home/op")).unwrap()
}

const CONFIG: &str = "\
Host w1
  HostName 10.1.0.11
  User cfguser
  Port 2201
  IdentityFile ~/.ssh/fleet_key
Host *.lan
  HostName %h.example.com
  ProxyJump bastion
Host bastion
  HostName 192.0.2.1
  User jumper
  Port 2022
Host w9
  ProxyJump ops@hop1:2200,hop2
Host hop2
  User h2
Host loop1
  ProxyJump loop2
Host loop2
  ProxyJump loop1
Host direct
  ProxyJump none
Host *
  ServerAliveInterval 30
  SomeUnknownOption yes
";

#[test]
fn defaults_without_any_config() {
    let inv = inventory(vec![node("w1", "10.0.0.1")]);
    let t = resolve_with(&inv, &inv.nodes[0], None, &env()).unwrap();
    assert_eq!(
        t,
        Target {
            node: "w1".into(),
            host: "10.0.0.1".into(),
            port: 22,
            user: "op".into(),
            identity_files: vec!["/home/op/.ssh/id_ed25519".into()],
            jump: None,
            ..Target::default()
        }
    );
}

#[test]
fn ssh_config_fills_what_the_inventory_leaves_out() {
    let inv = inventory(vec![node("worker-1", "w1")]);
    let cfg = config(CONFIG);
    let t = resolve_with(&inv, &inv.nodes[0], Some(&cfg), &env()).unwrap();
    assert_eq!(t.node, "worker-1");
    assert_eq!(t.host, "10.1.0.11", "HostName rewrites the address");
    assert_eq!(t.user, "cfguser");
    assert_eq!(t.port, 2201);
    assert_eq!(
        t.identity_files,
        vec![PathBuf::from("/home/op/.ssh/fleet_key")]
    );
    assert_eq!(t.jump, None);
}

#[test]
fn inventory_defaults_beat_ssh_config_and_node_values_beat_both() {
    let mut inv = inventory(vec![node("a", "w1"), node("b", "w1")]);
    inv.ssh.user = Some("core".into());
    inv.ssh.port = Some(2000);
    inv.ssh.identity_file = Some("~/.ssh/inv_key".into());
    inv.nodes[1].user = Some("root".into());
    inv.nodes[1].port = Some(3000);
    inv.nodes[1].identity_file = Some("/keys/b".into());
    let cfg = config(CONFIG);

    let a = resolve_with(&inv, &inv.nodes[0], Some(&cfg), &env()).unwrap();
    assert_eq!((a.user.as_str(), a.port), ("core", 2000));
    assert_eq!(
        a.identity_files,
        vec![PathBuf::from("/home/op/.ssh/inv_key")]
    );
    assert_eq!(a.host, "10.1.0.11", "HostName still applies");

    let b = resolve_with(&inv, &inv.nodes[1], Some(&cfg), &env()).unwrap();
    assert_eq!((b.user.as_str(), b.port), ("root", 3000));
    assert_eq!(b.identity_files, vec![PathBuf::from("/keys/b")]);
}

#[test]
fn proxy_jump_from_config_resolves_the_bastion_through_config_too() {
    let inv = inventory(vec![node("cp-1", "cp1.lan")]);
    let cfg = config(CONFIG);
    let t = resolve_with(&inv, &inv.nodes[0], Some(&cfg), &env()).unwrap();
    assert_eq!(t.host, "cp1.lan.example.com", "%h expanded");
    let jump = t.jump.expect("ProxyJump bastion");
    assert_eq!(jump.host, "192.0.2.1");
    assert_eq!(jump.user, "jumper");
    assert_eq!(jump.port, 2022);
    assert_eq!(jump.identity_files, env().default_identities);
    assert_eq!(jump.jump, None);
}

#[test]
fn proxy_jump_chain_goes_through_hops_in_order() {
    let inv = inventory(vec![node("w9", "w9")]);
    let cfg = config(CONFIG);
    let t = resolve_with(&inv, &inv.nodes[0], Some(&cfg), &env()).unwrap();
    // Connect order: hop1, then hop2, then the node; the target's jump is the last hop.
    let last = t.jump.unwrap();
    assert_eq!(
        (last.host.as_str(), last.user.as_str(), last.port),
        ("hop2", "h2", 22)
    );
    let first = last.jump.unwrap();
    assert_eq!(
        (first.host.as_str(), first.user.as_str(), first.port),
        ("hop1", "ops", 2200)
    );
    assert!(first.jump.is_none());
}

#[test]
fn proxy_jump_loop_is_an_error_and_none_disables() {
    let inv = inventory(vec![node("x", "loop1"), node("y", "direct")]);
    let cfg = config(CONFIG);
    let err = resolve_with(&inv, &inv.nodes[0], Some(&cfg), &env()).unwrap_err();
    assert!(format!("{err:#}").contains("loop"), "{err:#}");
    let t = resolve_with(&inv, &inv.nodes[1], Some(&cfg), &env()).unwrap();
    assert!(t.jump.is_none());
}

#[test]
fn inventory_jump_wins_and_uses_the_inventory_key() {
    let mut inv = inventory(vec![node("cp-1", "cp1.lan")]);
    inv.ssh.user = Some("core".into());
    inv.ssh.identity_file = Some("/keys/fleet".into());
    inv.ssh.jump = Some(Jump {
        user: None,
        host: "gw".into(),
        port: Some(2222),
    });
    let cfg = config(CONFIG);
    let t = resolve_with(&inv, &inv.nodes[0], Some(&cfg), &env()).unwrap();
    let jump = t.jump.unwrap();
    assert_eq!(jump.host, "gw");
    assert_eq!(jump.port, 2222);
    assert_eq!(
        jump.user, "op",
        "the nodes' `core` does not apply to the bastion"
    );
    assert_eq!(jump.identity_files, vec![PathBuf::from("/keys/fleet")]);
    assert_eq!(jump.node, "jump host gw");
}

#[test]
fn no_user_anywhere_is_a_clear_error() {
    let inv = inventory(vec![node("w1", "10.0.0.1")]);
    let env = LocalEnv {
        user: None,
        ..env()
    };
    let err = resolve_with(&inv, &inv.nodes[0], None, &env).unwrap_err();
    assert!(
        err.to_string().starts_with("w1: no user to log in as"),
        "{err}"
    );
}

#[test]
fn jump_specs() {
    let j = |s: &str| parse_jump_spec(s).unwrap();
    assert_eq!(
        j("gw"),
        Jump {
            user: None,
            host: "gw".into(),
            port: None
        }
    );
    assert_eq!(
        j("ops@gw:2200"),
        Jump {
            user: Some("ops".into()),
            host: "gw".into(),
            port: Some(2200)
        }
    );
    assert_eq!(
        j("ssh://ops@[2001:db8::1]:22"),
        Jump {
            user: Some("ops".into()),
            host: "2001:db8::1".into(),
            port: Some(22)
        }
    );
    assert!(parse_jump_spec("gw:notaport").is_err());
    assert!(parse_jump_spec("@gw").is_err());
    assert!(parse_jump_spec("[::1").is_err());
}

#[test]
fn config_file_is_read_from_home_and_missing_is_fine() {
    let home = tempfile::tempdir().unwrap();
    assert!(load_ssh_config(Some(home.path())).unwrap().is_none());
    std::fs::create_dir(home.path().join(".ssh")).unwrap();
    std::fs::write(
        home.path().join(".ssh/config"),
        "Host w1\n  User fromfile\n  IdentityFile ~/k\n",
    )
    .unwrap();
    let cfg = load_ssh_config(Some(home.path())).unwrap().unwrap();
    let params = cfg.query("w1", None, None).unwrap();
    assert_eq!(params.user.as_deref(), Some("fromfile"));
    assert_eq!(params.identity_file, Some(vec![home.path().join("k")]));
}

const OPTIONS: &str = "\
Host aliased
  HostName 10.2.0.1
  Port 2222
  HostKeyAlias CP-1.Fleet
  IdentitiesOnly yes
  HashKnownHosts yes
  UserKnownHostsFile ~/.ssh/fleet_hosts /keys/%r@%h:%p-%k-%n-%u-%d-%%
  GlobalKnownHostsFile /etc/fleet/known_hosts
Host proxied
  HostName 10.2.0.2
  User core
  ProxyCommand ssh -W %h:%p ops@gw.example -o 'Foo=%n' %%
Host proxied-none
  ProxyCommand none
Host nofiles
  UserKnownHostsFile none
  GlobalKnownHostsFile none
Host both
  ProxyJump gw
  ProxyCommand nc %h %p
Host badbool
  IdentitiesOnly maybe
Host badtoken
  ProxyCommand nc %h %C
Host envvar
  UserKnownHostsFile ${HOME}/kh
Host cmd
  KnownHostsCommand /usr/bin/lookup %H
Host fdpass
  ProxyCommand nc %h %p
  ProxyUseFdpass yes
Host gw
  ProxyCommand connect-gw %h %p
Host matched
  User m
Match host other
  User someone-else
";

fn resolve_in(config_text: &str, address: &str) -> anyhow::Result<Target> {
    let inv = inventory(vec![node("n", address)]);
    let cfg = config(config_text);
    resolve_with(&inv, &inv.nodes[0], Some(&cfg), &env())
}

#[test]
fn host_key_options_identities_only_and_their_tokens() {
    let t = resolve_in(OPTIONS, "aliased").unwrap();
    assert!(t.identities_only);
    assert_eq!(
        t.host_keys,
        HostKeyLookup {
            alias: Some("cp-1.fleet".into()),
            user_files: Some(vec![
                "/home/op/.ssh/fleet_hosts".into(),
                "/keys/op@10.2.0.1:2222-cp-1.fleet-aliased-op-/home/op-%".into(),
            ]),
            global_files: Some(vec!["/etc/fleet/known_hosts".into()]),
            hash: true,
        }
    );
    assert_eq!(t.proxy_command, None);

    let t = resolve_in(OPTIONS, "nofiles").unwrap();
    assert_eq!(t.host_keys.user_files, Some(vec![]));
    assert_eq!(t.host_keys.global_files, Some(vec![]));
    assert!(!t.identities_only && !t.host_keys.hash);

    let plain = resolve_in(OPTIONS, "elsewhere").unwrap();
    assert_eq!(plain.host_keys, HostKeyLookup::default());
}

#[test]
fn a_known_hosts_file_named_by_the_inventory_wins_over_user_known_hosts_file() {
    let mut inv = inventory(vec![node("n", "aliased")]);
    inv.ssh.known_hosts = "/fleet/known_hosts".into();
    let cfg = config(OPTIONS);
    let t = resolve_with(&inv, &inv.nodes[0], Some(&cfg), &env()).unwrap();
    assert_eq!(t.host_keys.user_files, None);
    // The global files and the alias still come from ~/.ssh/config.
    assert_eq!(
        t.host_keys.global_files,
        Some(vec!["/etc/fleet/known_hosts".into()])
    );
    assert_eq!(t.host_keys.alias.as_deref(), Some("cp-1.fleet"));
}

#[test]
fn proxy_command_tokens_are_expanded_and_none_disables_it() {
    let t = resolve_in(OPTIONS, "proxied").unwrap();
    assert_eq!(
        t.proxy_command.as_deref(),
        Some("ssh -W 10.2.0.2:22 ops@gw.example -o 'Foo=proxied' %")
    );
    assert_eq!(t.jump, None);
    assert_eq!(
        resolve_in(OPTIONS, "proxied-none").unwrap().proxy_command,
        None
    );
}

#[test]
fn an_inventory_jump_replaces_proxy_command_but_a_bastion_keeps_its_own() {
    let mut inv = inventory(vec![node("n", "proxied")]);
    inv.ssh.jump = Some(Jump {
        user: None,
        host: "gw".into(),
        port: None,
    });
    let cfg = config(OPTIONS);
    let t = resolve_with(&inv, &inv.nodes[0], Some(&cfg), &env()).unwrap();
    assert_eq!(t.proxy_command, None, "ssh -J replaces ProxyCommand");
    let gw = t.jump.unwrap();
    assert_eq!(gw.proxy_command.as_deref(), Some("connect-gw gw 22"));
}

#[test]
fn options_that_cannot_be_honoured_are_refused_naming_option_and_host() {
    let cases = [
        (
            "both",
            "n: ~/.ssh/config sets both ProxyJump and ProxyCommand for host both",
        ),
        (
            "badbool",
            "IdentitiesOnly maybe for host badbool, which is not yes or no",
        ),
        (
            "badtoken",
            "ProxyCommand nc %h %C for host badtoken, it uses %C",
        ),
        (
            "envvar",
            "UserKnownHostsFile ${HOME}/kh for host envvar, it uses an environment variable",
        ),
        ("cmd", "KnownHostsCommand /usr/bin/lookup %H for host cmd"),
        ("fdpass", "ProxyUseFdpass yes for host fdpass"),
    ];
    // A Match block is evaluated for the host (config/matching.rs), no
    // longer refused: it applies to `other`, not to `matched`.
    assert_eq!(resolve_in(OPTIONS, "matched").unwrap().user, "m");
    assert_eq!(resolve_in(OPTIONS, "other").unwrap().user, "someone-else");
    for (host, expected) in cases {
        let err = resolve_in(OPTIONS, host).unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains(expected), "{host}: {msg}");
        assert!(msg.starts_with("n: "), "{host}: {msg}");
    }
}

#[test]
fn a_proxy_command_never_lets_sh_read_an_address() {
    // The inventory refuses such an address; resolution quotes it anyway.
    let cfg = "Host *\n  ProxyCommand nc %h %p\n";
    let t = resolve_in(cfg, "$(touch /tmp/pwned)").unwrap();
    assert_eq!(
        t.proxy_command.as_deref(),
        Some("nc '$(touch /tmp/pwned)' 22")
    );
    let cfg = "Host *\n  ProxyCommand sh -c 'nc %h %p'\n";
    let err = resolve_in(cfg, "a;b").unwrap_err();
    assert!(
        format!("{err:#}").contains("inside its own quotes"),
        "{err:#}"
    );
}
