//! The commands of the upgrade itself, run on the node being upgraded:
//! download an image without staging it, run the downloaded image's kubeadm
//! from a read-only mount, pin a sysupdate config, stage an image, reboot,
//! check the kubelet, remove old images. Each is a plain string (plus stdin
//! data where noted) so `apply --dry-run` prints exactly what `apply` runs.

use super::word;
use crate::ssh::quote;

/// Where systemd-sysupdate lives on Flatcar (not on PATH).
pub const SYSUPDATE: &str = "/usr/lib/systemd/systemd-sysupdate";

/// Written after a node's kubeadm upgrade step succeeded, with the version
/// whose kubeadm ran: the evidence a rerun reads (through the facts script)
/// so it neither repeats the step nor stages a node without it.
pub const KUBEADM_STEP_MARKER: &str = "/var/lib/fleetctl/kubeadm-step";

/// Exit statuses of [`kubeadm_step`]'s own checks (kubeadm itself exits 1).
pub mod kubeadm_exit {
    /// The image to run is not in `/opt/extensions/<name>/`.
    pub const NO_IMAGE: u32 = 90;
    /// The image's kubeadm does not report the version its name promises.
    pub const WRONG_VERSION: u32 = 91;
    /// The image could not be mounted (no loop device, not a filesystem).
    pub const MOUNT: u32 = 92;
    /// kubeadm succeeded but the marker could not be written.
    pub const MARKER: u32 = 93;
    /// The image's sha256 is not the one the plan recorded from the hub.
    pub const CHECKSUM: u32 = 94;
}

/// Reads a URL from the node (the node reaches the hub; the laptop may not).
/// curl on Flatcar; wget as a fallback for minimal images.
pub fn fetch(url: &str) -> String {
    let u = quote(url);
    format!(
        "if command -v curl >/dev/null 2>&1; then curl -fsSL --max-time 20 {u}; \
         else wget -q -T 20 -O - {u}; fi"
    )
}

/// `/opt/extensions/<component>`: where sysupdate keeps the images.
pub fn images_dir(component: &str) -> String {
    format!("/opt/extensions/{component}")
}

/// Checks one image against the hub's sha256: prints `ok` when it matches,
/// else the image's own `sha256sum` line (`<hex>  <path>`) for the message;
/// exits non-zero only when the image cannot be read. `sha256sum -c
/// --strict` refuses a check line that is not well formed, so a digest that
/// is not 64 hex characters never counts as checked.
pub fn image_sha256(component: &str, version: &str, sha256: &str) -> String {
    let img = quote(&format!(
        "{}/{}",
        images_dir(component),
        image_file(component, version)
    ));
    format!(
        "[ -r {img} ] || {{ echo \"fleetctl: \"{img}\" cannot be read\" >&2; exit 1; }}; \
         if printf '%s  %s\\n' {sum} {img} | sha256sum -c --strict --quiet - >/dev/null 2>&1; \
         then echo ok; else sha256sum {img}; fi",
        sum = word(sha256),
    )
}

/// Removes one image (one that failed its checksum).
pub fn remove_image(component: &str, version: &str) -> String {
    format!(
        "rm -f -- {}",
        quote(&format!(
            "{}/{}",
            images_dir(component),
            image_file(component, version)
        ))
    )
}

/// Lists the component's images, one file name a line.
pub fn list_images(component: &str) -> String {
    format!("ls -1 {}/", quote(&images_dir(component)))
}

/// The file sysext-bakery names an image, as sysupdate stores it:
/// `kubernetes-v1.35.3-x86-64.raw`, but `containerd-2.1.4-x86-64.raw`
/// (the bakery's containerd recipe drops the `v` of containerd's tags; see
/// `Component::series`).
pub fn image_file(component: &str, version: &str) -> String {
    let version = match component {
        "kubernetes" => version,
        _ => version.trim_start_matches('v'),
    };
    format!("{component}-{version}-x86-64.raw")
}

/// `/etc/extensions/<component>.raw`: what the next boot merges.
pub fn current_symlink(component: &str) -> String {
    format!("/etc/extensions/{component}.raw")
}

