//! Provisioning: writes a node's "disk" (its overlay upper layers) before its
//! first boot, the way Ignition would on a real Flatcar node: users and SSH,
//! os-release, the kubernetes sysext images and symlink, the sysupdate
//! configs, admin.conf on control planes, and the emulated tools. Everything
//! here runs while the node is down: overlayfs does not promise to notice
//! changes made to an upper layer under a mounted overlay.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, chown, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::accounts::{self, AccountFile, Displaced};
use crate::image::{self, Cache};
use crate::kubelet_files;
use crate::layout::{FleetDir, HOST_KEY, OVERLAID, SSHD_CONFIG, TOOL_LINKS};
use crate::scenario::{NodeSpec, Pin, Scenario};
use crate::state::{OS_UPDATE_FILE, OsUpdate};
use crate::version::{Minor, Version};

/// Flatcar's admin user.
pub const CORE_UID: u32 = accounts::CORE_ID;
/// Where sysupdate keeps kubernetes images on a node.
pub const IMAGES_DIR: &str = "/opt/extensions/kubernetes";
/// The symlink systemd-sysext merges at boot.
pub const CURRENT_SYMLINK: &str = "/etc/extensions/kubernetes.raw";
pub const SYSUPDATE_DIR: &str = "/etc/sysupdate.kubernetes.d";

/// Everything about one node the supervisor decided (address, keys).
#[derive(Debug, Clone)]
pub struct NodePlan {
    pub spec: NodeSpec,
    pub address: std::net::Ipv4Addr,
    pub port: u16,
}

/// One node's upper layers, seen from the host.
pub struct Disk<'a> {
    pub fleet: &'a FleetDir,
    pub node: &'a str,
}

impl Disk<'_> {
    /// The host path of `node_path` in this node's upper layer.
    pub fn path(&self, node_path: &str) -> Result<PathBuf> {
        self.fleet
            .in_upper(self.node, node_path)
            .with_context(|| format!("{node_path} is not on an overlaid directory of the node"))
    }

    /// Creates `node_path` and its parents in the upper layer. A directory
    /// that exists on the host gets the host's mode and owner, because the
    /// upper directory's attributes are what the node sees.
    pub fn dir(&self, node_path: &str) -> Result<PathBuf> {
        let mut node_prefix = PathBuf::from("/");
        for part in Path::new(node_path).components().skip(1) {
            node_prefix.push(part);
            let text = node_prefix.to_string_lossy().to_string();
            let upper = self.path(&text)?;
            if upper.is_dir() {
                continue;
            }
            fs::create_dir(&upper).with_context(|| format!("creating {}", upper.display()))?;
            let (mode, uid, gid) = match fs::metadata(&node_prefix) {
                Ok(m) if m.is_dir() => (m.mode() & 0o7777, m.uid(), m.gid()),
                _ => (0o755, 0, 0),
            };
            set_attrs(&upper, mode, uid, gid)?;
        }
        self.path(node_path)
    }

    /// Writes a file (creating parents) with the given mode and owner.
    pub fn file(
        &self,
        node_path: &str,
        content: &[u8],
        mode: u32,
        owner: (u32, u32),
    ) -> Result<()> {
        if let Some(parent) = Path::new(node_path).parent() {
            self.dir(&parent.to_string_lossy())?;
        }
        let path = self.path(node_path)?;
        fs::write(&path, content).with_context(|| format!("writing {}", path.display()))?;
        set_attrs(&path, mode, owner.0, owner.1)
    }

    /// Hard-links `source` (a host file on the same file system) at
    /// `node_path`, replacing what was there: how a node gets the fleet's
    /// binaries without a copy each.
    pub fn hard_link(&self, node_path: &str, source: &Path) -> Result<()> {
        if let Some(parent) = Path::new(node_path).parent() {
            self.dir(&parent.to_string_lossy())?;
        }
        let path = self.path(node_path)?;
        let _ = fs::remove_file(&path);
        fs::hard_link(source, &path)
            .with_context(|| format!("linking {} to {}", path.display(), source.display()))
    }

    pub fn symlink(&self, node_path: &str, target: &str) -> Result<()> {
        if let Some(parent) = Path::new(node_path).parent() {
            self.dir(&parent.to_string_lossy())?;
        }
        let path = self.path(node_path)?;
        let _ = fs::remove_file(&path);
        symlink(target, &path).with_context(|| format!("linking {} → {target}", path.display()))
    }
}

