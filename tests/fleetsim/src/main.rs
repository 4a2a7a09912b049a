//! The fleetsim binary. Installed into a node under the names of the tools
//! it emulates (kubectl, kubeadm, systemctl, …), it dispatches on argv[0].

fn main() {
    let mut argv = std::env::args_os().map(|a| a.to_string_lossy().into_owned());
    let argv0 = argv.next().unwrap_or_default();
    let name = std::path::Path::new(&argv0)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let args: Vec<String> = argv.collect();
    if let Some(code) = fleetsim::tools::dispatch(&name, &args) {
        std::process::exit(code);
    }
}