/// Writes the config given on stdin to `path` atomically (temporary file in
/// the same directory, then rename), keeps the previous file as
/// `<path>.fleetctl-backup`, renames every path in `disable` to
/// `<path>.fleetctl-disabled` (sysupdate only reads `*.conf` and
/// `*.transfer`), and prints the file back so the caller can compare it
/// byte for byte.
pub fn pin_config(path: &str, disable: &[String]) -> String {
    let p = quote(path);
    let mut script = format!(
        "set -e; dir=$(dirname {p}); mkdir -p \"$dir\"; tmp=\"$dir/.fleetctl-$$.tmp\"; \
         cat > \"$tmp\"; chmod 0644 \"$tmp\"; \
         if [ -f {p} ]; then cp -p {p} {bak}; fi; mv -f \"$tmp\" {p}; ",
        bak = quote(&format!("{path}.fleetctl-backup"))
    );
    for d in disable {
        script.push_str(&format!(
            "if [ -e {f} ]; then mv -f {f} {off}; fi; ",
            f = quote(d),
            off = quote(&format!("{d}.fleetctl-disabled"))
        ));
    }
    script.push_str(&format!("cat {p}"));
    script
}

/// Downloads the newest image the transfer definition on stdin allows, with
/// `systemd-sysupdate --definitions=` pointing at a private directory under
/// /run, then lists the component's images. The definition has no
/// `CurrentSymlink=`, so nothing is staged and nothing arms a reboot.
pub fn download(component: &str) -> String {
    format!(
        "set -e; dir=$(mktemp -d /run/fleetctl-download.XXXXXX); trap 'rm -rf \"$dir\"' EXIT; \
         cat > \"$dir/{c}.conf\"; {SYSUPDATE} --definitions=\"$dir\" update; {list}",
        c = word(component),
        list = list_images(component),
    )
}

/// Where a detached step keeps its output (`<id>.log`) and exit status
/// (`<id>.exit`), on the node: they outlive the SSH session and fleetctl.
pub const STEPS_DIR: &str = "/var/lib/fleetctl/steps";

/// The transient unit a detached step runs as.
pub fn step_unit(id: &str) -> String {
    format!("fleetctl-{id}.service")
}

/// Starts `script` as the transient unit `fleetctl-<id>` with systemd-run:
/// a child of PID 1, not of the SSH session, so neither a dropped
/// connection (sshd's SIGHUP to the session) nor fleetctl exiting can kill
/// it halfway. `--collect` unloads the unit when it ends, failed or not,
/// so the name can be used again; the result lives in [`STEPS_DIR`]. An
/// earlier run's result files are removed first; starting fails (as
/// systemd-run does) if the unit is still running.
pub fn start_detached(id: &str, what: &str, script: &str) -> String {
    let log = quote(&format!("{STEPS_DIR}/{id}.log"));
    let exit = quote(&format!("{STEPS_DIR}/{id}.exit"));
    let exit_new = quote(&format!("{STEPS_DIR}/{id}.exit.new"));
    // A subshell, so the script's own `exit` (and its EXIT trap) end it,
    // not the wrapper that records how it ended.
    let wrapped =
        format!("( {script} ) > {log} 2>&1; echo $? > {exit_new} && mv -f {exit_new} {exit}");
    format!(
        "mkdir -p {dir} && rm -f {log} {exit} && systemd-run --unit={unit} --description={desc} \
         --collect --quiet -- sh -c {body}",
        dir = quote(STEPS_DIR),
        // With its suffix: a name like `…-v1.35.3` would otherwise end in
        // what systemd reads as an (unknown) unit type.
        unit = word(&step_unit(id)),
        desc = quote(&format!("fleetctl: {what}")),
        body = quote(&wrapped),
    )
}