fn set_attrs(path: &Path, mode: u32, uid: u32, gid: u32) -> Result<()> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {mode:o} {}", path.display()))?;
    chown(path, Some(uid), Some(gid))
        .with_context(|| format!("chown {uid}:{gid} {}", path.display()))
}

/// Writes the whole disk of `plan`'s node. `hub_url` goes into the
/// sysupdate configs; `authorized_key` is the operator's public key.
pub fn provision(
    fleet: &FleetDir,
    scenario: &Scenario,
    plan: &NodePlan,
    hub_url: &str,
    authorized_key: &str,
    cache: &Cache,
) -> Result<()> {
    let name = plan.spec.name.as_str();
    create_layers(fleet, name)?;
    let disk = Disk { fleet, node: name };
    write_identity(&disk, plan)?;
    write_users(&disk, authorized_key)?;
    write_sshd_config(&disk, plan)?;
    write_os(&disk, scenario, &plan.spec)?;
    write_kubernetes(&disk, scenario, plan, hub_url, cache)?;
    write_containerd(&disk, scenario, plan, hub_url, cache)?;
    link_tools(&disk, &fleet.binary())?;
    link_clients(&disk, fleet)?;
    crate::etcd_pod::install(&disk, fleet)?;
    hide_host_tools(&disk)?;
    write_os_containerd(&disk)?;
    write_clock(&disk, plan.spec.clock_offset)?;
    write_mount_points(&disk)
}

/// A node whose clock is `offset` seconds off: `/usr/local/bin/date`, first
/// in root's `PATH` (`/usr/local/sbin:/usr/local/bin:…`, sshd's and sudo's
/// `secure_path`), shows every reading that far from the host's clock, to
/// the nanosecond, in whatever format it is asked. A `-d` or `-s` of the
/// caller's own is refused by GNU date beside this one (its options to
/// name a date are mutually exclusive); nothing fleetctl runs uses them.
fn write_clock(disk: &Disk, offset: i64) -> Result<()> {
    if offset == 0 {
        return Ok(());
    }
    let script = format!(
        "#!/bin/sh\n\
         # fleetsim: this node's clock is {offset} s off (the scenario's clock_offset).\n\
         t=$(/usr/bin/date +%s.%N)\n\
         exec /usr/bin/date -d \"@$(( ${{t%.*}} + ({offset}) )).${{t#*.}}\" \"$@\"\n"
    );
    disk.file("/usr/local/bin/date", script.as_bytes(), 0o755, (0, 0))
}

/// `upper/<top>` and `work/<top>` for every overlaid directory; each upper
/// root mirrors the host directory's mode and owner (it becomes the merged
/// directory's).
fn create_layers(fleet: &FleetDir, name: &str) -> Result<()> {
    for top in OVERLAID {
        let upper = fleet.upper(name, top);
        let work = fleet.work(name, top);
        for d in [&upper, &work] {
            fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        }
        let host = fs::metadata(format!("/{top}")).with_context(|| format!("reading /{top}"))?;
        set_attrs(&upper, host.mode() & 0o7777, host.uid(), host.gid())?;
    }
    Ok(())
}

fn random_uuid() -> Result<String> {
    let text = fs::read_to_string("/proc/sys/kernel/random/uuid")
        .context("reading /proc/sys/kernel/random/uuid")?;
    Ok(text.trim().to_string())
}

/// A fresh random boot id, formatted like the kernel's.
pub fn new_boot_id() -> Result<String> {
    random_uuid()
}

fn write_identity(disk: &Disk, plan: &NodePlan) -> Result<()> {
    let name = &plan.spec.name;
    disk.file(
        "/etc/hostname",
        format!("{name}\n").as_bytes(),
        0o644,
        (0, 0),
    )?;
    let hosts = format!(
        "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n{}\t{name}\n",
        plan.address
    );
    disk.file("/etc/hosts", hosts.as_bytes(), 0o644, (0, 0))?;
    let machine_id = random_uuid()?.replace('-', "");
    disk.file(
        "/etc/machine-id",
        format!("{machine_id}\n").as_bytes(),
        0o444,
        (0, 0),
    )
}

