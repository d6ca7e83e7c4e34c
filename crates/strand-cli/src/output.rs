//! Writing output files atomically: everything goes to a temporary file
//! beside the destination, which is renamed over it only once complete, so
//! a failure never leaves a partial file behind.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use strand::SnapshotFormat;
use tempfile::NamedTempFile;

/// A snapshot encoding named on the command line (`--to json|binary`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FormatArg {
    /// The reference's serde JSON.
    Json,
    /// strand's framed binary format.
    Binary,
}

impl From<FormatArg> for SnapshotFormat {
    fn from(arg: FormatArg) -> Self {
        match arg {
            FormatArg::Json => Self::Json,
            FormatArg::Binary => Self::Binary,
        }
    }
}

/// An output file being written: a temporary file in the destination's
/// directory until [`AtomicFile::commit`] renames it into place. Dropping
/// it uncommitted deletes the temporary file.
#[derive(Debug)]
pub(crate) struct AtomicFile {
    temp: NamedTempFile,
    dest: PathBuf,
    overwrite: bool,
}

impl AtomicFile {
    /// Starts writing `dest`. Without `overwrite`, fails at once when
    /// `dest` exists (and the final rename refuses to replace a file that
    /// appeared meanwhile).
    pub(crate) fn create(dest: &Path, overwrite: bool) -> anyhow::Result<Self> {
        if !overwrite && std::fs::symlink_metadata(dest).is_ok() {
            bail!(
                "{} already exists (pass --force to overwrite it)",
                dest.display()
            );
        }
        let dir = match dest.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let mut builder = tempfile::Builder::new();
        builder.prefix(".strand-").suffix(".tmp");
        // Like a file created the usual way (0666 less the umask), not the
        // owner-only mode of temporary files.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(0o666));
        }
        let temp = builder
            .tempfile_in(dir)
            .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
        Ok(Self {
            temp,
            dest: dest.to_owned(),
            overwrite,
        })
    }

    /// The temporary file to write to.
    pub(crate) fn file(&mut self) -> &mut File {
        self.temp.as_file_mut()
    }

    /// Syncs the temporary file to disk and renames it to the destination.
    /// Returns the file's length.
    pub(crate) fn commit(self) -> anyhow::Result<u64> {
        let Self {
            temp,
            dest,
            overwrite,
        } = self;
        let file = temp.as_file();
        file.sync_all()
            .with_context(|| format!("cannot write {}", dest.display()))?;
        let len = file
            .metadata()
            .with_context(|| format!("cannot write {}", dest.display()))?
            .len();
        let persisted = if overwrite {
            temp.persist(&dest)
        } else {
            temp.persist_noclobber(&dest)
        };
        persisted
            .map_err(|e| e.error)
            .with_context(|| format!("cannot create {}", dest.display()))?;
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::io::Write;

    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn commit_renames_and_drop_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out.bin");

        let mut abandoned = AtomicFile::create(&dest, false).unwrap();
        abandoned.file().write_all(b"partial").unwrap();
        assert_eq!(names(dir.path()).len(), 1, "the temporary file exists");
        drop(abandoned);
        assert!(names(dir.path()).is_empty(), "dropping removes it");

        let mut out = AtomicFile::create(&dest, false).unwrap();
        out.file().write_all(b"done").unwrap();
        assert_eq!(out.commit().unwrap(), 4);
        assert_eq!(names(dir.path()), ["out.bin"]);
        assert_eq!(std::fs::read(&dest).unwrap(), b"done");
    }

    #[cfg(unix)]
    #[test]
    fn the_output_gets_the_usual_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        File::create(&plain).unwrap();
        let dest = dir.path().join("out");
        AtomicFile::create(&dest, false).unwrap().commit().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dest), mode(&plain));
    }

    #[test]
    fn refuses_to_overwrite_without_force() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out.json");
        std::fs::write(&dest, b"old").unwrap();
        let err = AtomicFile::create(&dest, false).unwrap_err();
        assert!(err.to_string().contains("already exists"), "{err}");

        let mut out = AtomicFile::create(&dest, true).unwrap();
        out.file().write_all(b"new").unwrap();
        out.commit().unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"new");
        assert_eq!(names(dir.path()), ["out.json"]);
    }

    #[test]
    fn a_file_appearing_meanwhile_is_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out.json");
        let mut out = AtomicFile::create(&dest, false).unwrap();
        out.file().write_all(b"new").unwrap();
        std::fs::write(&dest, b"raced").unwrap();
        assert!(out.commit().is_err());
        assert_eq!(std::fs::read(&dest).unwrap(), b"raced");
        assert_eq!(names(dir.path()), ["out.json"]);
    }
}