/// Where a detached step is: `running <state>`, or `exit <status>` followed
/// by its output, or `none` when it neither runs nor left a result. With
/// `wait_tenths` > 0 it first waits on the node, up to that many tenths of
/// a second, while the unit runs and has no result yet: the answer comes
/// within 0.1 s of the step's end, in one round trip instead of a poll
/// from the laptop every few hundred milliseconds.
pub fn poll_detached(id: &str, wait_tenths: u32) -> String {
    let log = quote(&format!("{STEPS_DIR}/{id}.log"));
    let exit = quote(&format!("{STEPS_DIR}/{id}.exit"));
    let unit = word(&step_unit(id));
    format!(
        "i=0; while [ ! -f {exit} ] && [ $i -lt {wait_tenths} ]; do \
         case $(systemctl is-active {unit} 2>/dev/null) in active|activating|deactivating) ;; *) break ;; esac; \
         sleep 0.1; i=$((i+1)); done; \
         s=$(systemctl is-active {unit} 2>/dev/null); \
         if [ -f {exit} ]; then echo \"exit $(cat {exit})\"; cat {log} 2>/dev/null; \
         elif [ \"$s\" = active ] || [ \"$s\" = activating ] || [ \"$s\" = deactivating ]; then echo \"running $s\"; \
         else echo none; fi",
    )
}

/// One run of a downloaded image's kubeadm, for [`kubeadm_step`].
#[derive(Debug, Clone)]
pub struct KubeadmStep<'a> {
    /// The image file (`/opt/extensions/kubernetes/kubernetes-v1.35.3-x86-64.raw`).
    pub image: &'a str,
    /// What the image's kubeadm must report (`v1.35.3`).
    pub version: &'a str,
    /// kubeadm's arguments (`upgrade node --skip-phases addon/kube-proxy`).
    pub args: &'a [String],
    /// Where the private mount point is made (`/run`: tmpfs, root only).
    pub run_dir: &'a str,
    /// [`KUBEADM_STEP_MARKER`].
    pub marker: &'a str,
    /// The image's sha256 from the hub's `SHA256SUMS`, checked before it is
    /// mounted; `None` when the plan has none.
    pub sha256: Option<&'a str>,
}

/// Attaches the downloaded image to a loop device read-only (`losetup
/// --read-only --find --show`, util-linux, on every Flatcar node), checks
/// the sha256 of that device, and mounts that same device read-only on a
/// private directory: what is checked is what is mounted, even if someone
/// swaps the file in between. Then checks that its kubeadm is the version
/// the image's name promises, runs it while the node's old kubelet keeps
/// running, unmounts and detaches on every path, and records the step in
/// the marker.
///
/// A loop device shows whole 512-byte sectors only (the kernel's
/// `get_size` in drivers/block/loop.c), so an image whose size is not a
/// multiple of 512 hashes differently through it and is refused;
/// mksquashfs pads images to 4 KiB by default, sysext-bakery's included.
pub fn kubeadm_step(step: &KubeadmStep) -> String {
    use kubeadm_exit::*;
    let img = quote(step.image);
    let want = word(step.version);
    let args: Vec<String> = step.args.iter().map(|a| word(a)).collect();
    let marker = quote(step.marker);
    let marker_new = quote(&format!("{}.new", step.marker));
    let marker_dir = quote(
        std::path::Path::new(step.marker)
            .parent()
            .map_or("/", |p| p.to_str().unwrap_or("/")),
    );
    let verify = match step.sha256 {
        Some(sum) => format!(
            "printf '%s  %s\\n' {sum} \"$dev\" | sha256sum -c --strict --quiet - >/dev/null 2>&1 || \
             {{ echo \"fleetctl: \"{img}\" (attached read-only as $dev) does not have the sha256 the hub \
             published (or its size is not a multiple of 512 bytes)\" >&2; exit {CHECKSUM}; }}; ",
            sum = word(sum),
        ),
        None => String::new(),
    };
    format!(
        "[ -f {img} ] || {{ echo \"fleetctl: \"{img}\" is not on the node\" >&2; exit {NO_IMAGE}; }}; \
         dev=; dir=; \
         trap '[ -n \"$dir\" ] && {{ umount \"$dir\" 2>/dev/null; rmdir \"$dir\"; }}; \
         [ -n \"$dev\" ] && losetup -d \"$dev\" 2>/dev/null' EXIT; \
         dev=$(losetup --read-only --find --show {img}) && [ -n \"$dev\" ] || \
         {{ echo \"fleetctl: could not attach \"{img}\" to a loop device\" >&2; exit {MOUNT}; }}; \
         {verify}dir=$(mktemp -d {run}/fleetctl-kubeadm.XXXXXX) || exit {MOUNT}; \
         mount -o ro \"$dev\" \"$dir\" || exit {MOUNT}; \
         v=$(\"$dir/usr/bin/kubeadm\" version -o short) || exit {WRONG_VERSION}; \
         [ \"$v\" = {want} ] || {{ echo \"fleetctl: the image's kubeadm reports $v, not \"{want} >&2; exit {WRONG_VERSION}; }}; \
         \"$dir/usr/bin/kubeadm\" {args} || exit $?; \
         mkdir -p {marker_dir} && printf '%s\\n' {want} > {marker_new} && mv -f {marker_new} {marker} || exit {MARKER}",
        run = quote(step.run_dir),
        args = args.join(" "),
    )
}