/// root and core (uid 500, passwordless sudo), both with the operator's key.
fn write_users(disk: &Disk, authorized_key: &str) -> Result<()> {
    let core = (CORE_UID, CORE_UID);
    write_accounts(disk)?;
    unlock_root(disk)?;
    disk.file(
        "/etc/sudoers.d/core",
        b"core ALL=(ALL) NOPASSWD: ALL\n",
        0o440,
        (0, 0),
    )?;
    write_root_dotfiles(disk)?;
    let key = format!("{}\n", authorized_key.trim());
    disk.dir("/root/.ssh")?;
    set_attrs(&disk.path("/root/.ssh")?, 0o700, 0, 0)?;
    disk.file("/root/.ssh/authorized_keys", key.as_bytes(), 0o600, (0, 0))?;
    disk.dir("/home/core/.ssh")?;
    set_attrs(&disk.path("/home/core")?, 0o755, core.0, core.1)?;
    set_attrs(&disk.path("/home/core/.ssh")?, 0o700, core.0, core.1)?;
    disk.file(
        "/home/core/.ssh/authorized_keys",
        key.as_bytes(),
        0o600,
        core,
    )
}

/// The host's account files with Flatcar's `core` (uid/gid 500) in place of
/// whatever the host calls core or gives id 500; each keeps the host file's
/// mode and owner.
fn write_accounts(disk: &Disk) -> Result<()> {
    let read =
        |path: &str| fs::read_to_string(path).with_context(|| format!("reading the host's {path}"));
    let displaced = Displaced::from_host(&read("/etc/passwd")?, &read("/etc/group")?);
    for file in AccountFile::ALL {
        let path = file.path();
        let meta = fs::metadata(path).with_context(|| format!("reading the host's {path}"))?;
        let text = accounts::node_file(file, &read(path)?, &displaced);
        disk.file(
            path,
            text.as_bytes(),
            meta.mode() & 0o7777,
            (meta.uid(), meta.gid()),
        )?;
    }
    Ok(())
}

/// root's own shell startup files, as a Flatcar node has them: /root is
/// overlaid on the host's, and the host's dotfiles would otherwise run on
/// every SSH command (a `pyenv init` there takes a lock under /root/.pyenv
/// that a reboot can leave behind, stalling every later root shell of the
/// node for a minute).
fn write_root_dotfiles(disk: &Disk) -> Result<()> {
    disk.file(
        "/root/.bashrc",
        b"# fleetsim: the node's own; non-interactive shells stop here.\n[[ $- != *i* ]] && return\n",
        0o644,
        (0, 0),
    )?;
    disk.file(
        "/root/.bash_profile",
        b"# fleetsim: the node's own.\n[[ -f ~/.bashrc ]] && . ~/.bashrc\n",
        0o644,
        (0, 0),
    )?;
    disk.file(
        "/root/.profile",
        b"# fleetsim: the node's own.\n",
        0o644,
        (0, 0),
    )
}

/// With `UsePAM no`, sshd refuses even key logins to an account whose
/// password field starts with `!` (locked); `*` means "no password" instead.
fn unlock_root(disk: &Disk) -> Result<()> {
    let path = disk.path("/etc/shadow")?;
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let fixed: Vec<String> = text
        .lines()
        .map(|l| match l.strip_prefix("root:!") {
            Some(rest) => {
                let after = rest.split_once(':').map(|(_, r)| r).unwrap_or("");
                format!("root:*:{after}")
            }
            None => l.to_string(),
        })
        .collect();
    fs::write(&path, fixed.join("\n") + "\n").with_context(|| format!("writing {}", path.display()))
}

