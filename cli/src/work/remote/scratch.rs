//! A user's own directory under a node's shared `scratch`, where remote segments and probes
//! make their clones.

use std::path::{Path, PathBuf};

/// This user's directory under `scratch` (`u<uid>`, 0700), made when missing. `scratch` is
/// shared by every user of a node, as `/tmp` is: made with the sticky bit when harn makes it,
/// and refused when another user could swap what is in it (writable by others without the
/// sticky bit, or owned by someone else than this user or root), since a clone's git
/// configuration names commands.
pub fn own_dir(scratch: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let shown = |e: std::io::Error| format!("{}: {e}", scratch.display());
    if !scratch.exists() {
        std::fs::create_dir_all(scratch).map_err(shown)?;
        std::fs::set_permissions(scratch, std::fs::Permissions::from_mode(0o1777))
            .map_err(shown)?;
    }
    let uid = rustix::process::getuid().as_raw();
    let meta = std::fs::metadata(scratch).map_err(shown)?;
    let open = meta.mode() & 0o002 != 0 && meta.mode() & 0o1000 == 0;
    if open || (meta.uid() != uid && meta.uid() != 0) {
        return Err(format!(
            "{} may be changed by other users: make it this user's, or sticky (chmod +t)",
            scratch.display()
        ));
    }
    let mine = scratch.join(format!("u{uid}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&mine) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("{}: {e}", mine.display())),
    }
    let meta = std::fs::symlink_metadata(&mine).map_err(|e| format!("{}: {e}", mine.display()))?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(format!("{} is not this user's own directory (0700)", mine.display()));
    }
    Ok(mine)
}