/// `kubeadm upgrade apply VERSION --skip-phases addon/kube-proxy --yes`'s
/// arguments. `--skip-phases addon/kube-proxy` every time: clusters built
/// before `proxy.disabled` was set still store `proxy: {}`, and kubeadm
/// would redeploy kube-proxy beside Cilium (upgrade apply never writes a
/// skipped phase back, and since v1.32 `upgrade node` has the addon phase too).
pub fn upgrade_apply_args(version: &str) -> Vec<String> {
    [
        "upgrade",
        "apply",
        version,
        "--skip-phases",
        crate::plan::KUBEADM_SKIP_PHASES,
        "--yes",
    ]
    .map(String::from)
    .to_vec()
}

pub fn upgrade_node_args() -> Vec<String> {
    [
        "upgrade",
        "node",
        "--skip-phases",
        crate::plan::KUBEADM_SKIP_PHASES,
    ]
    .map(String::from)
    .to_vec()
}

/// Points the component's symlink at a downloaded image, atomically (a new
/// link renamed over the old one), with the relative target sysupdate
/// itself writes, then prints where it points. This is the moment the next
/// boot changes; it never touches /run/reboot-required (fleetctl owns the
/// reboot).
pub fn stage_image(component: &str, version: &str) -> String {
    let file = image_file(component, version);
    let image = quote(&format!("{}/{file}", images_dir(component)));
    let target = quote(&format!("../../opt/extensions/{component}/{file}"));
    let link = quote(&current_symlink(component));
    let tmp = quote(&format!("/etc/extensions/.{component}.raw.fleetctl"));
    format!(
        "set -e; [ -f {image} ] || {{ echo \"fleetctl: \"{image}\" is not on the node\" >&2; exit {no}; }}; \
         mkdir -p /etc/extensions; ln -sfn {target} {tmp}; mv -fT {tmp} {link}; readlink {link}",
        no = kubeadm_exit::NO_IMAGE,
    )
}

/// Stages a component that sysupdate stages itself (containerd): the
/// component's update, then where its symlink points. Unlike the node's own
/// systemd-sysupdate.service, this does not touch /run/reboot-required.
pub fn sysupdate_stage(component: &str) -> String {
    format!(
        "set -e; {SYSUPDATE} --component={c} update; readlink {link} || true",
        c = word(component),
        link = quote(&current_symlink(component)),
    )
}

/// Where the component's symlink points now: checked right before a reboot,
/// since the node's own sysupdate timer may have moved it.
pub fn staged_target(component: &str) -> String {
    format!("readlink {}", quote(&current_symlink(component)))
}

/// Prints the kubernetes symlink's target, then the boot id: read in one
/// round trip right before a reboot.
pub fn before_reboot() -> String {
    format!("{} && {BOOT_ID}", staged_target("kubernetes"))
}

pub const BOOT_ID: &str = "cat /proc/sys/kernel/random/boot_id";