fn write_sshd_config(disk: &Disk, plan: &NodePlan) -> Result<()> {
    let config = format!(
        "# fleetsim node {name}: written by the supervisor, see docs/simulator.md\n\
         ListenAddress {addr}:{port}\n\
         HostKey {HOST_KEY}\n\
         PermitRootLogin prohibit-password\n\
         PubkeyAuthentication yes\n\
         PasswordAuthentication no\n\
         KbdInteractiveAuthentication no\n\
         UsePAM no\n\
         PidFile /run/sshd.pid\n\
         AuthorizedKeysFile .ssh/authorized_keys\n\
         # MaxStartups and MaxSessions stay OpenSSH's defaults (10:30:100, 10), as on real nodes.\n\
         AcceptEnv LANG LC_*\n\
         Subsystem sftp internal-sftp\n",
        name = plan.spec.name,
        addr = plan.address,
        port = plan.port,
    );
    disk.file(SSHD_CONFIG, config.as_bytes(), 0o644, (0, 0))
}

/// Generates the node's host key into its disk; returns the public key line.
pub fn host_key(disk: &Disk) -> Result<String> {
    disk.dir("/etc/ssh")?;
    let path = disk.path(HOST_KEY)?;
    generate_key(&path, &format!("root@{}", disk.node))
}

