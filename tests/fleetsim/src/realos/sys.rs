//! The few system calls realos-init makes, with errors that name what failed.

use std::ffi::CString;
use std::path::Path;

use anyhow::{Context, Result, bail};

pub fn cstr(s: &str) -> Result<CString> {
    CString::new(s).with_context(|| format!("{s:?} contains a NUL byte"))
}

fn path_cstr(p: &Path) -> Result<CString> {
    cstr(&p.to_string_lossy())
}

pub fn mount(
    src: &str,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> Result<()> {
    let c_src = cstr(src)?;
    let c_target = path_cstr(target)?;
    let c_type = fstype.map(cstr).transpose()?;
    let c_data = data.map(cstr).transpose()?;
    // SAFETY: all pointers are valid NUL-terminated strings or null.
    let rc = unsafe {
        libc::mount(
            c_src.as_ptr(),
            c_target.as_ptr(),
            c_type.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
            flags,
            c_data
                .as_ref()
                .map_or(std::ptr::null(), |c| c.as_ptr().cast()),
        )
    };
    if rc != 0 {
        bail!(
            "mount {src} on {} ({}): {}",
            target.display(),
            fstype.unwrap_or("bind/remount"),
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// A bind mount (recursive with `rec`), remounted read-only with `read_only`.
pub fn bind(src: &Path, target: &Path, rec: bool, read_only: bool) -> Result<()> {
    let s = src.to_string_lossy();
    let flags = libc::MS_BIND | if rec { libc::MS_REC } else { 0 };
    mount(&s, target, None, flags, None)?;
    if read_only {
        let flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY;
        mount(&s, target, None, flags, None)?;
    }
    Ok(())
}

/// `pivot_root(new, new)` then a lazy unmount of the old root stacked under
/// it: the trick that needs no `put_old` directory in a read-only root.
pub fn pivot_root(new_root: &Path) -> Result<()> {
    std::env::set_current_dir(new_root).with_context(|| format!("chdir {}", new_root.display()))?;
    let dot = cstr(".")?;
    // SAFETY: both arguments are the valid string ".".
    let rc = unsafe { libc::syscall(libc::SYS_pivot_root, dot.as_ptr(), dot.as_ptr()) };
    if rc != 0 {
        bail!(
            "pivot_root into {}: {}",
            new_root.display(),
            std::io::Error::last_os_error()
        );
    }
    // SAFETY: "." is a valid string; MNT_DETACH unmounts the old root lazily.
    if unsafe { libc::umount2(dot.as_ptr(), libc::MNT_DETACH) } != 0 {
        bail!(
            "detaching the old root: {}",
            std::io::Error::last_os_error()
        );
    }
    std::env::set_current_dir("/").context("chdir /")
}

pub fn set_hostname(name: &str) -> Result<()> {
    // SAFETY: pointer and length describe `name`'s bytes.
    let rc = unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) };
    if rc != 0 {
        bail!("sethostname({name}): {}", std::io::Error::last_os_error());
    }
    Ok(())
}