/// The gates' reachability probe: the session still runs commands.
pub const ALIVE: &str = "true";

pub const KUBELET_VERSION: &str = "kubelet --version";

/// The kubelet unit's state, then `kubelet --version`, then (only when the
/// unit is not active) the last lines of its journal for this boot, which
/// say why: one round trip per poll after a reboot.
pub const KUBELET_STATE: &str = "s=$(systemctl is-active kubelet.service 2>/dev/null); \
    printf '%s\\n' \"${s:-unknown}\"; kubelet --version 2>&1 | head -n 1; \
    if [ \"$s\" != active ]; then journalctl -u kubelet.service -b --no-pager -n 15 2>&1; fi";

/// `systemctl reboot` returns before the machine goes down; the connection
/// then drops, which the caller expects.
pub const REBOOT: &str = "systemctl reboot";

/// Removes image files of `component`, but never the one the symlink
/// resolves to, whatever the caller thought.
pub fn remove_images(component: &str, versions: &[String]) -> String {
    let files: Vec<String> = versions
        .iter()
        .map(|v| {
            quote(&format!(
                "{}/{}",
                images_dir(component),
                image_file(component, v)
            ))
        })
        .collect();
    format!(
        "keep=$(readlink -f {link}); for f in {files}; do \
         [ \"$(readlink -f \"$f\")\" = \"$keep\" ] && continue; rm -f -- \"$f\" || exit 1; done",
        link = quote(&current_symlink(component)),
        files = files.join(" "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    fn sh_env(
        script: &str,
        stdin: &str,
        path_prefix: Option<&Path>,
    ) -> (Option<i32>, String, String) {
        use std::io::Write;
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        if let Some(dir) = path_prefix {
            cmd.env(
                "PATH",
                format!(
                    "{}:{}",
                    dir.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            );
        }
        let mut child = cmd.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn sh(script: &str, stdin: &str) -> (bool, String) {
        let (code, out, _) = sh_env(script, stdin, None);
        (code == Some(0), out)
    }

    fn executable(path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_poll_waits_on_the_node_for_the_step_to_end() {
        let dir = tempfile::tempdir().unwrap();
        let steps = dir.path().join("steps");
        std::fs::create_dir(&steps).unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        // The unit is active until its result is written.
        executable(
            &bin.join("systemctl"),
            &format!(
                "#!/bin/sh\n[ -f {0}/t.exit ] && echo inactive || echo active\n",
                steps.display()
            ),
        );
        let poll = |tenths| poll_detached("t", tenths).replace(STEPS_DIR, steps.to_str().unwrap());
        let (_, out, _) = sh_env(&poll(0), "", Some(&bin));
        assert_eq!(out, "running active\n", "no waiting asked for");
        // The step ends while the poll waits: its result comes back.
        let finish = format!(
            "(sleep 0.3; echo done > {0}/t.log; echo 0 > {0}/t.exit) & {1}",
            steps.display(),
            poll(50)
        );
        let (_, out, _) = sh_env(&finish, "", Some(&bin));
        assert_eq!(out, "exit 0\ndone\n");
        // A unit that is gone with no result: no waiting, `none`.
        std::fs::remove_file(steps.join("t.exit")).unwrap();
        executable(&bin.join("systemctl"), "#!/bin/sh\necho inactive\nexit 3\n");
        let (_, out, _) = sh_env(&poll(50), "", Some(&bin));
        assert_eq!(out, "none\n");
    }

    #[test]
    fn pin_config_replaces_atomically_keeps_a_backup_and_disables_strays() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("sysupdate.kubernetes.d");
        std::fs::create_dir(&d).unwrap();
        let conf = d.join("kubernetes.conf");
        let stray = d.join("kubernetes-v1.32.conf");
        std::fs::write(&conf, "old\n").unwrap();
        std::fs::write(&stray, "stray\n").unwrap();
        let script = pin_config(
            conf.to_str().unwrap(),
            &[stray.to_string_lossy().into_owned()],
        );
        let (ok, echoed) = sh(&script, "new config\n");
        assert!(ok);
        assert_eq!(echoed, "new config\n");
        assert_eq!(std::fs::read_to_string(&conf).unwrap(), "new config\n");
        assert_eq!(
            std::fs::read_to_string(d.join("kubernetes.conf.fleetctl-backup")).unwrap(),
            "old\n"
        );
        assert!(!stray.exists());
        assert!(d.join("kubernetes-v1.32.conf.fleetctl-disabled").exists());
        let left: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 3, "no temporary file left behind: {left:?}");
    }

    #[test]
    fn pin_config_creates_the_directory_and_quotes_paths() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("it's here/kubernetes.conf");
        let (ok, echoed) = sh(&pin_config(conf.to_str().unwrap(), &[]), "x\n");
        assert!(ok);
        assert_eq!(echoed, "x\n");
    }

    #[test]
    fn kubeadm_arguments_always_skip_kube_proxy() {
        assert_eq!(
            upgrade_apply_args("v1.35.3").join(" "),
            "upgrade apply v1.35.3 --skip-phases addon/kube-proxy --yes"
        );
        assert_eq!(
            upgrade_node_args().join(" "),
            "upgrade node --skip-phases addon/kube-proxy"
        );
    }

    /// A fake image tree, and `mount`/`umount` on PATH that copy it into
    /// the mount point and empty it again (and log both), so the step's
    /// script runs for real without root or loop devices.
    struct FakeNode {
        dir: tempfile::TempDir,
        sha256: Option<String>,
    }

    impl FakeNode {
        fn new(kubeadm_version: &str, kubeadm_exit: i32) -> FakeNode {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path();
            let tree = root.join("tree/usr/bin");
            std::fs::create_dir_all(&tree).unwrap();
            executable(
                &tree.join("kubeadm"),
                &format!(
                    "#!/bin/sh\nif [ \"$1\" = version ]; then echo {kubeadm_version}; exit 0; fi\n\
                     echo \"$@\" >> \"{log}\"\nexit {kubeadm_exit}\n",
                    log = root.join("kubeadm.log").display()
                ),
            );
            std::fs::create_dir_all(root.join("bin")).unwrap();
            std::fs::create_dir_all(root.join("run")).unwrap();
            std::fs::create_dir_all(root.join("dev")).unwrap();
            // A loop device is a snapshot of the file's blocks taken when
            // it is attached: later changes to the path do not reach it.
            executable(
                &root.join("bin/losetup"),
                &format!(
                    "#!/bin/sh\necho \"losetup $*\" >> \"{log}\"\n\
                     if [ \"$1\" = -d ]; then rm -f \"$2\"; exit 0; fi\n\
                     [ \"$1 $2 $3\" = \"--read-only --find --show\" ] || exit 1\n\
                     cp \"$4\" \"{dev}\" && echo \"{dev}\"\n",
                    log = root.join("mount.log").display(),
                    dev = root.join("dev/loop7").display()
                ),
            );
            executable(
                &root.join("bin/mount"),
                &format!(
                    "#!/bin/sh\necho \"mount $*\" >> \"{log}\"\n[ \"$1 $2\" = \"-o ro\" ] || exit 32\n\
                     cat \"$3\" >> \"{mounted}\"\ncp -r \"{tree}/.\" \"$4\"\n",
                    log = root.join("mount.log").display(),
                    mounted = root.join("mounted").display(),
                    tree = root.join("tree").display()
                ),
            );
            executable(
                &root.join("bin/umount"),
                &format!(
                    "#!/bin/sh\necho \"umount $*\" >> \"{log}\"\nrm -rf \"$1\"/usr\n",
                    log = root.join("mount.log").display()
                ),
            );
            std::fs::write(root.join("image.raw"), "squashfs").unwrap();
            FakeNode { dir, sha256: None }
        }

        fn path(&self, rel: &str) -> String {
            self.dir.path().join(rel).to_string_lossy().into_owned()
        }

        fn run(&self, version: &str, args: &[String]) -> (Option<i32>, String) {
            let image = self.path("image.raw");
            let run_dir = self.path("run");
            let marker = self.path("var/lib/fleetctl/kubeadm-step");
            let script = kubeadm_step(&KubeadmStep {
                image: &image,
                version,
                args,
                run_dir: &run_dir,
                marker: &marker,
                sha256: self.sha256.as_deref(),
            });
            let (code, _, err) = sh_env(&script, "", Some(&self.dir.path().join("bin")));
            (code, err)
        }

        fn read(&self, rel: &str) -> String {
            std::fs::read_to_string(self.dir.path().join(rel)).unwrap_or_default()
        }

        fn run_dir_is_empty(&self) -> bool {
            std::fs::read_dir(self.dir.path().join("run"))
                .unwrap()
                .next()
                .is_none()
        }
    }

    #[test]
    fn the_kubeadm_step_runs_the_images_kubeadm_unmounts_and_leaves_its_marker() {
        let node = FakeNode::new("v1.35.3", 0);
        let (code, err) = node.run("v1.35.3", &upgrade_node_args());
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(
            node.read("kubeadm.log"),
            "upgrade node --skip-phases addon/kube-proxy\n"
        );
        assert_eq!(node.read("var/lib/fleetctl/kubeadm-step"), "v1.35.3\n");
        let mounts = node.read("mount.log");
        let dev = node.path("dev/loop7");
        let image = node.path("image.raw");
        assert!(
            mounts.starts_with(&format!(
                "losetup --read-only --find --show {image}\nmount -o ro {dev} "
            )),
            "{mounts}"
        );
        assert!(mounts.contains("\numount "), "unmounted: {mounts}");
        assert!(
            mounts.ends_with(&format!("losetup -d {dev}\n")),
            "detached last: {mounts}"
        );
        assert!(node.run_dir_is_empty(), "the private directory is removed");
    }

    #[test]
    fn a_kubeadm_of_another_version_is_never_run() {
        let node = FakeNode::new("v1.34.2", 0);
        let (code, err) = node.run("v1.35.3", &upgrade_apply_args("v1.35.3"));
        assert_eq!(code, Some(kubeadm_exit::WRONG_VERSION as i32));
        assert!(err.contains("reports v1.34.2, not v1.35.3"), "{err}");
        assert_eq!(node.read("kubeadm.log"), "", "kubeadm never ran");
        assert_eq!(node.read("var/lib/fleetctl/kubeadm-step"), "");
        assert!(node.read("mount.log").contains("umount"));
        assert!(node.run_dir_is_empty());
    }

    #[test]
    fn a_failed_kubeadm_keeps_its_status_leaves_no_marker_and_still_unmounts() {
        let node = FakeNode::new("v1.35.3", 1);
        let (code, _) = node.run("v1.35.3", &upgrade_node_args());
        assert_eq!(code, Some(1));
        assert_eq!(node.read("var/lib/fleetctl/kubeadm-step"), "");
        assert!(node.read("mount.log").contains("umount"));
        assert!(node.run_dir_is_empty());
    }

    #[test]
    fn an_image_that_is_not_what_the_hub_published_is_never_mounted() {
        use sha2::{Digest, Sha256};
        let good = format!("{:x}", Sha256::digest(b"squashfs"));
        let mut node = FakeNode::new("v1.35.3", 0);
        node.sha256 = Some(good);
        assert_eq!(node.run("v1.35.3", &upgrade_node_args()).0, Some(0));
        let mut node = FakeNode::new("v1.35.3", 0);
        node.sha256 = Some("0".repeat(64));
        let (code, err) = node.run("v1.35.3", &upgrade_node_args());
        assert_eq!(code, Some(kubeadm_exit::CHECKSUM as i32));
        assert!(
            err.contains("does not have the sha256 the hub published"),
            "{err}"
        );
        let log = node.read("mount.log");
        assert!(!log.contains("\nmount "), "never mounted: {log}");
        assert!(log.contains("\nlosetup -d "), "detached: {log}");
        assert_eq!(node.read("kubeadm.log"), "");
    }

    #[test]
    fn the_image_checked_is_the_image_mounted_even_if_the_file_is_swapped() {
        use sha2::{Digest, Sha256};
        let mut node = FakeNode::new("v1.35.3", 0);
        node.sha256 = Some(format!("{:x}", Sha256::digest(b"squashfs")));
        // Whoever can write /opt/extensions swaps the file right after it
        // was hashed: a sha256sum that replaces the image once it is done.
        let swap = node.path("bin/sha256sum");
        executable(
            Path::new(&swap),
            &format!(
                "#!/bin/sh\n/usr/bin/sha256sum \"$@\"; rc=$?\n\
                 printf evil > \"{image}\"\nexit $rc\n",
                image = node.path("image.raw")
            ),
        );
        let (code, err) = node.run("v1.35.3", &upgrade_node_args());
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(node.read("image.raw"), "evil", "the file was swapped");
        assert_eq!(
            node.read("mounted"),
            "squashfs",
            "what was mounted is what was checked"
        );
    }

    #[test]
    fn a_missing_image_or_a_failed_mount_are_told_apart() {
        let node = FakeNode::new("v1.35.3", 0);
        std::fs::remove_file(node.dir.path().join("image.raw")).unwrap();
        assert_eq!(
            node.run("v1.35.3", &upgrade_node_args()).0,
            Some(kubeadm_exit::NO_IMAGE as i32)
        );
        let node = FakeNode::new("v1.35.3", 0);
        executable(&node.dir.path().join("bin/mount"), "#!/bin/sh\nexit 32\n");
        assert_eq!(
            node.run("v1.35.3", &upgrade_node_args()).0,
            Some(kubeadm_exit::MOUNT as i32)
        );
        assert!(node.run_dir_is_empty());
    }

    #[test]
    fn download_and_stage_commands_name_the_real_paths() {
        let d = download("kubernetes");
        assert!(
            d.contains("/usr/lib/systemd/systemd-sysupdate --definitions=\"$dir\" update"),
            "{d}"
        );
        assert!(
            !d.contains("--component"),
            "--definitions and --component cannot be combined"
        );
        assert!(d.contains("ls -1 '/opt/extensions/kubernetes'/"), "{d}");
        let s = stage_image("kubernetes", "v1.35.3");
        assert!(
            s.contains("ln -sfn '../../opt/extensions/kubernetes/kubernetes-v1.35.3-x86-64.raw'"),
            "{s}"
        );
        assert!(
            s.contains(
                "mv -fT '/etc/extensions/.kubernetes.raw.fleetctl' '/etc/extensions/kubernetes.raw'"
            ),
            "{s}"
        );
        assert!(!s.contains("reboot-required"), "fleetctl never arms Kured");
        assert!(!sysupdate_stage("containerd").contains("reboot-required"));
    }

    #[test]
    fn remove_images_never_removes_what_the_symlink_points_at() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // The script's absolute paths are rewritten to the temp root here.
        let images = root.join("opt/extensions/kubernetes");
        std::fs::create_dir_all(&images).unwrap();
        std::fs::create_dir_all(root.join("etc/extensions")).unwrap();
        for v in ["v1.33.4", "v1.34.2", "v1.35.3"] {
            std::fs::write(images.join(image_file("kubernetes", v)), v).unwrap();
        }
        std::os::unix::fs::symlink(
            images.join(image_file("kubernetes", "v1.34.2")),
            root.join("etc/extensions/kubernetes.raw"),
        )
        .unwrap();
        let script = remove_images("kubernetes", &["v1.33.4".into(), "v1.34.2".into()])
            .replace("'/opt/", &format!("'{}/opt/", root.display()))
            .replace("'/etc/", &format!("'{}/etc/", root.display()));
        let (ok, _) = sh(&script, "");
        assert!(ok);
        let mut left: Vec<String> = std::fs::read_dir(&images)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "kubernetes-v1.34.2-x86-64.raw",
                "kubernetes-v1.35.3-x86-64.raw"
            ]
        );
    }
}
