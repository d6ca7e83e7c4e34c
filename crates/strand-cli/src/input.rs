//! Opening input files (snapshots, command logs): buffered, cancellable,
//! and with an `indicatif` progress bar on big files.

use std::fs::File;
use std::io::{self, BufReader, IsTerminal, Read};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use indicatif::{ProgressBar, ProgressFinish, ProgressStyle};

/// Files larger than this get a progress bar (when stderr is a terminal).
pub(crate) const PROGRESS_MIN_BYTES: u64 = 8 << 20;

/// Read buffer size for input files.
const BUFFER_BYTES: usize = 256 << 10;

/// A flag another thread sets to make a reader fail at its next read.
pub(crate) type CancelFlag = Arc<AtomicBool>;

/// A reader that fails once its [`CancelFlag`] is set, so a decoder
/// feeding a consumer that gave up stops early.
struct CancelReader<R> {
    inner: R,
    cancel: CancelFlag,
}

impl<R: Read> Read for CancelReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.cancel.load(Ordering::Relaxed) {
            return Err(io::Error::other("cancelled"));
        }
        self.inner.read(buf)
    }
}

/// An opened input file: buffered, and wrapped in a progress bar when it is
/// larger than [`PROGRESS_MIN_BYTES`] and stderr is a terminal (never in
/// tests or pipes). The bar clears itself when the reader is dropped.
pub(crate) type Input = BufReader<Box<dyn Read + Send>>;

/// Opens `path` for reading. `label` names the work in the progress bar
/// (`verifying`, `converting`, ...). With `cancel`, reads fail with
/// "cancelled" once the flag is set.
pub(crate) fn open(path: &Path, label: &str, cancel: Option<CancelFlag>) -> io::Result<Input> {
    let file = File::open(path)?;
    let len = file.metadata()?.len();
    let mut reader: Box<dyn Read + Send> = match cancel {
        Some(cancel) => Box::new(CancelReader {
            inner: file,
            cancel,
        }),
        None => Box::new(file),
    };
    if len > PROGRESS_MIN_BYTES && io::stderr().is_terminal() {
        reader = Box::new(progress_bar(len, label, path).wrap_read(reader));
    }
    Ok(BufReader::with_capacity(BUFFER_BYTES, reader))
}

fn progress_bar(len: u64, label: &str, path: &Path) -> ProgressBar {
    let style = ProgressStyle::with_template(
        "[{bar:30}] {binary_bytes}/{binary_total_bytes} {eta:>3} {wide_msg}",
    )
    .map(|s| s.progress_chars("=> "))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::new(len)
        .with_style(style)
        .with_message(format!("{label} {}", path.display()))
        .with_finish(ProgressFinish::AndClear)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_cancelled_reader_fails_at_its_next_read() {
        let cancel = CancelFlag::default();
        let mut reader = CancelReader {
            inner: &b"abcdef"[..],
            cancel: cancel.clone(),
        };
        let mut buf = [0u8; 3];
        assert_eq!(reader.read(&mut buf).unwrap(), 3);
        cancel.store(true, Ordering::Relaxed);
        let err = reader.read(&mut buf).unwrap_err();
        assert_eq!(err.to_string(), "cancelled");
    }
}
