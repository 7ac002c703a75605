//! What this machine offers to confine a run, probed once per process: the kernel's Landlock
//! ABI, whether a child can have a namespace of its own (tried in a throwaway child, which is
//! how an AppArmor or sysctl refusal of user namespaces shows), and whether it can be sealed.

use super::child::{self, Seal, Setup};
use harn_core::work::containment::{NamespaceKind, Offer, Unavailable};
use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// What this machine offers, probed once per process.
pub fn offer() -> Offer {
    static OFFER: OnceLock<Offer> = OnceLock::new();
    OFFER
        .get_or_init(|| {
            // The seal needs everything the namespace needs and more, so where it works (as
            // on most machines) one throwaway child answers both; a tick pays for each.
            let (namespace, sealed) = match seal_probe() {
                Ok(()) => (Ok(NamespaceKind::UserAndMount), Ok(())),
                Err(seal) => {
                    let namespace = namespace_probe().map_err(Unavailable);
                    let sealed = match &namespace {
                        Ok(NamespaceKind::UserAndMount) => Err(Unavailable(seal)),
                        Ok(NamespaceKind::Mount) => Err(Unavailable(
                            "root may not make a user namespace here, which locks the mounts"
                                .into(),
                        )),
                        Err(why) => Err(why.clone()),
                    };
                    (namespace, sealed)
                }
            };
            Offer { landlock: landlock_abi().map_err(Unavailable), namespace, sealed }
        })
        .clone()
}

/// The kernel's Landlock ABI version.
fn landlock_abi() -> Result<u32, String> {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: the version query takes no ruleset attributes and returns a number.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    match r {
        n if n > 0 => Ok(n as u32),
        _ => {
            let e = std::io::Error::last_os_error();
            Err(match e.raw_os_error() {
                Some(libc::ENOSYS) => "this kernel has no Landlock (Linux 5.13 or later)".into(),
                Some(libc::EOPNOTSUPP) => "Landlock is not enabled at boot (lsm=landlock)".into(),
                _ => format!("Landlock is not available: {e}"),
            })
        }
    }
}

/// Tries what a confined child will do: a user and mount namespace (for root too, which
/// falls back to a mount namespace alone), a directory bound read-only, a `/dev` of its own.
fn namespace_probe() -> Result<NamespaceKind, String> {
    // Root too: a mount namespace alone would leave its children capabilities that undo
    // the read-only binds.
    let user = try_setup(Setup { maps: Some(super::own_maps()), ..probe_setup()? });
    match user {
        Ok(()) => Ok(NamespaceKind::UserAndMount),
        Err(why) => Err(format!("a user and mount namespace could not be made here: {why}")),
    }
}

/// Tries the seal: everything read-only but the temporary directory, a PID namespace with
/// its own `/proc`, the mounts locked.
fn seal_probe() -> Result<(), String> {
    let seal = Seal { writable: vec![dir()?] };
    let setup = Setup { maps: Some(super::own_maps()), seal: Some(seal), ..probe_setup()? };
    try_setup(setup).map_err(|why| format!("a sealed namespace could not be made here: {why}"))
}

fn dir() -> Result<CString, String> {
    let dir = std::env::temp_dir();
    CString::new(dir.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())
}

fn probe_setup() -> Result<Setup, String> {
    Ok(Setup { mount: true, readonly: vec![dir()?], ..Setup::default() })
}

/// Runs `/bin/true` under `setup`; what went wrong, if anything.
fn try_setup(setup: Setup) -> Result<(), String> {
    let mut command = Command::new("/bin/true");
    command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    // SAFETY: as in `Confine::apply`: the prepared data, async-signal-safe calls only.
    unsafe {
        command.pre_exec(move || child::enter(&setup, &[], None, 0));
    }
    match command.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(s.to_string()),
        Err(e) => Err(e.to_string()),
    }
}
