//! The commands of the upgrade itself, run on the node being upgraded:
//! download an image without staging it, run the downloaded image's kubeadm
//! from a read-only mount, pin a sysupdate config, stage an image, reboot,
//! check the kubelet, remove old images. Each is a plain string (plus stdin
//! data where noted) so `apply --dry-run` prints exactly what `apply` runs.

use super::word;
use crate::shell::quote;

/// kubeadm's `--skip-phases` value on every upgrade call: a cluster built
/// before `proxy.disabled` keeps `proxy: {}` in its kubeadm-config, and
/// without the flag kubeadm redeploys kube-proxy beside Cilium. Since v1.32
/// `upgrade node` has addon phases too, so it needs the flag as well.
pub const KUBEADM_SKIP_PHASES: &str = "addon/kube-proxy";

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
///
/// From an `https://` hub nothing falls back to plain HTTP (issue 38):
/// curl follows a redirect to any protocol it supports unless told
/// otherwise (curl(1) `--proto-redir`; `-L`), so it is given `--proto =https
/// --proto-redir =https` and refuses an `http://` Location with "Protocol
/// "http" not supported or disabled". GNU wget has no such switch for a
/// single download (`--https-only` applies to recursive mode), so it
/// follows no redirect at all (`--max-redirect=0`). An `http://` hub is
/// insecure already and runs only with `--allow-insecure-hub`
/// ([`crate::plan`]'s `refuse_insecure_hub`). What is read here is the
/// `SHA256SUMS` every image is checked against before it is staged, so the
/// images sysupdate downloads are held to an https answer as well.
pub fn fetch(url: &str) -> String {
    let u = quote(url);
    let (curl, wget) = if url.starts_with("https://") {
        ("--proto =https --proto-redir =https ", "--max-redirect=0 ")
    } else {
        ("", "")
    };
    format!(
        "if command -v curl >/dev/null 2>&1; then curl -fsSL {curl}--max-time 20 {u}; \
         else wget -q {wget}-T 20 -O - {u}; fi"
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
///
/// A unit still running from an earlier run is not started again: the
/// first line says `resumed`, else `started`. Then, in the same round trip,
/// the step is waited for as [`poll_detached`] waits (`wait_tenths`): a
/// step that ends within that wait (most drains) costs one command, not
/// three (is it running? start; its result).
pub fn start_detached(id: &str, what: &str, script: &str, wait_tenths: u32) -> String {
    let unit = word(&step_unit(id));
    format!(
        "case $(systemctl is-active {unit} 2>/dev/null) in active|activating|deactivating) echo resumed ;; \
         *) {{ {start}; }} || exit $?; echo started ;; esac; {poll}",
        start = start_unit(id, what, script),
        poll = poll_detached(id, wait_tenths),
    )
}

/// The systemd-run that starts the step's unit (see [`start_detached`]).
fn start_unit(id: &str, what: &str, script: &str) -> String {
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
/// from the laptop every few hundred milliseconds. The result file is
/// looked for every tenth; whether the unit still runs (a unit killed
/// before it wrote a result) is asked of systemd once a second, not ten
/// times: each `systemctl` is a process and a call to PID 1, and a
/// kubeadm step waits for minutes.
pub fn poll_detached(id: &str, wait_tenths: u32) -> String {
    let log = quote(&format!("{STEPS_DIR}/{id}.log"));
    let exit = quote(&format!("{STEPS_DIR}/{id}.exit"));
    let unit = word(&step_unit(id));
    format!(
        "i=0; while [ ! -f {exit} ] && [ $i -lt {wait_tenths} ]; do \
         if [ $((i % 10)) -eq 0 ]; then \
         case $(systemctl is-active {unit} 2>/dev/null) in active|activating|deactivating) ;; *) break ;; esac; fi; \
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
    /// mounted: always (a step without one cannot be written).
    pub sha256: &'a str,
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
    let verify = format!(
        "printf '%s  %s\\n' {sum} \"$dev\" | sha256sum -c --strict --quiet - >/dev/null 2>&1 || \
         {{ echo \"fleetctl: \"{img}\" (attached read-only as $dev) does not have the sha256 the hub \
         published (or its size is not a multiple of 512 bytes)\" >&2; exit {CHECKSUM}; }}; ",
        sum = word(step.sha256),
    );
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

/// What kubeadm's `--ignore-preflight-errors` takes for the cgroup v1
/// refusal of its SystemVerification preflight (kubernetes/kubernetes#134744;
/// the check's name in cmd/kubeadm/app/preflight/checks.go).
pub const SYSTEM_VERIFICATION: &str = "SystemVerification";

/// `--ignore-preflight-errors=A,B` for `ignored` preflight checks; nothing
/// when there are none.
fn ignore_preflight(ignored: &[&str]) -> Option<String> {
    (!ignored.is_empty()).then(|| format!("--ignore-preflight-errors={}", ignored.join(",")))
}

/// `kubeadm upgrade apply VERSION --skip-phases addon/kube-proxy --yes`'s
/// arguments, with `--ignore-preflight-errors=…` when `ignored` names any. `--skip-phases addon/kube-proxy` every time: clusters built
/// before `proxy.disabled` was set still store `proxy: {}`, and kubeadm
/// would redeploy kube-proxy beside Cilium (upgrade apply never writes a
/// skipped phase back, and since v1.32 `upgrade node` has the addon phase too).
pub fn upgrade_apply_args(version: &str, ignored: &[&str]) -> Vec<String> {
    let mut args = [
        "upgrade",
        "apply",
        version,
        "--skip-phases",
        KUBEADM_SKIP_PHASES,
        "--yes",
    ]
    .map(String::from)
    .to_vec();
    args.extend(ignore_preflight(ignored));
    args
}

/// `kubeadm upgrade node --skip-phases addon/kube-proxy`, likewise.
pub fn upgrade_node_args(ignored: &[&str]) -> Vec<String> {
    let mut args = ["upgrade", "node", "--skip-phases", KUBEADM_SKIP_PHASES]
        .map(String::from)
        .to_vec();
    args.extend(ignore_preflight(ignored));
    args
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

/// Stages `version` of a component sysupdate stages (containerd): its
/// symlink pointed at the image when the node already has it (a rollback to
/// the kept image: sysupdate never goes back to an older version it has,
/// src/sysupdate/sysupdate.c `context_make_online` picks the newest), else
/// sysupdate's update.
pub fn sysupdate_stage_version(component: &str, version: &str) -> String {
    let image = quote(&format!(
        "{}/{}",
        images_dir(component),
        image_file(component, version)
    ));
    format!(
        "if [ -f {image} ]; then {}; else {}; fi",
        stage_image(component, version),
        sysupdate_stage(component)
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

/// kubelet.service as systemd sees it, one `Key=value` a line, in the
/// order systemd prints them (its D-Bus order, not the order of `-p`):
/// `MainPID`, `NRestarts` (systemd ≥ 235: src/core/service.c counts each
/// automatic restart, `service_enter_restart`, and resets the counter only
/// on a start by hand or `reset-failed`, so it never drops during a boot),
/// `ActiveState` (`activating` while it waits `RestartSec` to restart,
/// service.c's `state_translation_table`: `SERVICE_AUTO_RESTART`).
pub const KUBELET_UNIT: &str =
    "systemctl show -p ActiveState -p MainPID -p NRestarts kubelet.service";

/// The kubelet unit's journal for this boot, its last lines.
pub const KUBELET_JOURNAL: &str = "journalctl -u kubelet.service -b --no-pager -n 15 2>&1";

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
mod detached_poll_tests;
#[cfg(test)]
mod tests;
