//! The end of a node's console log, for the "did not boot" message: the
//! log grows with every boot of a long run, so only its end is read.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// How much of a console log's end is read.
pub(super) const TAIL_BYTES: u64 = 64 * 1024;

/// The last `max` bytes of a file (lossy UTF-8, without the partial line
/// the cut leaves at the start), or "" when it cannot be read.
pub(super) fn read_end(path: &Path, max: u64) -> String {
    let Ok(mut file) = File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(max);
    if file.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut bytes = Vec::new();
    if file.take(max).read_to_end(&mut bytes).is_err() {
        return String::new();
    }
    let text = String::from_utf8_lossy(&bytes).into_owned();
    match (start > 0, text.split_once('\n')) {
        (true, Some((_, rest))) => rest.to_string(),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_end_is_read_and_the_cut_line_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("console.log");
        std::fs::write(&path, "first boot\nsecond boot\nthird\n").unwrap();
        // The whole file fits: all of it.
        assert_eq!(read_end(&path, 1024), "first boot\nsecond boot\nthird\n");
        // 12 bytes from the end start inside "second boot": that line goes.
        assert_eq!(read_end(&path, 12), "third\n");
        assert_eq!(read_end(&dir.path().join("absent"), 12), "");
    }
}
