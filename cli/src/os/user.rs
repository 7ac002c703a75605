//! Users as the C library knows them (every NSS source counts, as systemd's `User=` does):
//! the password database's entry for a name or uid.

use std::ffi::{CStr, CString};

/// A user's entry in the password database.
pub struct Passwd {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: String,
}

/// The name of user `uid`, when the C library knows one.
pub fn user_name(uid: u32) -> Option<String> {
    passwd(&uid.to_string()).ok().flatten().map(|p| p.name)
}

/// The password database's entry for `user`, a name or a numeric uid.
pub fn passwd(user: &str) -> Result<Option<Passwd>, String> {
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: an all-zero passwd is a valid value for getpwnam_r/getpwuid_r to fill in.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    let rc = match user.parse::<u32>() {
        // SAFETY: the buffers outlive the call; `found` points into `pw` or is null.
        Ok(uid) => unsafe {
            libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut found)
        },
        Err(_) => {
            let name = CString::new(user).map_err(|_| format!("user {user:?}: not a name"))?;
            // SAFETY: as above.
            unsafe {
                libc::getpwnam_r(name.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut found)
            }
        }
    };
    if rc != 0 {
        return Err(format!("user {user:?}: {}", std::io::Error::from_raw_os_error(rc)));
    }
    if found.is_null() {
        return Ok(None);
    }
    // SAFETY: getpwnam_r filled `pw` with NUL-terminated strings inside `buf`.
    let text = |p: *const libc::c_char| unsafe {
        if p.is_null() {
            String::new()
        } else {
            CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    };
    Ok(Some(Passwd {
        name: text(pw.pw_name),
        uid: pw.pw_uid,
        gid: pw.pw_gid,
        home: text(pw.pw_dir),
    }))
}
