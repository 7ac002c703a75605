//! The workflow a run executes: the bytes its work item froze, copied into the run's directory
//! when the run first starts and checked there, so the file at the frozen path may change, or
//! be swapped back and forth, without ever changing what runs. A JavaScript module runs from
//! its copy's bytes under its own path (`node/hooks.mjs`), so its relative imports still
//! resolve beside it; those siblings are read as they are when imported (decision 0008).

use crate::os::store::{run_dir, Store};
use harn_core::hash::sha256_hex;
use harn_core::work::run::RunManifest;
use std::path::{Path, PathBuf};

/// The copy's file name in the run directory: `workflow` with the original's extension, so
/// an interpreter that goes by it (Node) reads it the same way.
pub(crate) fn copy_name(path: &str) -> String {
    match Path::new(path).extension().and_then(|e| e.to_str()) {
        Some(ext) => format!("workflow.{ext}"),
        None => "workflow".to_owned(),
    }
}

/// The run's copy of its workflow, made now from the frozen path (its digest checked) or, for
/// a resumed run, the one its first segment made; either way checked against the frozen
/// digest before it is returned. An error means nothing should be spawned.
pub fn install(store: &Store, m: &RunManifest) -> Result<PathBuf, String> {
    let name = copy_name(&m.script.path);
    let dir = run_dir(&m.run_id);
    let copy = store.root().join(format!("{dir}/{name}"));
    let frozen = &m.script.sha256;
    let check = |bytes: &[u8], what: &str| {
        let now = sha256_hex(bytes);
        match now == *frozen {
            true => Ok(()),
            false => Err(format!(
                "{what} is not the workflow the work item froze (sha256 {} now, {} then)",
                &now[..12],
                &frozen[..12.min(frozen.len())]
            )),
        }
    };
    let existing = crate::os::private::read_below(store.root(), &copy)
        .map_err(|e| format!("{}: {e}", copy.display()))?;
    if existing.is_none() {
        let source = Path::new(&m.script.path);
        let bytes = crate::input::read(source, crate::input::WORKFLOW_MAX)
            .map_err(|e| format!("workflow {e}"))?;
        check(&bytes, &m.script.path)?;
        crate::os::private::Dir::open(store.root(), &dir, false)
            .and_then(|d| d.replace_with_mode(&name, &bytes, 0o700))
            .map_err(|e| format!("{}: {e}", copy.display()))?;
    }
    let written = crate::os::private::read_below(store.root(), &copy)
        .map_err(|e| format!("{}: {e}", copy.display()))?
        .ok_or_else(|| format!("{}: gone after it was written", copy.display()))?;
    check(&written, &copy.display().to_string())?;
    Ok(copy)
}