/// A key pair via `ssh-keygen` (the operator's and the hosts'); returns the
/// public line `ssh-ed25519 AAAA… comment`.
pub fn generate_key(path: &Path, comment: &str) -> Result<String> {
    let _ = fs::remove_file(path);
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
        .arg(path)
        .output()
        .context("running ssh-keygen (apt-get install openssh-client)")?;
    if !out.status.success() {
        bail!(
            "ssh-keygen for {} failed: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let mut pub_path = path.as_os_str().to_owned();
    pub_path.push(".pub");
    let text = fs::read_to_string(&pub_path)
        .with_context(|| format!("reading {}", Path::new(&pub_path).display()))?;
    Ok(text.trim().to_string())
}

/// `/etc/os-release` the Flatcar way: a symlink to `/usr/lib/os-release`,
/// which belongs to the (A/B-updated) /usr partition.
pub fn os_release(version: &str) -> String {
    format!(
        "NAME=\"Flatcar Container Linux by Kinvolk\"\n\
         ID=flatcar\n\
         ID_LIKE=coreos\n\
         VERSION={version}\n\
         VERSION_ID={version}\n\
         SYSEXT_LEVEL=1.0\n\
         PRETTY_NAME=\"Flatcar Container Linux by Kinvolk {version}\"\n\
         ANSI_COLOR=\"38;5;75\"\n\
         HOME_URL=\"https://flatcar.org/\"\n\
         BUG_REPORT_URL=\"https://issues.flatcar.org\"\n\
         FLATCAR_BOARD=\"amd64-usr\"\n\
         CPE_NAME=\"cpe:2.3:o:flatcar-linux:flatcar_linux:{version}:*:*:*:*:*:*:*\"\n"
    )
}

pub fn write_os_release(disk: &Disk, version: &str) -> Result<()> {
    disk.file(
        "/usr/lib/os-release",
        os_release(version).as_bytes(),
        0o644,
        (0, 0),
    )
}

fn write_os(disk: &Disk, scenario: &Scenario, spec: &NodeSpec) -> Result<()> {
    write_os_release(disk, &scenario.os(spec))?;
    disk.symlink("/etc/os-release", "../usr/lib/os-release")?;
    if let Some(next) = &spec.os_update {
        let record = OsUpdate {
            new_version: next.clone(),
        };
        let json = serde_json::to_vec_pretty(&record)?;
        disk.file(OS_UPDATE_FILE, &json, 0o644, (0, 0))?;
    }
    Ok(())
}

/// A sysupdate transfer config in sysext-bakery's exact format.
pub fn sysupdate_conf(hub_url: &str, match_pattern: &str) -> String {
    format!(
        "[Transfer]\nVerify=false\n\n[Source]\nType=url-file\nPath={hub_url}/kubernetes/\nMatchPattern={match_pattern}\n\n[Target]\nInstancesMax=3\nType=regular-file\nPath=/opt/extensions/kubernetes\nCurrentSymlink=/etc/extensions/kubernetes.raw\n"
    )
}

pub fn pinned_pattern(minor: &Minor) -> String {
    format!("kubernetes-{minor}.@v-%a.raw")
}

pub const FLOATING_PATTERN: &str = "kubernetes-@v-%a.raw";

fn write_kubernetes(
    disk: &Disk,
    scenario: &Scenario,
    plan: &NodePlan,
    hub_url: &str,
    cache: &Cache,
) -> Result<()> {
    let spec = &plan.spec;
    let running = scenario.running(spec)?;
    let staged = scenario.staged(spec)?;
    disk.dir(IMAGES_DIR)?;
    for v in std::iter::once(running)
        .chain(staged)
        .chain(scenario.images(spec)?)
    {
        let path = disk.path(&format!("{IMAGES_DIR}/{}", v.image_name()))?;
        image::copy_to(&cache.image(&v)?, &path)?;
        set_attrs(&path, 0o644, 0, 0)?;
    }
    let current = staged.unwrap_or(running);
    // Provisioning (Butane) writes an absolute link; sysupdate later writes relative ones.
    disk.symlink(
        CURRENT_SYMLINK,
        &format!("{IMAGES_DIR}/{}", current.image_name()),
    )?;
    let pattern = match spec.pin {
        Pin::Pinned => pinned_pattern(&running.minor_series()),
        Pin::Floating => FLOATING_PATTERN.to_string(),
    };
    let conf = sysupdate_conf(hub_url, &pattern);
    disk.file(
        &format!("{SYSUPDATE_DIR}/kubernetes.conf"),
        conf.as_bytes(),
        0o644,
        (0, 0),
    )?;
    for m in &spec.extra_configs {
        let minor = Minor::parse(m)?;
        let conf = sysupdate_conf(hub_url, &pinned_pattern(&minor));
        let path = format!("{SYSUPDATE_DIR}/kubernetes-{minor}.conf");
        disk.file(&path, conf.as_bytes(), 0o644, (0, 0))?;
    }
    // admin.conf and kubelet.conf come with the cluster's PKI
    // (`crate::api::pki`), written by the supervisor once it is issued.
    write_kubelet_files(
        disk,
        &running,
        scenario.kubelet_config.as_deref().unwrap_or_default(),
    )
}

/// The containerd sysext as the bakery's Butane snippet installs it: the
/// image, the link, the OS's own containerd masked, and the sysupdate
/// config (pinned to the minor, or the bakery's floating one).
fn write_containerd(
    disk: &Disk,
    scenario: &Scenario,
    plan: &NodePlan,
    hub_url: &str,
    cache: &Cache,
) -> Result<()> {
    use crate::containerd as c;
    let Some(version) = scenario.containerd(&plan.spec) else {
        return Ok(());
    };
    disk.dir(c::IMAGES_DIR)?;
    let path = disk.path(&format!("{}/{}", c::IMAGES_DIR, c::image_name(&version)))?;
    image::copy_to(&cache.containerd(&version)?, &path)?;
    set_attrs(&path, 0o644, 0, 0)?;
    disk.symlink(
        c::CURRENT_SYMLINK,
        &format!("{}/{}", c::IMAGES_DIR, c::image_name(&version)),
    )?;
    disk.symlink(c::OS_EXTENSION, "/dev/null")?;
    let pattern = match plan.spec.containerd_pin {
        Pin::Pinned => c::pinned_pattern(&version),
        Pin::Floating => c::FLOATING_PATTERN.to_string(),
    };
    let conf = c::sysupdate_conf(hub_url, &pattern);
    disk.file(
        &format!("{}/containerd.conf", c::SYSUPDATE_DIR),
        conf.as_bytes(),
        0o644,
        (0, 0),
    )
}

/// What `kubeadm init`/`join` left for the kubelet, by the kubeadm of the
/// node's first kubelet: up to v1.34 the flags carry
/// `--pod-infra-container-image`.
/// From v1.34 also instance-config.yaml, laid over the cluster's
/// kubelet-config ConfigMap (with the scenario's `kubelet_config` lines).
fn write_kubelet_files(disk: &Disk, kubeadm: &Version, cluster_extra: &str) -> Result<()> {
    let flags = kubelet_files::initial_flags(kubeadm);
    disk.file(kubelet_files::FLAGS_FILE, flags.as_bytes(), 0o644, (0, 0))?;
    let instance = kubelet_files::initial_instance(kubeadm);
    if let Some(text) = &instance {
        disk.file(kubelet_files::INSTANCE_FILE, text.as_bytes(), 0o644, (0, 0))?;
    }
    let config = kubelet_files::written_config(
        &kubeadm.to_string(),
        &kubelet_files::cluster_config(cluster_extra),
        instance.as_deref(),
    );
    disk.file(kubelet_files::CONFIG_FILE, config.as_bytes(), 0o644, (0, 0))
}

/// Hard links to the fleet's copy of fleetsim under every tool's real path:
/// one inode for all nodes, so 50 nodes cost no disk and start instantly.
fn link_tools(disk: &Disk, binary: &Path) -> Result<()> {
    for rel in TOOL_LINKS {
        disk.hard_link(&format!("/{rel}"), binary)?;
    }
    Ok(())
}

/// The real kubectl binaries the fleet gathered, linked into the node at
/// `clients::NODE_DIR`.
fn link_clients(disk: &Disk, fleet: &FleetDir) -> Result<()> {
    for (_, src) in crate::clients::listed(&fleet.clients()) {
        let Some(name) = src.file_name() else {
            continue;
        };
        let node_path = format!("{}/{}", crate::clients::NODE_DIR, name.to_string_lossy());
        disk.hard_link(&node_path, &src)?;
    }
    Ok(())
}

/// Hides a host's own kubelet, kubeadm, kubectl, containerd, etcd or
/// etcdctl from the node's /usr (an overlayfs whiteout: a 0/0 character
/// device in the upper layer), so that they exist only through the merged
/// sysext or the etcd pod, as on Flatcar.
fn hide_host_tools(disk: &Disk) -> Result<()> {
    let others = ["containerd", "etcd", "etcdctl"];
    for tool in crate::image::IMAGE_TOOLS.iter().chain(&others) {
        let host = format!("/usr/bin/{tool}");
        if fs::symlink_metadata(&host).is_err() {
            continue;
        }
        disk.dir("/usr/bin")?;
        let path = disk.path(&host)?;
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
            .with_context(|| format!("{} contains a NUL byte", path.display()))?;
        // SAFETY: a valid NUL-terminated path; mknod has no other preconditions.
        if unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR, 0) } != 0 {
            bail!(
                "creating a whiteout for {host} at {}: {}",
                path.display(),
                std::io::Error::last_os_error()
            );
        }
    }
    Ok(())
}

