//! Running a harness as another user (`user`, `group` in `harness.toml`): names resolved to
//! ids through the C library (so every NSS source counts, as systemd's `User=` does), the
//! user's supplementary groups, the environment a login would give, and the switch a child
//! makes before it execs. Only a daemon running as root can switch; one that is not may still
//! name its own user.

use crate::os::user::passwd;
use std::ffi::{CStr, CString};

/// Who a harness's processes run as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The user's name.
    pub user: String,
    /// Its uid.
    pub uid: u32,
    /// The group's name (the user's primary group unless `group` names another).
    pub group: String,
    /// Its gid.
    pub gid: u32,
    /// Supplementary groups: the user's, with `gid` among them.
    pub groups: Vec<u32>,
    /// The user's home directory, for `HOME`.
    pub home: String,
}

/// Resolves `user` (a name or a number) and `group` (likewise; the user's primary group when
/// `None`). A name that does not resolve is said as such.
pub fn resolve(user: &str, group: Option<&str>) -> Result<Identity, String> {
    let pw = passwd(user)?.ok_or_else(|| format!("user {user:?}: no such user"))?;
    let (group_name, gid) = match group {
        None => (group_name(pw.gid).unwrap_or_else(|| pw.gid.to_string()), pw.gid),
        Some(g) => lookup_group(g)?.ok_or_else(|| format!("group {g:?}: no such group"))?,
    };
    let mut groups = supplementary(&pw.name, gid);
    if !groups.contains(&gid) {
        groups.insert(0, gid);
    }
    Ok(Identity { user: pw.name, uid: pw.uid, group: group_name, gid, groups, home: pw.home })
}

impl Identity {
    /// Why this process cannot run a child as this identity, if it cannot: only root may
    /// become another user.
    pub fn refused(&self) -> Option<String> {
        let me = rustix::process::geteuid();
        let gid = rustix::process::getegid().as_raw();
        if me.is_root() || (me.as_raw() == self.uid && gid == self.gid) {
            return None;
        }
        Some(format!(
            "user {} (uid {}, gid {}): the daemon runs as uid {} and only root can run a \
             harness as another user",
            self.user,
            self.uid,
            self.gid,
            me.as_raw()
        ))
    }

    /// `HOME`, `USER` and `LOGNAME` as a login of this user would set them.
    pub fn login_env(&self) -> [(String, String); 3] {
        [
            ("HOME".into(), self.home.clone()),
            ("USER".into(), self.user.clone()),
            ("LOGNAME".into(), self.user.clone()),
        ]
    }

    /// Becomes this identity: supplementary groups, then the group, then the user (the
    /// order matters: after setuid the rest is no longer allowed). For a child between fork
    /// and exec: raw system calls only, nothing allocated and no lock taken. (The C library's
    /// wrappers would try to change the credentials of every thread of the daemon, which the
    /// child of a `clone3` still believes it has, and could wait for them forever.) A process
    /// that is not root is already this identity ([`Identity::refused`] said so): nothing to do,
    /// and setgroups would be refused.
    ///
    /// # Safety
    /// Changes the credentials of the calling thread; call it only in a freshly forked child,
    /// which has no other thread.
    pub unsafe fn become_it(&self) -> std::io::Result<()> {
        if libc::geteuid() != 0 {
            return Ok(());
        }
        let check = |rc: libc::c_long| {
            if rc < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        check(libc::syscall(libc::SYS_setgroups, self.groups.len(), self.groups.as_ptr()))?;
        check(libc::syscall(libc::SYS_setresgid, self.gid, self.gid, self.gid))?;
        check(libc::syscall(libc::SYS_setresuid, self.uid, self.uid, self.uid))
    }
}

fn lookup_group(group: &str) -> Result<Option<(String, u32)>, String> {
    let mut buf = vec![0 as libc::c_char; 64 * 1024];
    // SAFETY: an all-zero group is a valid value for getgrnam_r/getgrgid_r to fill in.
    let mut gr: libc::group = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::group = std::ptr::null_mut();
    let rc = match group.parse::<u32>() {
        // SAFETY: the buffers outlive the call.
        Ok(gid) => unsafe {
            libc::getgrgid_r(gid, &mut gr, buf.as_mut_ptr(), buf.len(), &mut found)
        },
        Err(_) => {
            let name = CString::new(group).map_err(|_| format!("group {group:?}: not a name"))?;
            // SAFETY: as above.
            unsafe {
                libc::getgrnam_r(name.as_ptr(), &mut gr, buf.as_mut_ptr(), buf.len(), &mut found)
            }
        }
    };
    if rc != 0 {
        return Err(format!("group {group:?}: {}", std::io::Error::from_raw_os_error(rc)));
    }
    if found.is_null() {
        return Ok(None);
    }
    // SAFETY: getgrnam_r filled `gr` with a NUL-terminated name inside `buf`.
    let name = unsafe { CStr::from_ptr(gr.gr_name).to_string_lossy().into_owned() };
    Ok(Some((name, gr.gr_gid)))
}

fn group_name(gid: u32) -> Option<String> {
    lookup_group(&gid.to_string()).ok().flatten().map(|(name, _)| name)
}

/// The groups `user` belongs to, `gid` included (getgrouplist).
fn supplementary(user: &str, gid: u32) -> Vec<u32> {
    let Ok(name) = CString::new(user) else { return vec![gid] };
    let mut n: libc::c_int = 64;
    loop {
        let mut groups = vec![0 as libc::gid_t; n as usize];
        let mut count = n;
        // SAFETY: `groups` holds `count` entries; getgrouplist writes at most that many and
        // says how many it needs when they do not fit.
        let rc = unsafe { libc::getgrouplist(name.as_ptr(), gid, groups.as_mut_ptr(), &mut count) };
        if rc >= 0 {
            groups.truncate(count as usize);
            return groups;
        }
        if count <= n || count > 65_536 {
            return vec![gid];
        }
        n = count;
    }
}

/// The `User=` and `Group=` lines of a system unit that runs its daemon as `user` (in that
/// user's primary group), the user checked to exist here; none without `user`. A unit of a
/// user's own systemd (`--user`) always runs as that user, so naming one there is refused.
pub fn unit_lines(user: Option<&str>, user_unit: bool) -> Result<String, String> {
    let Some(user) = user else { return Ok(String::new()) };
    if user_unit {
        return Err(format!(
            "--as {user}: a unit of the user's own systemd (--user) runs as that user; --as \
             names the user of a system unit"
        ));
    }
    let id = resolve(user, None).map_err(|e| format!("--as {user}: {e}"))?;
    Ok(format!("User={}\nGroup={}\n", id.user, id.group))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_resolves_by_name_and_number_and_unknown_names_are_said() {
        let by_name = resolve("root", None).unwrap();
        assert_eq!((by_name.uid, by_name.gid), (0, 0));
        assert!(by_name.groups.contains(&0));
        assert_eq!(resolve("0", Some("0")).unwrap().user, "root");
        let e = resolve("no-such-user-here", None).unwrap_err();
        assert!(e.contains("no such user"), "{e}");
        let e = resolve("root", Some("no-such-group-here")).unwrap_err();
        assert!(e.contains("no such group"), "{e}");
    }

    #[test]
    fn one_s_own_identity_is_never_refused() {
        let me = rustix::process::geteuid().as_raw();
        let own = resolve(&me.to_string(), Some(&rustix::process::getegid().as_raw().to_string()));
        assert_eq!(own.unwrap().refused(), None);
    }
}
