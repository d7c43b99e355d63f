//! Confinement of tool paths to the server's root.

use std::{
    io,
    path::{Component, Path, PathBuf},
};

/// Why a path given to a filesystem tool cannot be used.
#[derive(Debug)]
pub(crate) enum PathRefused {
    /// The path, once `..` and symbolic links are resolved, leaves the root.
    OutsideRoot,
    /// The path could not be resolved (a missing parent directory, a
    /// permission error...).
    Io(io::Error),
}

/// Resolves `requested` (absolute, or relative to `root`) to a path inside
/// `root`, which must already be canonical.
///
/// The check is made twice: lexically first, so that `..` cannot climb out
/// even through directories that do not exist, then on the canonical path,
/// so that a symbolic link inside the root cannot lead out of it. A path
/// that does not exist yet (a file about to be written) is checked through
/// its parent directory, which must exist.
pub(crate) fn resolve(root: &Path, requested: &str) -> Result<PathBuf, PathRefused> {
    let joined = root.join(requested);
    let normalized = normalize(&joined).ok_or(PathRefused::OutsideRoot)?;
    if !normalized.starts_with(root) {
        return Err(PathRefused::OutsideRoot);
    }
    let resolved = match std::fs::canonicalize(&normalized) {
        Ok(canonical) => canonical,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            // A file to be created: its parent must exist and be inside the
            // root, and the name itself cannot be a link yet.
            let (Some(parent), Some(name)) = (normalized.parent(), normalized.file_name()) else {
                return Err(PathRefused::Io(error));
            };
            if std::fs::symlink_metadata(&normalized).is_ok() {
                // A dangling symbolic link: where it points is unknown.
                return Err(PathRefused::OutsideRoot);
            }
            std::fs::canonicalize(parent)
                .map_err(PathRefused::Io)?
                .join(name)
        }
        Err(error) => return Err(PathRefused::Io(error)),
    };
    if resolved.starts_with(root) {
        Ok(resolved)
    } else {
        Err(PathRefused::OutsideRoot)
    }
}

/// Removes `.` and resolves `..` without touching the filesystem; `None` if
/// `..` would climb above the filesystem root.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut normalized = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !normalized.pop() {
                    return None;
                }
            }
            other => normalized.push(other),
        }
    }
    Some(normalized)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_dot_cannot_climb_out_through_missing_directories() {
        let root = Path::new("/srv/root");
        assert!(matches!(
            resolve(root, "missing/../../etc/passwd"),
            Err(PathRefused::OutsideRoot)
        ));
        assert!(matches!(
            resolve(root, "/etc/passwd"),
            Err(PathRefused::OutsideRoot)
        ));
    }
}