/// Flatcar's own containerd in the base `/usr` (in place of any whiteout
/// hiding the host's): what a node runs unless a containerd sysext is
/// merged above it.
fn write_os_containerd(disk: &Disk) -> Result<()> {
    let path = disk.path("/usr/bin/containerd")?;
    let _ = fs::remove_file(&path);
    disk.file(
        "/usr/bin/containerd",
        crate::containerd::os_wrapper().as_bytes(),
        0o755,
        (0, 0),
    )
}

/// Empty mount points for the bind mounts node-init makes, created here so
/// node-init never writes to a layer whose directory it is about to cover.
fn write_mount_points(disk: &Disk) -> Result<()> {
    disk.dir(crate::state::CLUSTER_DIR)?;
    disk.file(crate::state::NODE_FILE, b"", 0o644, (0, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_config_is_byte_exact() {
        let conf = sysupdate_conf(
            "http://127.0.0.1:8080",
            &pinned_pattern(&Minor::parse("v1.37").unwrap()),
        );
        assert_eq!(
            conf,
            "[Transfer]\nVerify=false\n\n[Source]\nType=url-file\nPath=http://127.0.0.1:8080/kubernetes/\nMatchPattern=kubernetes-v1.37.@v-%a.raw\n\n[Target]\nInstancesMax=3\nType=regular-file\nPath=/opt/extensions/kubernetes\nCurrentSymlink=/etc/extensions/kubernetes.raw\n"
        );
    }

    #[test]
    fn os_release_names_flatcar_and_version() {
        let text = os_release("4081.3.0");
        assert!(text.contains("\nID=flatcar\n"));
        assert!(text.contains("\nVERSION=4081.3.0\n"));
        assert!(text.contains("\nVERSION_ID=4081.3.0\n"));
    }
}
